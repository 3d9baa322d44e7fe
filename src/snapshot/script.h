/* script.h - the shell scripts that run a spec's hooks and services inside
 * a sandbox (snapshot builds and session starts). Module-internal.
 *
 * Scripts report to the host through marker lines on their output:
 *   @@warren-phase NAME NANOSECONDS   a phase starts (CLOCK_REALTIME ns)
 *   @@warren-hook NAME                a hook or service starts
 *   @@warren-failed NAME STATUS       a hook failed; the script exits STATUS
 *   @@warren-why TEXT                 why, when more can be said (a probe
 *                                     that timed out)
 *   @@warren-tail-reset               the output so far is not the failure's:
 *                                     an error's tail starts after it */
#ifndef WR_SNAPSHOT_SCRIPT_H
#define WR_SNAPSHOT_SCRIPT_H

#include "security/secrets.h"
#include "snapshot/spec.h"

#include <stdbool.h>
#include <stdio.h>

/* 'text', safe for any bytes but NUL. */
void sh_quote(FILE *f, const char *text);
void sh_command(FILE *f, const struct spec_command *cmd);
bool sh_command_set(const struct spec_command *cmd);
/* Runs a hook (string, argv or parallel named commands); a failure prints
 * the @@warren-failed marker and exits with the hook's status. */
void sh_hook(FILE *f, const char *name, const struct spec_hook *hook);
void sh_phase(FILE *f, const char *phase);

/* Secrets of a build step (docs/security.md, "Secrets"). The builder
 * writes sh_secrets_payload() to the step's stdin, a pipe: never to argv,
 * an environment or a file. sh_secrets_read(), first thing in the script,
 * reads it into shell variables warren_secret_NAME that are not exported
 * (so no process sees them) and points stdin back at /dev/null;
 * sh_hook_secrets() runs each command of a hook in a subshell that
 * exports NAME="$warren_secret_NAME", so the hook's processes, and nothing
 * else of the script, have them in their environment; sh_secrets_forget()
 * unsets the variables once the hook is done. */
void sh_secrets_read(FILE *f, const struct secret_set *secrets);
void sh_hook_secrets(FILE *f, const char *name, const struct spec_hook *hook,
		     const struct secret_set *secrets);
void sh_secrets_forget(FILE *f, const struct secret_set *secrets);
/* "warren_secret_NAME='value'" lines, quoted as sh_quote does (one
 * allocation of the exact size, so no stray copy is left behind by a
 * realloc). NULL on failure; free with secrets_value_free(text, *len). */
char *sh_secrets_payload(const struct secret_set *secrets, size_t *len);
/* export K=V for containerEnv. */
void sh_env(FILE *f, const struct spec *spec);
/* Starts every service in the background and waits (60 s at most) until
 * its ready probe passes. */
void sh_services_start(FILE *f, const struct spec *spec);
/* Stops them (stop command, else SIGTERM) and waits for them. */
void sh_services_stop(FILE *f, const struct spec *spec);

/* Runs body(f, arg) into a new string (caller frees); NULL on failure. */
char *sh_script(void (*body)(FILE *f, const void *arg), const void *arg);

/* Where a repository's mirror is bound inside build and session
 * sandboxes (read-only). */
#define MIRROR_IN_SANDBOX "/run/warren-src/repo.git"

#endif
