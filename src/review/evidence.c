/* evidence.c - the change, imported, judged and committed on the host
 * (evidence.h). */
#include "review/evidence.h"

#include "sandbox/request.h"

#include "snapshot/git.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EXPORT_TIMEOUT_MS (5ull * 60 * 1000)
#define GIT_HOST_TIMEOUT_MS (5ull * 60 * 1000)
#define LEFT_OUT_SHOWN 20
#define FILES_SHOWN 200
#define SYMLINK_MAX 4096
#define ZERO_ID "0000000000000000000000000000000000000000"

/* The work tree becomes a tree through a scratch git directory in /tmp
 * (no configuration, no info/exclude, no hooks: the workspace's .git/config
 * and its filter, textconv or fsmonitor programs are never read; its
 * objects are borrowed read-only, new ones are written to the scratch
 * directory, and the index is a copy of the workspace's for its stat
 * cache). The objects the base's tree does not hold leave as a pack on
 * stdout, the tree's id as the last line of stderr. This still runs
 * inside the agent's sandbox, where every binary is the agent's to
 * replace: the output is only bytes for the host to check. */
static const char export_script[] =
    "set -e\n"
    "cd /workspace\n"
    "g=$(mktemp -d /tmp/.warren-export.XXXXXX)\n"
    "trap 'rm -rf \"$g\"' EXIT\n"
    "mkdir -p \"$g/objects/info\" \"$g/refs\"\n"
    "echo 'ref: refs/heads/none' >\"$g/HEAD\"\n"
    "echo /workspace/.git/objects >\"$g/objects/info/alternates\"\n"
    "export GIT_DIR=\"$g\" GIT_WORK_TREE=/workspace "
    "GIT_INDEX_FILE=\"$g/index\" GIT_CONFIG_NOSYSTEM=1 "
    "GIT_CONFIG_GLOBAL=/dev/null HOME=/nonexistent "
    "XDG_CONFIG_HOME=/nonexistent GIT_ATTR_NOSYSTEM=1 "
    "GIT_NO_REPLACE_OBJECTS=1\n"
    "{ cp .git/index \"$g/index\" && git ls-files -s >/dev/null; } "
    "2>/dev/null || { rm -f \"$g/index\"; git read-tree \"$1\"; }\n"
    "git -c core.hooksPath=/dev/null -c core.fsmonitor=false "
    "-c core.excludesFile=/dev/null add -A .\n"
    "t=$(git write-tree)\n"
    "printf '%s\\n--not\\n%s^{tree}\\n' \"$t\" \"$1\" | "
    "git pack-objects --revs --stdout -q\n"
    "echo \"@@warren-tree $t\" >&2\n";

char *evidence_repo_path(const char *data_dir, const char *session_id)
{
	return wr_asprintf("%s/sessions/%s/evidence/result.git", data_dir,
			   session_id);
}

char *evidence_bundle_dir(const char *data_dir, const char *session_id)
{
	return wr_asprintf("%s/sessions/%s/evidence/verify", data_dir,
			   session_id);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static bool is_hex40(const char *s)
{
	return s && strlen(s) == 40 && strspn(s, "0123456789abcdef") == 40;
}

/* git with GIT_DIR=repo (and more vars), output captured. */
static int qgit(const char *repo, const char *const *argv,
		const char *const *more_vars, int in_fd, char **out,
		size_t *out_len, uint64_t max, struct wr_error **err)
{
	_cleanup_free_ char *gd = wr_asprintf("GIT_DIR=%s", repo);
	if (!gd)
		return wr_error_set(err, ENOMEM, "git");
	const char *vars[8] = {gd};
	size_t n = 1;
	for (size_t i = 0; more_vars && more_vars[i] && n < 7; i++)
		vars[n++] = more_vars[i];
	vars[n] = NULL;
	struct git_exec g = {
	    .argv = argv,
	    .vars = vars,
	    .in_fd = in_fd,
	    .out_fd = -1,
	    .out = out,
	    .out_len = out_len,
	    .out_max = max,
	    .timeout_ms = GIT_HOST_TIMEOUT_MS,
	};
	return git_exec(&g, err);
}

/* A memory file holding data, at offset 0: a child's stdin. */
static int memfd_with(const void *data, size_t len)
{
	int fd = memfd_create("warren-evidence", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	const char *p = data;
	while (len) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			int e = -errno;
			close(fd);
			return e;
		}
		p += w;
		len -= (size_t)w;
	}
	lseek(fd, 0, SEEK_SET);
	return fd;
}

