/* gitenv.c - the locked-down environment of host git (gitenv.h). */
#include "util/gitenv.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <stddef.h>

/* The one locked-down environment of every git Warren runs on the host:
 * no prompt, no system, global or user configuration, no system
 * attributes, no replace objects (a replacement would let an object stand
 * for another), and, as command-line configuration (the highest
 * precedence, above any repository's), no hooks, no fsmonitor program, no
 * attributes or exclude file, no ext:: transport. Host git never opens a
 * repository the agent can write, so no configuration, hook or attribute
 * of the agent's is read; these settings make sure nothing else is
 * either. */
static const char *const locked_env[] = {
    "PATH=/usr/local/bin:/usr/bin:/bin",
    "HOME=/nonexistent",
    "XDG_CONFIG_HOME=/nonexistent",
    "GIT_TERMINAL_PROMPT=0",
    "GIT_CONFIG_NOSYSTEM=1",
    "GIT_CONFIG_GLOBAL=/dev/null",
    "GIT_ATTR_NOSYSTEM=1",
    "GIT_NO_REPLACE_OBJECTS=1",
    "GIT_ASKPASS=/bin/false",
    "SSH_ASKPASS=/bin/false",
    "LC_ALL=C",
    "GIT_CONFIG_KEY_0=core.hooksPath",
    "GIT_CONFIG_VALUE_0=/dev/null",
    "GIT_CONFIG_KEY_1=core.fsmonitor",
    "GIT_CONFIG_VALUE_1=false",
    "GIT_CONFIG_KEY_2=core.attributesFile",
    "GIT_CONFIG_VALUE_2=/dev/null",
    "GIT_CONFIG_KEY_3=core.excludesFile",
    "GIT_CONFIG_VALUE_3=/dev/null",
    "GIT_CONFIG_KEY_4=protocol.ext.allow",
    "GIT_CONFIG_VALUE_4=never",
    "GIT_CONFIG_KEY_5=gc.auto",
    "GIT_CONFIG_VALUE_5=0",
    "GIT_CONFIG_COUNT=" GIT_LOCKED_CONFIG_COUNT_TEXT,
    NULL,
};

const char *const *git_locked_env(void)
{
	return locked_env;
}

char **git_env_with(const char *const *vars)
{
	size_t n = ARRAY_SIZE(locked_env) - 1, nv = 0;
	while (vars && vars[nv])
		nv++;
	char **env = wr_calloc(n + nv + 1, sizeof(char *));
	if (!env)
		return NULL;
	/* the extra variables first: getenv() takes the first match */
	for (size_t i = 0; i < nv; i++)
		env[i] = (char *)vars[i];
	for (size_t i = 0; i < n; i++)
		env[nv + i] = (char *)locked_env[i];
	return env;
}
