/* git.h - the git CLI, run on the host for a snapshot's repository mirror.
 *
 * Every repository Warren builds from has a bare mirror under the data
 * directory (repos/<sha256 of the URL>.git). Sandboxes never reach the
 * network for it: builds and drift syncs clone and fetch from the mirror,
 * bound read-only into the sandbox. */
#ifndef WR_SNAPSHOT_GIT_H
#define WR_SNAPSHOT_GIT_H

#include "util/error.h"
#include "util/gitenv.h" /* every git below runs in git_locked_env() */

#include <stddef.h>
#include <stdint.h>

/* One host git: argv without "git"; vars added to the locked environment
 * (GIT_DIR, GIT_INDEX_FILE, the author...); stdin from in_fd (-1:
 * /dev/null); stdout into out_fd, or captured into *out (NUL-ended), or
 * dropped; out_max caps it (0: 1 MiB; more is -EFBIG). Returns 0, or
 * -errno; a non-zero exit is -EIO with git's last words in err. */
struct git_exec {
	const char *const *argv;
	const char *const *vars;
	int in_fd;
	int out_fd;
	char **out;
	size_t *out_len;
	uint64_t out_max;
	uint64_t timeout_ms;
};
int git_exec(const struct git_exec *g, struct wr_error **err);

/* Runs git with argv (without "git"), stdin from /dev/null, a clean
 * environment (no prompts, no user config). Captures up to max_out bytes
 * of stdout into *out (if out); stderr into err's message on failure.
 * Returns 0 or -errno; a non-zero exit is -EIO with git's stderr tail. */
int git_run(const char *const argv[], char **out, size_t max_out,
	    struct wr_error **err);
/* The mirror of repo (a local path or any git URL) under data_dir: cloned
 * if missing, fetched otherwise. Returns its path (caller frees). */
char *git_mirror_update(const char *data_dir, const char *repo,
			struct wr_error **err);
/* How a repository is recorded: the absolute path of a local one, else the
 * URL as given (caller frees). */
char *git_repo_canonical(const char *repo);
/* The path the mirror of repo has (whether it exists or not). */
char *git_mirror_path(const char *data_dir, const char *repo,
		      struct wr_error **err);
/* The commit a ref names in the mirror (NULL ref: HEAD), as 40 hex. */
int git_resolve(const char *mirror, const char *ref, char commit[41],
		struct wr_error **err);
/* The content of path at commit, or -ENOENT. */
int git_show_file(const char *mirror, const char *commit, const char *path,
		  size_t max, char **out, size_t *out_len,
		  struct wr_error **err);
/* Names at the root of commit's tree, NULL-terminated (caller frees with
 * git_free_list). */
char **git_root_names(const char *mirror, const char *commit,
		      struct wr_error **err);
void git_free_list(char **list);
/* Number of commits in old..new (0 if old == new), or -errno. */
int git_count_between(const char *mirror, const char *old_commit,
		      const char *new_commit, struct wr_error **err);

/* A path as git prints it with core.quotePath (on by default: every
 * record one line), unquoted: "..." with \a \b \t \n \v \f \r \" \\ and
 * \ooo (one byte, octal) escapes; a path without quotes is as it is.
 * NULL when malformed (or a NUL inside), or out of memory. Caller frees. */
char *git_unquote_path(const char *text);

#endif