/* The quarantine: a bare repository of Warren's own whose object store
 * borrows the mirror's (alternates) for everything the base holds. */
static int quarantine_open(const char *repo, const char *mirror,
			   struct wr_error **err)
{
	struct stat st;
	if (stat(repo, &st) < 0) {
		_cleanup_free_ char *parent = wr_strdup(repo);
		if (!parent)
			return wr_error_set(err, ENOMEM, "quarantine");
		*strrchr(parent, '/') = '\0';
		int r = wr_mkdir_p(parent, 0700);
		if (r < 0)
			return wr_error_set(err, -r, "mkdir %s", parent);
		const char *argv[] = {"init", "-q", "--bare", repo, NULL};
		struct git_exec g = {.argv = argv, .in_fd = -1, .out_fd = -1};
		r = git_exec(&g, err);
		if (r < 0)
			return wr_error_wrap(err, "quarantine %s", repo);
	}
	_cleanup_free_ char *alt =
	    wr_asprintf("%s/objects/info/alternates", repo);
	_cleanup_free_ char *line = wr_asprintf("%s/objects\n", mirror);
	if (!alt || !line)
		return wr_error_set(err, ENOMEM, "quarantine");
	int r = wr_write_file_atomic(alt, line, strlen(line), 0600, false);
	if (r < 0)
		return wr_error_set(err, -r, "write %s", alt);
	return 0;
}

/* Streams the agent's tree out of its sandbox into pack_path; *tree gets
 * the id the export named. */
