/* script.h - the shell scripts that run a spec's hooks and services inside
 * a sandbox (snapshot builds and session starts). Module-internal.
 *
 * Scripts report to the host through marker lines on their output:
 *   @@warren-phase NAME NANOSECONDS   a phase starts (CLOCK_REALTIME ns)
 *   @@warren-hook NAME                a hook or service starts
 *   @@warren-failed NAME STATUS       a hook failed; the script exits STATUS */
#ifndef WR_SNAPSHOT_SCRIPT_H
#define WR_SNAPSHOT_SCRIPT_H

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
