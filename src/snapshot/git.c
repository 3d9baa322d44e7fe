/* git.c - running the git CLI for repository mirrors. */
#include "snapshot/git.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sodium.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define GIT_MAX_ARGS 32
#define GIT_ERR_TAIL 2048

/* No prompt may block a build, and no user's configuration applies. */
static char *const git_env[] = {
    "PATH=/usr/local/bin:/usr/bin:/bin",
    "HOME=/nonexistent",
    "GIT_TERMINAL_PROMPT=0",
    "GIT_CONFIG_NOSYSTEM=1",
    "GIT_CONFIG_GLOBAL=/dev/null",
    "GIT_ASKPASS=/bin/false",
    "SSH_ASKPASS=/bin/false",
    "LC_ALL=C",
    NULL,
};

/* Reads both pipes until EOF, keeping up to max_out of stdout and the last
 * GIT_ERR_TAIL bytes of stderr. */
static int drain(int out_fd, int err_fd, char *out, size_t max_out,
		 size_t *out_len, char *err_tail, size_t *err_len)
{
	bool out_open = out_fd >= 0, err_open = true;
	*out_len = 0;
	*err_len = 0;
	while (out_open || err_open) {
		struct pollfd pfd[2] = {{out_open ? out_fd : -1, POLLIN, 0},
					{err_open ? err_fd : -1, POLLIN, 0}};
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		char buf[8192];
		if (pfd[0].revents) {
			ssize_t n = read(out_fd, buf, sizeof(buf));
			if (n <= 0) {
				out_open = false;
			} else if (out) {
				size_t take = (size_t)n;
				if (*out_len + take > max_out)
					return -EFBIG;
				memcpy(out + *out_len, buf, take);
				*out_len += take;
			}
		}
		if (pfd[1].revents) {
			ssize_t n = read(err_fd, buf, sizeof(buf));
			if (n <= 0) {
				err_open = false;
			} else {
				size_t take = (size_t)n;
				if (take >= GIT_ERR_TAIL) {
					memcpy(err_tail,
					       buf + take - GIT_ERR_TAIL + 1,
					       GIT_ERR_TAIL - 1);
					*err_len = GIT_ERR_TAIL - 1;
				} else {
					if (*err_len + take >= GIT_ERR_TAIL) {
						size_t drop =
						    *err_len + take -
						    (GIT_ERR_TAIL - 1);
						memmove(err_tail,
							err_tail + drop,
							*err_len - drop);
						*err_len -= drop;
					}
					memcpy(err_tail + *err_len, buf, take);
					*err_len += take;
				}
			}
		}
	}
	return 0;
}

static int git_run_len(const char *const argv[], char **out, size_t *len_out,
		       size_t max_out, struct wr_error **err);

int git_run(const char *const argv[], char **out, size_t max_out,
	    struct wr_error **err)
{
	return git_run_len(argv, out, NULL, max_out, err);
}

static int git_run_len(const char *const argv[], char **out, size_t *len_out,
		       size_t max_out, struct wr_error **err)
{
	const char *full[GIT_MAX_ARGS + 2];
	size_t n = 0;
	full[n++] = "git";
	for (size_t i = 0; argv[i]; i++) {
		if (n >= GIT_MAX_ARGS)
			return wr_error_set(err, E2BIG,
					    "git: too many arguments");
		full[n++] = argv[i];
	}
	full[n] = NULL;
	int op[2] = {-1, -1}, ep[2];
	if (pipe2(ep, O_CLOEXEC) < 0)
		return wr_error_set(err, errno, "git: pipe");
	if (out && pipe2(op, O_CLOEXEC) < 0) {
		int r = wr_error_set(err, errno, "git: pipe");
		close(ep[0]);
		close(ep[1]);
		return r;
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (out)
		posix_spawn_file_actions_adddup2(&fa, op[1], 1);
	else
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY,
						 0);
	posix_spawn_file_actions_adddup2(&fa, ep[1], 2);
	pid_t pid;
	int r =
	    posix_spawnp(&pid, "git", &fa, NULL, (char *const *)full, git_env);
	posix_spawn_file_actions_destroy(&fa);
	close(ep[1]);
	if (out)
		close(op[1]);
	if (r != 0) {
		close(ep[0]);
		if (out)
			close(op[0]);
		return wr_error_set(err, r, "run git (is git installed?)");
	}
	_cleanup_free_ char *buf = out ? wr_malloc(max_out + 1) : NULL;
	char tail[GIT_ERR_TAIL];
	size_t out_len = 0, err_len = 0;
	int dr = (out && !buf) ? -ENOMEM
			       : drain(out ? op[0] : -1, ep[0], buf, max_out,
				       &out_len, tail, &err_len);
	close(ep[0]);
	if (out)
		close(op[0]);
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (dr < 0)
		return wr_error_set(err, -dr, "git %s: output", full[1]);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		tail[err_len] = '\0';
		while (err_len && (tail[err_len - 1] == '\n'))
			tail[--err_len] = '\0';
		wr_error_set(err, 0, "git %s failed: %s", full[1],
			     err_len ? tail : "(no message)");
		return -EIO;
	}
	if (out) {
		buf[out_len] = '\0';
		*out = TAKE_PTR(buf);
		if (len_out)
			*len_out = out_len;
	}
	return 0;
}