static int export_tree(const struct evidence_request *q, const char *pack_path,
		       uint64_t max, char tree[41], uint64_t *bytes,
		       struct wr_error **err)
{
	_cleanup_close_ int fd =
	    open(pack_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return wr_error_set(err, errno, "open %s", pack_path);
	char *cmd[] = {"/bin/sh", "-c", (char *)export_script,
		       "warren-export", (char *)q->base, NULL};
	struct sandbox_exec_cmd ex = {
	    .name = q->sandbox, .cwd = "/workspace", .argv = cmd};
	struct sandbox_cmdline cl;
	int built = sandbox_cmdline_exec(q->warren_bin, &ex, &cl);
	if (built < 0)
		return wr_error_set(err, -built, "read the work tree");
	const char *const *argv = (const char *const *)cl.argv;
	const char *const env[] = {"PATH=/usr/bin:/bin", "LC_ALL=C",
				   sandbox_runtime_env(), NULL};
	size_t len = 0;
	struct spawn_call c = {
	    .argv = argv,
	    .envp = env,
	    .in_fd = -1,
	    .out_fd = fd,
	    .out_len = &len,
	    .out_max = max,
	    .timeout_ms = EXPORT_TIMEOUT_MS,
	};
	int status = spawn_run(&c, err);
	sandbox_cmdline_clear(&cl);
	if (status == -EFBIG) {
		wr_error_freep(err);
		return wr_error_input(err, 0,
		    "the change's new objects are over the limit of %llu "
		    "bytes",
		    (unsigned long long)max);
	}
	if (status < 0)
		return wr_error_wrap(err, "read the work tree");
	const char *mark = strstr(c.err_tail, "@@warren-tree ");
	if (status != 0 || !mark) {
		return wr_error_set(err, 0,
				    "read the work tree: exit status %d: %s",
				    status,
				    c.err_tail[0] ? c.err_tail : "(no output)");
	}
	snprintf(tree, 41, "%.40s", mark + 14);
	if (!is_hex40(tree))
		return wr_error_input(err, 0,
				      "read the work tree: no tree id");
	*bytes = len;
	return 0;
}

/* ---- judging the changed entries ------------------------------------------ */

struct entry {
	char old_mode[7], new_mode[7];
	char old_id[41], new_id[41];
	char status;
	const char *path; /* into the raw output */
};

/* diff-tree -z raw: ":OLDMODE NEWMODE OLDID NEWID S\0PATH\0". */
static int parse_raw(char *raw, size_t len, struct entry **out, size_t *n_out,
		     size_t cap, struct wr_error **err)
{
	size_t n = 0, alloc = 0;
	struct entry *v = NULL;
	for (size_t off = 0; off < len;) {
		char *head = raw + off;
		size_t hl = strnlen(head, len - off);
		off += hl + 1;
		if (off >= len || head[0] != ':') {
			free(v);
			return wr_error_set(err, EPROTO, "git diff-tree: "
							 "unexpected output");
		}
		char *path = raw + off;
		off += strnlen(path, len - off) + 1;
		if (n == cap) {
			free(v);
			return wr_error_input(err, 0,
			    "the change touches more than %zu files (the "
			    "limit)",
			    cap);
		}
		if (n == alloc) {
			alloc = alloc ? alloc * 2 : 64;
			struct entry *nv = wr_realloc(v, alloc * sizeof(*v));
			if (!nv) {
				free(v);
				return wr_error_set(err, ENOMEM, "diff");
			}
			v = nv;
		}
		struct entry *e = &v[n];
		if (sscanf(head, ":%6s %6s %40s %40s %c", e->old_mode,
			   e->new_mode, e->old_id, e->new_id, &e->status) != 5) {
			free(v);
			return wr_error_set(err, EPROTO,
					    "git diff-tree: bad record");
		}
		e->path = path;
		n++;
	}
	*out = v;
	*n_out = n;
	return 0;
}

/* Any component ".git", in any case (a checkout on a case-insensitive
 * filesystem would write into the repository's own metadata). */
bool evidence_path_has_dotgit(const char *path)
{
	for (const char *p = path; *p;) {
		size_t l = strcspn(p, "/");
		if (l == 4 && !strncasecmp(p, ".git", 4))
			return true;
		p += l;
		if (*p == '/')
			p++;
	}
	return false;
}

/* Does a symlink at path with target stay inside the tree and out of
 * .git? */
bool evidence_symlink_inside(const char *path, const char *target)
{
	if (!target[0] || target[0] == '/')
		return false;
	/* depth of the link's directory, then walk the target */
	int depth = 0;
	for (const char *p = path; *p; p++)
		if (*p == '/')
			depth++;
	for (const char *p = target; *p;) {
		size_t l = strcspn(p, "/");
		if (l == 2 && !strncmp(p, "..", 2)) {
			if (--depth < 0)
				return false;
		} else if (l == 4 && !strncasecmp(p, ".git", 4)) {
			return false;
		} else if (!(l == 1 && p[0] == '.') && l) {
			depth++;
		}
		p += l;
		if (*p == '/')
			p++;
	}
	return true;
}

static int judge(const char *repo, const struct entry *v, size_t n,
		 struct wr_error **err)
{
	for (size_t i = 0; i < n; i++) {
		const struct entry *e = &v[i];
		if (e->status == 'D')
			continue;
		if (evidence_path_has_dotgit(e->path))
			return wr_error_input(err, 0,
					      "the change was refused: path "
					      "'%s' has a .git component",
					      e->path);
		if (!strcmp(e->new_mode, "160000"))
			return wr_error_input(err, 0,
			    "the change was refused: '%s' is a gitlink "
			    "(a submodule commit); changes to submodules "
			    "are not accepted",
			    e->path);
		if (!strcmp(e->new_mode, "120000")) {
			const char *argv[] = {"cat-file", "blob", e->new_id,
					      NULL};
			_cleanup_free_ char *target = NULL;
			size_t tl = 0;
			int r = qgit(repo, argv, NULL, -1, &target, &tl,
				     SYMLINK_MAX, err);
			if (r < 0)
				return wr_error_wrap(err, "symlink '%s'",
						     e->path);
			if (strlen(target) != tl || !evidence_symlink_inside(e->path, target))
				return wr_error_input(err, 0,
				    "the change was refused: symlink '%s' "
				    "points outside the repository or into "
				    ".git ('%s')",
				    e->path, target);
		}
	}
	return 0;
}

/* ---- what the snapshot build produced ------------------------------------ */

/* Is path one of the build's untracked outputs (a file, or under a
 * directory the build created)? */
static bool built_untracked(const json_t *untracked, const char *path)
{
	size_t i;
	json_t *u;
	json_array_foreach(untracked, i, u)
	{
		const char *p = json_string_value(u);
		if (!p || !*p)
			continue;
		size_t l = strlen(p);
		if (p[l - 1] == '/' ? !strncmp(path, p, l) : !strcmp(path, p))
			return true;
	}
	return false;
}

/* The blob the build left at path, if it modified that tracked file. */
static const char *built_modified(const json_t *modified, const char *path)
{
	size_t i;
	json_t *m;
	json_array_foreach(modified, i, m)
	{
		const char *p = json_string_value(json_object_get(m, "path"));
		if (p && !strcmp(p, path))
			return json_string_value(json_object_get(m, "blob"));
	}
	return NULL;
}

/* Index lines ("MODE SP ID TAB PATH NUL", mode 0 removes) that put every
 * build output back as the base has it; *left_out lists them. */
static int leave_out_builds(const json_t *build_output, const struct entry *v,
			    size_t n, char **lines, size_t *lines_len,
			    json_t *left_out)
{
	const json_t *untracked = json_object_get(build_output, "untracked");
	const json_t *modified = json_object_get(build_output, "modified");
	FILE *f = open_memstream(lines, lines_len);
	if (!f)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct entry *e = &v[i];
		bool out = false;
		if (e->status == 'A' && built_untracked(untracked, e->path))
			out = true; /* the build created it */
		const char *blob = built_modified(modified, e->path);
		/* the build modified it and the agent did not go further */
		if (blob && e->status != 'A' &&
		    (e->status == 'D' ? !strcmp(blob, ZERO_ID)
				      : !strcmp(blob, e->new_id)))
			out = true;
		if (!out)
			continue;
		if (e->status == 'A')
			fprintf(f, "0 %s\t%s%c", ZERO_ID, e->path, 0);
		else
			fprintf(f, "%s %s\t%s%c", e->old_mode, e->old_id,
				e->path, 0);
		json_array_append_new(left_out, json_string(e->path));
	}
	return fclose(f) == 0 ? 0 : -ENOMEM;
}

