/* git.c - running the git CLI for repository mirrors. */
#include "snapshot/git.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/spawn.h"

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

int git_exec(const struct git_exec *g, struct wr_error **err)
{
	const char *full[GIT_MAX_ARGS + 2];
	size_t n = 0;
	full[n++] = "git";
	for (size_t i = 0; g->argv[i]; i++) {
		if (n >= GIT_MAX_ARGS)
			return wr_error_set(err, E2BIG,
					    "git: too many arguments");
		full[n++] = g->argv[i];
	}
	full[n] = NULL;
	_cleanup_free_ char **env = g->vars ? git_env_with(g->vars) : NULL;
	if (g->vars && !env)
		return wr_error_set(err, ENOMEM, "git %s", g->argv[0]);
	struct spawn_call c = {
	    .argv = full,
	    .envp = env ? (const char *const *)env : git_locked_env(),
	    .in_fd = g->in_fd,
	    .out_fd = g->out_fd,
	    .out = g->out,
	    .out_len = g->out_len,
	    .out_max = g->out_max,
	    .timeout_ms = g->timeout_ms,
	};
	/* the verb, for messages: the first argument after -C DIR */
	const char *verb = full[1];
	for (size_t i = 1; full[i]; i++) {
		if (!strcmp(full[i], "-C") && full[i + 1]) {
			i++;
			continue;
		}
		if (full[i][0] != '-') {
			verb = full[i];
			break;
		}
	}
	int status = spawn_run(&c, err);
	if (status < 0)
		return wr_error_wrap(err, "git %s", verb);
	if (status != 0) {
		if (c.out && *c.out) {
			free(*c.out);
			*c.out = NULL;
		}
		wr_error_set(err, 0, "git %s failed: %s", verb,
			     c.err_tail[0] ? c.err_tail : "(no message)");
		return -EIO;
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
	size_t len = 0;
	struct git_exec g = {
	    .argv = argv,
	    .in_fd = -1,
	    .out_fd = -1,
	    .out = out,
	    .out_len = &len,
	    .out_max = out ? max_out : 0,
	};
	int r = git_exec(&g, err);
	if (r == 0 && len_out)
		*len_out = len;
	return r;
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
		/* clone next to it, then publish by rename (the thread's id
		 * in the name: two sessions' runners of one server may both
		 * clone it at once, the first rename wins) */
		_cleanup_free_ char *tmp =
		    wr_asprintf("%s/repos/.%s.%d.%d", data_dir, key,
				(int)getpid(), (int)gettid());
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
		return wr_error_absent(err, true, "ref '%s' not found",
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

/* A path as git prints it with core.quotePath, unquoted: "..." with \a
 * \b \t \n \v \f \r \" \\ and \ooo (one byte, octal) escapes; a path
 * without quotes is as it is. NULL when malformed (or a NUL inside), or
 * out of memory. */
char *git_unquote_path(const char *text)
{
	size_t len = strlen(text);
	if (text[0] != '"')
		return wr_strdup(text);
	if (len < 2 || text[len - 1] != '"')
		return NULL;
	char *out = wr_malloc(len); /* never longer than the quoted form */
	if (!out)
		return NULL;
	char *o = out;
	const char *end = text + len - 1; /* the closing quote */
	for (const char *p = text + 1; p < end; p++) {
		if (*p == '"')
			goto bad;
		if (*p != '\\') {
			*o++ = *p;
			continue;
		}
		if (++p >= end)
			goto bad;
		switch (*p) {
		case 'a': *o++ = '\a'; break;
		case 'b': *o++ = '\b'; break;
		case 't': *o++ = '\t'; break;
		case 'n': *o++ = '\n'; break;
		case 'v': *o++ = '\v'; break;
		case 'f': *o++ = '\f'; break;
		case 'r': *o++ = '\r'; break;
		case '"':
		case '\\': *o++ = *p; break;
		case '0':
		case '1':
		case '2':
		case '3': {
			if (end - p < 3 || p[1] < '0' || p[1] > '7' ||
			    p[2] < '0' || p[2] > '7')
				goto bad;
			int v =
			    (p[0] - '0') * 64 + (p[1] - '0') * 8 + (p[2] - '0');
			if (v == 0)
				goto bad;
			*o++ = (char)v;
			p += 2;
			break;
		}
		default: goto bad;
		}
	}
	*o = '\0';
	return out;
bad:
	free(out);
	return NULL;
}