static void hex_sha256(const void *data, size_t len, char hex[65])
{
	unsigned char digest[crypto_hash_sha256_BYTES];
	crypto_hash_sha256(digest, data, len);
	sodium_bin2hex(hex, 65, digest, sizeof(digest));
}

/* The mirror's name: sha256 of the repository's absolute path or URL. */
static int mirror_key(const char *repo, char key[65], const char **source,
		      char real[4096], struct wr_error **err)
{
	if (sodium_init() < 0)
		return wr_error_set(err, EIO, "libsodium init");
	*source = repo;
	if (realpath(repo, real))
		*source = real;
	else if (!strstr(repo, "://") && !strchr(repo, '@'))
		return wr_error_input(err, errno, "repository %s", repo);
	hex_sha256(*source, strlen(*source), key);
	return 0;
}

char *git_repo_canonical(const char *repo)
{
	char real[4096];
	if (!strstr(repo, "://") && realpath(repo, real))
		return wr_strdup(real);
	return wr_strdup(repo);
}

char *git_mirror_path(const char *data_dir, const char *repo,
		      struct wr_error **err)
{
	char key[65], real[4096];
	const char *source;
	if (mirror_key(repo, key, &source, real, err) < 0)
		return NULL;
	char *path = wr_asprintf("%s/repos/%s.git", data_dir, key);
	if (!path)
		wr_error_set(err, ENOMEM, "mirror path");
	return path;
}

char *git_mirror_update(const char *data_dir, const char *repo,
			struct wr_error **err)
{
	char key[65], real[4096];
	const char *source;
	if (mirror_key(repo, key, &source, real, err) < 0)
		return NULL;
	_cleanup_free_ char *repos = wr_asprintf("%s/repos", data_dir);
	char *mirror = wr_asprintf("%s/repos/%s.git", data_dir, key);
	if (!repos || !mirror) {
		free(mirror);
		wr_error_set(err, ENOMEM, "mirror path");
		return NULL;
	}
	wr_mkdir_p(repos, 0700);
	struct stat st;
	int r;
	if (stat(mirror, &st) == 0) {
		const char *argv[] = {
		    "-C",      mirror,	 "fetch",	   "--quiet",
		    "--prune", "origin", "+refs/*:refs/*", NULL};
		r = git_run(argv, NULL, 0, err);
	} else {
		/* clone next to it, then publish by rename */
		_cleanup_free_ char *tmp = wr_asprintf(
		    "%s/repos/.%s.%d", data_dir, key, (int)getpid());
		if (!tmp) {
			free(mirror);
			wr_error_set(err, ENOMEM, "mirror path");
			return NULL;
		}
		wr_rm_rf(tmp);
		/* "--": a repository named like an option stays a name */
		const char *argv[] = {"clone", "--quiet", "--mirror", "--",
				      source,  tmp,	  NULL};
		r = git_run(argv, NULL, 0, err);
		if (r == 0 && rename(tmp, mirror) < 0 && errno != ENOTEMPTY &&
		    errno != EEXIST)
			r = wr_error_set(err, errno, "publish mirror %s",
					 mirror);
		wr_rm_rf(tmp);
	}
	if (r < 0) {
		wr_error_wrap(err, "mirror %s", source);
		free(mirror);
		return NULL;
	}
	return mirror;
}