/* ---- numstat ------------------------------------------------------------- */

static json_t *numstat_files(const char *text, size_t len, long long *adds,
			     long long *dels)
{
	json_t *files = json_array();
	*adds = *dels = 0;
	/* -z: "ADDED\tDELETED\tPATH\0" ("-" for binary files) */
	for (size_t off = 0; files && off < len;) {
		const char *rec = text + off;
		size_t rlen = strnlen(rec, len - off);
		off += rlen + 1;
		const char *t1 = memchr(rec, '\t', rlen);
		const char *t2 =
		    t1 ? memchr(t1 + 1, '\t', rlen - (size_t)(t1 + 1 - rec))
		       : NULL;
		if (!t2)
			continue;
		long long a = rec[0] == '-' ? 0 : atoll(rec);
		long long d = t1[1] == '-' ? 0 : atoll(t1 + 1);
		*adds += a;
		*dels += d;
		json_t *p = json_stringn(t2 + 1, rlen - (size_t)(t2 + 1 - rec));
		json_array_append_new(
		    files, json_pack("{s:o, s:I, s:I, s:b}", "path",
				     p ? p : json_string("?"), "additions",
				     (json_int_t)a, "deletions", (json_int_t)d,
				     "binary", rec[0] == '-'));
	}
	return files;
}

/* ---- the whole ----------------------------------------------------------- */

static uint64_t or_default(uint64_t v, uint64_t d)
{
	return v ? v : d;
}

