/* gitenv.h - the one locked-down environment of every git the host runs.
 *
 * Every host git (snapshot/git.c's mirrors and files, the evidence and the
 * push in review/, the credential broker in security/) runs in it
 * (gitenv.c says what it holds): no configuration but the repository's
 * own and the lock-down's, no hooks, fsmonitor, attributes or replace
 * objects, no ext:: transport, no prompt. The lock-down's configuration
 * is GIT_CONFIG_KEY_0.. up to GIT_LOCKED_CONFIG_COUNT - 1; a caller that
 * adds its own keys numbers them from there and replaces
 * GIT_CONFIG_COUNT. */
#ifndef WR_UTIL_GITENV_H
#define WR_UTIL_GITENV_H

#define GIT_LOCKED_CONFIG_COUNT 6
#define GIT_LOCKED_CONFIG_COUNT_TEXT "6"

/* The environment, NULL-terminated; GIT_CONFIG_COUNT is its last entry. */
const char *const *git_locked_env(void);
/* The locked environment with vars ("NAME=value", NULL-terminated) in
 * front (they win over the lock-down's): an array of borrowed strings,
 * the caller frees the array only. NULL when out of memory. */
char **git_env_with(const char *const *vars);

#endif