int git_resolve(const char *mirror, const char *ref, char commit[41],
		struct wr_error **err)
{
	_cleanup_free_ char *spec =
	    wr_asprintf("%s^{commit}", ref ? ref : "HEAD");
	if (!spec)
		return wr_error_set(err, ENOMEM, "git rev-parse");
	if (ref && (ref[0] == '-' || strlen(ref) > 255))
		return wr_error_input(err, EINVAL, "--ref '%s': not a ref",
				      ref);
	const char *argv[] = {"-C",	 mirror, "rev-parse", "--verify",
			      "--quiet", spec,	 NULL};
	_cleanup_free_ char *out = NULL;
	int r = git_run(argv, &out, 4096, err);
	if (r < 0) {
		wr_error_free(err ? *err : NULL);
		if (err)
			*err = NULL;
		return wr_error_input(err, ENOENT, "ref '%s' not found",
				      ref ? ref : "HEAD");
	}
	size_t len = strcspn(out, "\n");
	if (len != 40)
		return wr_error_set(err, EPROTO,
				    "git rev-parse: unexpected '%s'", out);
	memcpy(commit, out, 40);
	commit[40] = '\0';
	return 0;
}

int git_show_file(const char *mirror, const char *commit, const char *path,
		  size_t max, char **out, size_t *out_len,
		  struct wr_error **err)
{
	_cleanup_free_ char *obj = wr_asprintf("%s:%s", commit, path);
	if (!obj)
		return wr_error_set(err, ENOMEM, "git cat-file");
	/* does it exist (as a blob)? */
	const char *check[] = {"-C", mirror, "cat-file", "-e", obj, NULL};
	struct wr_error *ignored = NULL;
	if (git_run(check, NULL, 0, &ignored) < 0) {
		wr_error_free(ignored);
		return -ENOENT;
	}
	const char *argv[] = {"-C", mirror, "cat-file", "blob", obj, NULL};
	char *text = NULL;
	size_t len = 0;
	int r = git_run_len(argv, &text, &len, max, err);
	if (r < 0)
		return r;
	*out_len = len; /* the whole blob, NUL bytes included */
	*out = text;
	return 0;
}

char **git_root_names(const char *mirror, const char *commit,
		      struct wr_error **err)
{
	const char *argv[] = {"-C", mirror, "ls-tree", "--name-only",
			      "-z", commit, NULL};
	_cleanup_free_ char *out = NULL;
	if (git_run(argv, &out, 4 << 20, err) < 0)
		return NULL;
	size_t n = 0;
	for (const char *p = out; *p; p += strlen(p) + 1)
		n++;
	char **list = wr_calloc(n + 1, sizeof(char *));
	if (!list) {
		wr_error_set(err, ENOMEM, "git ls-tree");
		return NULL;
	}
	size_t i = 0;
	for (const char *p = out; *p && i < n; p += strlen(p) + 1) {
		list[i] = wr_strdup(p);
		if (!list[i]) {
			git_free_list(list);
			wr_error_set(err, ENOMEM, "git ls-tree");
			return NULL;
		}
		i++;
	}
	return list;
}

void git_free_list(char **list)
{
	for (size_t i = 0; list && list[i]; i++)
		free(list[i]);
	free(list);
}

int git_count_between(const char *mirror, const char *old_commit,
		      const char *new_commit, struct wr_error **err)
{
	_cleanup_free_ char *range =
	    wr_asprintf("%s..%s", old_commit, new_commit);
	if (!range)
		return wr_error_set(err, ENOMEM, "git rev-list");
	const char *argv[] = {"-C", mirror, "rev-list", "--count", range, NULL};
	_cleanup_free_ char *out = NULL;
	int r = git_run(argv, &out, 64, err);
	if (r < 0)
		return r;
	return atoi(out);
}