static int one_line_id(char *out, char id[41])
{
	if (!out || strlen(out) < 40)
		return -EPROTO;
	snprintf(id, 41, "%.40s", out);
	return is_hex40(id) ? 0 : -EPROTO;
}

int evidence_commit(const struct evidence_request *q, json_t **out,
		    struct wr_error **err)
{
	if (!is_hex40(q->base))
		return wr_error_set(err, EINVAL, "evidence: no base commit");
	uint64_t t0 = mono_ms();
	uint64_t max_objects =
	    or_default(q->limits.max_object_bytes, EVIDENCE_MAX_OBJECT_BYTES);
	uint64_t max_files =
	    or_default(q->limits.max_files, EVIDENCE_MAX_FILES);
	uint64_t max_diff =
	    or_default(q->limits.max_diff_bytes, EVIDENCE_MAX_DIFF_BYTES);
	_cleanup_free_ char *repo = evidence_repo_path(q->data_dir,
						       q->session_id);
	_cleanup_free_ char *bundle_dir =
	    evidence_bundle_dir(q->data_dir, q->session_id);
	_cleanup_free_ char *pack = wr_asprintf(
	    "%s/sessions/%s/evidence/import.pack", q->data_dir, q->session_id);
	_cleanup_free_ char *index = wr_asprintf(
	    "%s/sessions/%s/evidence/index", q->data_dir, q->session_id);
	_cleanup_free_ char *index_var = index ? wr_asprintf("GIT_INDEX_FILE=%s", index) : NULL;
	if (!repo || !bundle_dir || !pack || !index_var)
		return wr_error_set(err, ENOMEM, "evidence");
	int r = quarantine_open(repo, q->mirror, err);
	if (r < 0)
		return r;

	/* 1. the agent's tree, as bytes, into the quarantine with every
	 * object checked */
	char tree[41];
	uint64_t object_bytes = 0;
	r = export_tree(q, pack, max_objects, tree, &object_bytes, err);
	if (r < 0) {
		unlink(pack);
		return r;
	}
	{
		_cleanup_close_ int pfd = open(pack, O_RDONLY | O_CLOEXEC);
		if (pfd < 0)
			return wr_error_set(err, errno, "open %s", pack);
		const char *argv[] = {"index-pack", "--strict", "--stdin", NULL};
		_cleanup_free_ char *ignored = NULL;
		r = qgit(repo, argv, NULL, pfd, &ignored, NULL, 4096, err);
		unlink(pack);
		if (r < 0) {
			if (err && *err)
				(*err)->bad_input = true;
			return wr_error_wrap(err, "the change was refused "
						  "(object check)");
		}
	}
	{
		_cleanup_free_ char *type = NULL;
		const char *argv[] = {"cat-file", "-t", tree, NULL};
		r = qgit(repo, argv, NULL, -1, &type, NULL, 64, err);
		if (r < 0 || strncmp(type, "tree\n", 5)) {
			wr_error_freep(err);
			return wr_error_input(err, 0,
					      "the change was refused: %s is "
					      "not a tree",
					      tree);
		}
	}

	/* 2. what changed, judged */
	_cleanup_free_ char *raw = NULL;
	size_t raw_len = 0;
	{
		_cleanup_free_ char *base_tree =
		    wr_asprintf("%s^{tree}", q->base);
		const char *argv[] = {"diff-tree", "-r",	"-z",
				      "--no-renames", base_tree, tree,
				      NULL};
		r = base_tree ? qgit(repo, argv, NULL, -1, &raw, &raw_len,
				     64u << 20, err)
			      : -ENOMEM;
		if (r < 0)
			return wr_error_wrap(err, "evidence");
	}
	struct entry *entries = NULL;
	size_t n_entries = 0;
	r = parse_raw(raw, raw_len, &entries, &n_entries, max_files, err);
	if (r < 0)
		return r;
	r = judge(repo, entries, n_entries, err);
	if (r < 0) {
		free(entries);
		return r;
	}

	/* 3. the build's outputs left out */
	json_t *left_out = json_array();
	_cleanup_free_ char *lines = NULL;
	size_t lines_len = 0;
	if (q->build_output)
		r = leave_out_builds(q->build_output, entries, n_entries,
				     &lines, &lines_len, left_out);
	free(entries);
	char final_tree[41];
	memcpy(final_tree, tree, 41);
	if (r == 0 && lines_len) {
		const char *vars[] = {index_var, NULL};
		const char *rt[] = {"read-tree", tree, NULL};
		r = qgit(repo, rt, vars, -1, NULL, NULL, 0, err);
		_cleanup_close_ int in = r == 0 ? memfd_with(lines, lines_len)
						: -1;
		if (r == 0 && in < 0)
			r = wr_error_set(err, -in, "memfd");
		const char *ui[] = {"update-index", "-z", "--index-info",
				    NULL};
		if (r == 0)
			r = qgit(repo, ui, vars, in, NULL, NULL, 0, err);
		_cleanup_free_ char *wt = NULL;
		const char *wtv[] = {"write-tree", NULL};
		if (r == 0)
			r = qgit(repo, wtv, vars, -1, &wt, NULL, 4096, err);
		if (r == 0 && one_line_id(wt, final_tree) < 0)
			r = wr_error_set(err, EPROTO, "git write-tree");
		unlink(index);
	}
	if (r < 0) {
		json_decref(left_out);
		return r == -ENOMEM ? wr_error_set(err, ENOMEM, "evidence")
				    : wr_error_wrap(err, "leave out the "
							 "build's outputs");
	}

	/* 4. Warren's commit: this tree, on the base, by the user */
	char commit[41];
	bool changed;
	{
		_cleanup_free_ char *bt = NULL;
		_cleanup_free_ char *spec = wr_asprintf("%s^{tree}", q->base);
		const char *argv[] = {"rev-parse", "--verify", spec, NULL};
		r = spec ? qgit(repo, argv, NULL, -1, &bt, NULL, 4096, err)
			 : -ENOMEM;
		char base_tree[41];
		if (r == 0 && one_line_id(bt, base_tree) < 0)
			r = -EPROTO;
		if (r < 0) {
			json_decref(left_out);
			return wr_error_set(err, EIO,
					    "evidence: base %s not in the "
					    "repository's mirror",
					    q->base);
		}
		changed = strcmp(base_tree, final_tree) != 0;
	}
	if (changed) {
		_cleanup_free_ char *an = wr_asprintf("GIT_AUTHOR_NAME=%s", q->author);
		_cleanup_free_ char *ae =
		    wr_asprintf("GIT_AUTHOR_EMAIL=%s@warren.invalid", q->author);
		const char *vars[] = {an, ae, "GIT_COMMITTER_NAME=Warren",
				      "GIT_COMMITTER_EMAIL=warren@warren.invalid",
				      NULL};
		const char *msg = q->message && *q->message ? q->message
							    : "Warren session";
		_cleanup_close_ int in = memfd_with(msg, strlen(msg));
		const char *argv[] = {"commit-tree", final_tree, "-p", q->base,
				      NULL};
		_cleanup_free_ char *cout = NULL;
		r = an && ae && in >= 0
			? qgit(repo, argv, vars, in, &cout, NULL, 4096, err)
			: wr_error_set(err, ENOMEM, "commit");
		if (r == 0 && one_line_id(cout, commit) < 0)
			r = wr_error_set(err, EPROTO, "git commit-tree");
		_cleanup_free_ char *ref =
		    wr_asprintf("refs/heads/warren/%s", q->session_id);
		const char *up[] = {"update-ref", ref, commit, NULL};
		if (r == 0)
			r = ref ? qgit(repo, up, NULL, -1, NULL, NULL, 0, err)
				: -ENOMEM;
		if (r < 0) {
			json_decref(left_out);
			return wr_error_wrap(err, "commit");
		}
	} else {
		memcpy(commit, q->base, 41);
	}

	/* 5. the evidence of base..commit, from the objects */
	wr_mkdir_p(q->artifact_dir, 0700);
	_cleanup_free_ char *ns = NULL;
	size_t ns_len = 0;
	{
		const char *argv[] = {"diff-tree", "-r",     "-z", "--numstat",
				      "--no-renames", q->base, commit, NULL};
		r = qgit(repo, argv, NULL, -1, &ns, &ns_len, 16u << 20, err);
		if (r < 0) {
			json_decref(left_out);
			return wr_error_wrap(err, "diff --numstat");
		}
	}
	long long adds, dels;
	json_t *files = numstat_files(ns ? ns : "", ns_len, &adds, &dels);
	bool truncated = false;
	size_t diff_bytes = 0;
	{
		_cleanup_free_ char *path =
		    wr_asprintf("%s/diff.patch", q->artifact_dir);
		_cleanup_free_ char *tmp =
		    wr_asprintf("%s/.diff.patch.tmp", q->artifact_dir);
		_cleanup_close_ int fd =
		    tmp ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			       0600)
			: -1;
		_cleanup_free_ char *gd = wr_asprintf("GIT_DIR=%s", repo);
		const char *vars[] = {gd, NULL};
		const char *argv[] = {"diff-tree",    "-p",	      "-r",
				      "--binary",     "--no-color",   "--no-ext-diff",
				      "--no-textconv", "--no-renames", "--full-index",
				      q->base,	      commit,	      NULL};
		struct git_exec g = {.argv = argv,
				     .vars = vars,
				     .in_fd = -1,
				     .out_fd = fd,
				     .out_len = &diff_bytes,
				     .out_max = max_diff,
				     .timeout_ms = GIT_HOST_TIMEOUT_MS};
		r = fd >= 0 && gd ? git_exec(&g, err)
				  : wr_error_set(err, errno ? errno : ENOMEM,
						 "diff.patch");
		if (r < 0 && err && *err && (*err)->errnum == EFBIG) {
			/* kept up to the cap, and said so */
			wr_error_freep(err);
			truncated = true;
			struct stat st;
			diff_bytes = fstat(fd, &st) == 0 ? (size_t)st.st_size : 0;
			r = 0;
		}
		if (r == 0 && rename(tmp, path) < 0)
			r = wr_error_set(err, errno, "rename %s", path);
		if (r < 0) {
			unlink(tmp);
			json_decref(files);
			json_decref(left_out);
			return wr_error_wrap(err, "diff");
		}
	}
	char *text = json_dumps(files, JSON_INDENT(2));
	_cleanup_free_ char *fpath = wr_asprintf("%s/files.json", q->artifact_dir);
	r = text && fpath ? wr_write_file_atomic(fpath, text, strlen(text),
						 0600, true)
			  : -ENOMEM;
	free(text);
	if (r < 0) {
		json_decref(files);
		json_decref(left_out);
		return wr_error_set(err, -r, "files.json");
	}

	/* 6. the bundle Warren's verification sandbox fetches the commit
	 * from (and the artifact of the same bytes) */
	_cleanup_free_ char *bundle =
	    wr_asprintf("%s/" EVIDENCE_BUNDLE_NAME, bundle_dir);
	_cleanup_free_ char *art_bundle =
	    wr_asprintf("%s/branch.bundle", q->artifact_dir);
	if (!bundle || !art_bundle) {
		json_decref(files);
		json_decref(left_out);
		return wr_error_set(err, ENOMEM, "bundle");
	}
	unlink(bundle);
	unlink(art_bundle);
	if (changed) {
		wr_mkdir_p(bundle_dir, 0755);
		_cleanup_free_ char *ref =
		    wr_asprintf("refs/heads/warren/%s", q->session_id);
		_cleanup_free_ char *not_base = wr_asprintf("^%s", q->base);
		const char *argv[] = {"bundle", "create", "-q", bundle, ref,
				      not_base, NULL};
		r = ref && not_base
			? qgit(repo, argv, NULL, -1, NULL, NULL, 0, err)
			: -ENOMEM;
		if (r == 0)
			chmod(bundle, 0644);
		if (r == 0 && link(bundle, art_bundle) < 0)
			r = wr_error_set(err, errno, "link %s", art_bundle);
		if (r < 0) {
			json_decref(files);
			json_decref(left_out);
			return wr_error_wrap(err, "bundle");
		}
	}

	/* the record keeps the first files (files.json has them all): a
	 * large change must not make every read of the session large */
	size_t n_files = json_array_size(files);
	json_t *shown = json_array();
	for (size_t i = 0; shown && i < n_files && i < FILES_SHOWN; i++)
		json_array_append(shown, json_array_get(files, i));
	json_decref(files);
	files = shown;
	size_t n_left = json_array_size(left_out);
	while (json_array_size(left_out) > LEFT_OUT_SHOWN)
		json_array_remove(left_out, LEFT_OUT_SHOWN);
	json_t *result = json_pack(
	    "{s:s+, s:s, s:s, s:s, s:o, s:I, s:I, s:b, s:b, s:I, s:I, "
	    "s:{s:I, s:o}}",
	    "branch", "warren/", q->session_id, "commit", commit, "base",
	    q->base, "tree", final_tree, "files", files, "additions",
	    (json_int_t)adds, "deletions", (json_int_t)dels, "changed",
	    changed, "diff_truncated", truncated, "diff_bytes",
	    (json_int_t)diff_bytes, "object_bytes", (json_int_t)object_bytes,
	    "build_output", "count", (json_int_t)n_left, "paths", left_out);
	if (result)
		json_object_set_new(result, "ms",
				    json_integer((json_int_t)(mono_ms() - t0)));
	if (result && n_files > FILES_SHOWN)
		json_object_set_new(result, "files_total",
				    json_integer((json_int_t)n_files));
	if (!result)
		return wr_error_set(err, ENOMEM, "result");
	*out = result;
	return 0;
}

int evidence_import_bundle(const char *data_dir, const char *session_id,
			   const char *mirror, const char *bundle,
			   const char *commit, struct wr_error **err)
{
	if (!is_hex40(commit))
		return wr_error_set(err, EINVAL, "evidence: no commit");
	_cleanup_free_ char *repo = evidence_repo_path(data_dir, session_id);
	_cleanup_free_ char *refspec =
	    wr_asprintf("+refs/heads/warren/%s:refs/heads/warren/%s",
			session_id, session_id);
	if (!repo || !refspec)
		return wr_error_set(err, ENOMEM, "evidence");
	int r = quarantine_open(repo, mirror, err);
	if (r < 0)
		return r;
	/* every object of the bundle checked, its prerequisites (the base)
	 * in the mirror */
	const char *argv[] = {"-c",	     "transfer.fsckObjects=true",
			      "fetch",	     "-q",
			      "--no-tags",   "--no-write-fetch-head",
			      bundle,	     refspec,
			      NULL};
	_cleanup_free_ char *ignored = NULL;
	r = qgit(repo, argv, NULL, -1, &ignored, NULL, 4096, err);
	if (r < 0)
		return wr_error_wrap(err, "the checkpoint's bundle");
	return evidence_check_commit(data_dir, session_id, commit, err);
}

int evidence_check_commit(const char *data_dir, const char *session_id,
			  const char *commit, struct wr_error **err)
{
	_cleanup_free_ char *repo = evidence_repo_path(data_dir, session_id);
	_cleanup_free_ char *ref =
	    wr_asprintf("refs/heads/warren/%s", session_id);
	if (!repo || !ref)
		return wr_error_set(err, ENOMEM, "evidence");
	const char *argv[] = {"rev-parse", "--verify", ref, NULL};
	_cleanup_free_ char *out = NULL;
	int r = qgit(repo, argv, NULL, -1, &out, NULL, 4096, err);
	if (r < 0)
		return wr_error_wrap(err, "the reviewed commit");
	char id[41];
	if (one_line_id(out, id) < 0 || strcmp(id, commit))
		return wr_error_set(err, EIO,
				    "the quarantine's warren/%s is %s, not "
				    "the reviewed commit %s",
				    session_id, id, commit);
	return 0;
}
