/* test_store.c - the snapshot layer store (src/snapshot/store.h): layer
 * hashing, publishing, keys, manifests, verify, gc, corruption and
 * allocation failures. Runs as root (chown, mknod, user xattrs) in a
 * scratch directory under /tmp that is removed at the end with nftw, not
 * with the code under test. The mount test runs in a forked child inside a
 * private mount namespace and is skipped without privilege.
 *
 * The allocation-failure tests fail our allocations (util/alloc.h), not
 * jansson's: routed through wr_malloc, jansson 2.14 was seen to return
 * wrong text instead of an error when one of its allocations failed
 * (json_dumps left out an object key; the parser dropped a character of a
 * string), so no caller could handle those failures. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sodium.h>

#include "snapshot/store.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/error.h"

#define SKIP_STATUS 77
#define STORE_UID 1000000000u

static char root[] = "/tmp/warren-unit-store.XXXXXX";
static char dir[PATH_MAX]; /* this test's own directory under root */
static int test_seq;

/* dir/rel, in one of a few rotating buffers. */
static const char *P(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static const char *P(const char *fmt, ...)
{
	static char bufs[16][PATH_MAX];
	static int next;
	char *b = bufs[next++ % 16];
	char rel[PATH_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rel, sizeof(rel), fmt, ap);
	va_end(ap);
	snprintf(b, PATH_MAX, "%s/%s", dir, rel);
	return b;
}

static int remove_entry(const char *path, const struct stat *st, int type,
			struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return type == FTW_DP ? rmdir(path) : unlink(path);
}

static int group_setup(void **state)
{
	(void)state;
	umask(022);
	return mkdtemp(root) ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	return nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

static int test_setup(void **state)
{
	(void)state;
	wr_alloc_fail_at(0);
	snprintf(dir, sizeof(dir), "%s/t%d", root, ++test_seq);
	return mkdir(dir, 0755);
}

static int test_teardown(void **state)
{
	(void)state;
	wr_alloc_fail_at(0);
	return 0;
}

/* ---- helpers ------------------------------------------------------------ */

/* Overlayfs leaves its work directories mode 000 (owned by root): only
 * root can remove one with content, so another user's run of the tests
 * makes them 0700 instead. */
static mode_t unreadable_dir_mode(void)
{
	return geteuid() == 0 ? 0000 : 0700;
}

static void put(const char *path, const char *content, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		fail_msg("create %s: %s", path, strerror(errno));
	size_t len = strlen(content);
	assert_int_equal(write(fd, content, len), (ssize_t)len);
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static void mkd(const char *path, mode_t mode)
{
	if (mkdir(path, mode) < 0)
		fail_msg("mkdir %s: %s", path, strerror(errno));
	assert_int_equal(chmod(path, mode), 0);
}

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

/* Entries of a directory whose names start with prefix. */
static int count_entries(const char *path, const char *prefix)
{
	DIR *d = opendir(path);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    !strncmp(de->d_name, prefix, strlen(prefix)))
			n++;
	closedir(d);
	return n;
}

static void fail_err(const char *what, int r, struct wr_error *err)
{
	fail_msg("%s = %d: %s", what, r, err ? err->msg : "(no error)");
}

#define OK(call, err)                             \
	do {                                      \
		int r_ = (call);                  \
		if (r_ < 0)                       \
			fail_err(#call, r_, err); \
	} while (0)

/* The id of a directory, in a static buffer. */
static const char *hash_of(const char *path)
{
	static char ids[4][SNAP_ID_LEN + 1];
	static int next;
	char *id = ids[next++ % 4];
	struct wr_error *err = NULL;
	OK(snap_layer_hash(path, id, NULL, &err), err);
	return id;
}

/* A small tree: a/, a/f (hello), a/link -> f, top (x). */
static void make_tree(const char *base)
{
	char p[PATH_MAX];
	mkd(base, 0755);
	snprintf(p, sizeof(p), "%s/a", base);
	mkd(p, 0755);
	snprintf(p, sizeof(p), "%s/a/f", base);
	put(p, "hello", 0644);
	snprintf(p, sizeof(p), "%s/a/link", base);
	assert_int_equal(symlink("f", p), 0);
	snprintf(p, sizeof(p), "%s/top", base);
	put(p, "x", 0600);
}

static struct snap_store *open_store(void)
{
	struct snap_store *s = NULL;
	struct wr_error *err = NULL;
	OK(snap_store_open(P("data"), &s, &err), err);
	return s;
}

/* Stages a layer with one file holding content, and publishes it. */
static void publish_content(struct snap_store *s, const char *content,
			    const char *key, char id[SNAP_ID_LEN + 1])
{
	struct wr_error *err = NULL;
	char *stage = snap_store_stage_dir(s, "test", &err);
	if (!stage)
		fail_err("stage", -1, err);
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/file", stage);
	put(p, content, 0644);
	uint64_t bytes = 0;
	OK(snap_store_publish_layer(s, stage, key, id, &bytes, &err), err);
	assert_int_equal(bytes, strlen(content));
	assert_false(exists(stage));
	free(stage);
}

static char *xstrdup(const char *s)
{
	char *d = wr_strdup(s);
	assert_non_null(d);
	return d;
}

/* A manifest of repo with the given layers. */
static struct snap_manifest *
make_manifest(const char *repo, const char (*layers)[SNAP_ID_LEN + 1], size_t n,
	      int64_t created)
{
	struct snap_manifest *m = wr_calloc(1, sizeof(*m));
	assert_non_null(m);
	m->repo = xstrdup(repo);
	m->ref = xstrdup("main");
	m->commit = xstrdup("0123456789abcdef0123456789abcdef01234567");
	m->spec_hash = xstrdup("spec-hash");
	m->warren_version = xstrdup("0.1.0");
	m->deps_key = xstrdup("deps-abc");
	m->created_ms = created;
	m->layers = wr_calloc(n ? n : 1, sizeof(*m->layers));
	assert_non_null(m->layers);
	m->n_layers = n;
	static const char *const roles[] = {"deps", "repo", "build"};
	for (size_t i = 0; i < n; i++) {
		memcpy(m->layers[i].id, layers[i], SNAP_ID_LEN + 1);
		m->layers[i].role = xstrdup(roles[i % 3]);
		m->layers[i].bytes = 1000 * (i + 1);
	}
	m->lockfiles = wr_calloc(2, sizeof(*m->lockfiles));
	assert_non_null(m->lockfiles);
	m->n_lockfiles = 2;
	m->lockfiles[0].path = xstrdup("package-lock.json");
	memset(m->lockfiles[0].sha256, 'a', SNAP_ID_LEN);
	m->lockfiles[1].path = xstrdup("sub/Cargo.lock");
	memset(m->lockfiles[1].sha256, '0', SNAP_ID_LEN);
	m->timings = wr_calloc(3, sizeof(*m->timings));
	assert_non_null(m->timings);
	m->n_timings = 3;
	m->timings[0].phase = xstrdup("clone");
	m->timings[0].ms = 12.5;
	m->timings[1].phase = xstrdup("install");
	m->timings[1].ms = 3000;
	m->timings[2].phase = xstrdup("build");
	m->timings[2].ms = 0.125;
	m->extra = json_pack("{s:s, s:[i,i]}", "note", "hi", "list", 1, 2);
	assert_non_null(m->extra);
	return m;
}

static void publish_manifest_ok(struct snap_store *s, struct snap_manifest *m)
{
	struct wr_error *err = NULL;
	OK(snap_store_publish_manifest(s, m, &err), err);
	assert_true(snap_id_valid(m->id));
}

static const char *manifest_path(const char *id)
{
	return P("data/snapshots/%s.json", id);
}

/* Writes a manifest file by hand, under the id given. */
static void plant_manifest(const char *id, const char *repo, int64_t created,
			   const char *layer)
{
	char layers[1][SNAP_ID_LEN + 1];
	memcpy(layers[0], layer, SNAP_ID_LEN + 1);
	struct snap_manifest *m = make_manifest(repo, layers, 1, created);
	memcpy(m->id, id, SNAP_ID_LEN + 1);
	json_t *o = snap_manifest_to_json(m);
	assert_non_null(o);
	char *text = json_dumps(o, JSON_INDENT(2));
	assert_non_null(text);
	put(manifest_path(id), text, 0600);
	free(text);
	json_decref(o);
	snap_manifest_free(m);
}

static void id_of(char out[SNAP_ID_LEN + 1], const char *head, char fill)
{
	memset(out, fill, SNAP_ID_LEN);
	out[SNAP_ID_LEN] = '\0';
	memcpy(out, head, strlen(head));
}

/* ---- hashing ------------------------------------------------------------ */

static void test_hash_is_deterministic_and_independent_of_location(void **s)
{
	(void)s;
	make_tree(P("one"));
	make_tree(P("two"));
	char a[SNAP_ID_LEN + 1], b[SNAP_ID_LEN + 1];
	strcpy(a, hash_of(P("one")));
	assert_true(snap_id_valid(a));
	assert_string_equal(hash_of(P("one")), a);
	strcpy(b, hash_of(P("two")));
	assert_string_equal(a, b);
}

static void test_hash_changes_with_content(void **s)
{
	(void)s;
	make_tree(P("t"));
	char before[SNAP_ID_LEN + 1];
	strcpy(before, hash_of(P("t")));
	put(P("t/a/f"), "hellO", 0644);
	assert_string_not_equal(hash_of(P("t")), before);
	put(P("t/a/f"), "hello", 0644);
	assert_string_equal(hash_of(P("t")), before);
	/* same bytes, split differently between two files */
	put(P("t/a/f"), "hell", 0644);
	put(P("t/top"), "ox", 0600);
	assert_string_not_equal(hash_of(P("t")), before);
}

static void test_hash_changes_with_mode(void **s)
{
	(void)s;
	make_tree(P("t"));
	char before[SNAP_ID_LEN + 1];
	strcpy(before, hash_of(P("t")));
	assert_int_equal(chmod(P("t/a/f"), 0640), 0);
	assert_string_not_equal(hash_of(P("t")), before);
	assert_int_equal(chmod(P("t/a/f"), 0644), 0);
	assert_string_equal(hash_of(P("t")), before);
	assert_int_equal(chmod(P("t/a"), 01755), 0);
	assert_string_not_equal(hash_of(P("t")), before);
	assert_int_equal(chmod(P("t/a"), 0755), 0);
	/* the root directory itself counts: it is the overlay's root */
	assert_int_equal(chmod(P("t"), 0700), 0);
	assert_string_not_equal(hash_of(P("t")), before);
	assert_int_equal(chmod(P("t"), 0755), 0);
	assert_string_equal(hash_of(P("t")), before);
}

static void test_hash_changes_with_owner(void **s)
{
	(void)s;
	if (geteuid() != 0)
		skip(); /* chown */
	make_tree(P("t"));
	char before[SNAP_ID_LEN + 1];
	strcpy(before, hash_of(P("t")));
	assert_int_equal(lchown(P("t/a/f"), STORE_UID, 0), 0);
	char uid[SNAP_ID_LEN + 1];
	strcpy(uid, hash_of(P("t")));
	assert_string_not_equal(uid, before);
	assert_int_equal(lchown(P("t/a/f"), 0, STORE_UID), 0);
	char gid[SNAP_ID_LEN + 1];
	strcpy(gid, hash_of(P("t")));
	assert_string_not_equal(gid, before);
	assert_string_not_equal(gid, uid);
	/* a symlink's own owner, not its target's */
	assert_int_equal(lchown(P("t/a/f"), 0, 0), 0);
	assert_int_equal(lchown(P("t/a/link"), STORE_UID + 5, STORE_UID + 5),
			 0);
	assert_string_not_equal(hash_of(P("t")), before);
}

static void test_hash_changes_with_xattrs(void **s)
{
	(void)s;
	make_tree(P("t"));
	char before[SNAP_ID_LEN + 1], opaque[SNAP_ID_LEN + 1];
	strcpy(before, hash_of(P("t")));
	if (lsetxattr(P("t/a"), "user.overlay.opaque", "y", 1, 0) < 0)
		fail_msg("setxattr: %s", strerror(errno));
	strcpy(opaque, hash_of(P("t")));
	assert_string_not_equal(opaque, before);
	assert_string_equal(hash_of(P("t")), opaque);
	assert_int_equal(lsetxattr(P("t/a"), "user.overlay.opaque", "x", 1, 0),
			 0);
	assert_string_not_equal(hash_of(P("t")), opaque);
	assert_int_equal(lremovexattr(P("t/a"), "user.overlay.opaque"), 0);
	assert_string_equal(hash_of(P("t")), before);
	/* on a file, and on the root; order of setting does not matter */
	assert_int_equal(lsetxattr(P("t/top"), "user.b", "2", 1, 0), 0);
	assert_int_equal(lsetxattr(P("t/top"), "user.a", "1", 1, 0), 0);
	char ab[SNAP_ID_LEN + 1];
	strcpy(ab, hash_of(P("t")));
	assert_string_not_equal(ab, before);
	make_tree(P("u"));
	assert_int_equal(lsetxattr(P("u/top"), "user.a", "1", 1, 0), 0);
	assert_int_equal(lsetxattr(P("u/top"), "user.b", "2", 1, 0), 0);
	assert_string_equal(hash_of(P("u")), ab);
	assert_int_equal(lsetxattr(P("u"), "user.overlay.origin", "", 0, 0), 0);
	assert_string_not_equal(hash_of(P("u")), ab);
}

static void test_hash_changes_with_symlink_target(void **s)
{
	(void)s;
	make_tree(P("t"));
	char before[SNAP_ID_LEN + 1];
	strcpy(before, hash_of(P("t")));
	assert_int_equal(unlink(P("t/a/link")), 0);
	assert_int_equal(symlink("g", P("t/a/link")), 0);
	assert_string_not_equal(hash_of(P("t")), before);
	/* a symlink and a file with its target as content differ */
	assert_int_equal(unlink(P("t/a/link")), 0);
	put(P("t/a/link"), "f", 0777);
	assert_int_equal(chmod(P("t/a/link"), 0777), 0);
	assert_string_not_equal(hash_of(P("t")), before);
}

static void test_hash_whiteouts_and_special_files(void **s)
{
	(void)s;
	if (geteuid() != 0)
		skip(); /* device nodes; a mode 000 file read */
	make_tree(P("t"));
	char before[SNAP_ID_LEN + 1], wh[SNAP_ID_LEN + 1];
	strcpy(before, hash_of(P("t")));
	/* an overlay whiteout: a character device 0/0 */
	assert_int_equal(mknod(P("t/gone"), S_IFCHR | 0000, makedev(0, 0)), 0);
	strcpy(wh, hash_of(P("t")));
	assert_string_not_equal(wh, before);
	assert_int_equal(unlink(P("t/gone")), 0);
	put(P("t/gone"), "", 0000);
	assert_string_not_equal(hash_of(P("t")), wh);
	assert_int_equal(unlink(P("t/gone")), 0);
	assert_int_equal(mknod(P("t/gone"), S_IFCHR | 0000, makedev(1, 3)), 0);
	assert_string_not_equal(hash_of(P("t")), wh);
	assert_int_equal(unlink(P("t/gone")), 0);
	assert_int_equal(mknod(P("t/gone"), S_IFIFO | 0000, 0), 0);
	assert_string_not_equal(hash_of(P("t")), wh);
	assert_int_equal(unlink(P("t/gone")), 0);
	assert_string_equal(hash_of(P("t")), before);
}

static void test_hash_changes_with_rename_and_ignores_times(void **s)
{
	(void)s;
	make_tree(P("t"));
	char before[SNAP_ID_LEN + 1];
	strcpy(before, hash_of(P("t")));
	assert_int_equal(rename(P("t/top"), P("t/top2")), 0);
	assert_string_not_equal(hash_of(P("t")), before);
	assert_int_equal(rename(P("t/top2"), P("t/top")), 0);
	/* moving a file into a sibling directory */
	assert_int_equal(rename(P("t/top"), P("t/a/top")), 0);
	assert_string_not_equal(hash_of(P("t")), before);
	assert_int_equal(rename(P("t/a/top"), P("t/top")), 0);
	struct timespec ts[2] = {{1000, 0}, {2000, 0}};
	assert_int_equal(utimensat(AT_FDCWD, P("t/a/f"), ts, 0), 0);
	assert_int_equal(utimensat(AT_FDCWD, P("t/a"), ts, 0), 0);
	assert_string_equal(hash_of(P("t")), before);
	/* an empty directory is content too */
	mkd(P("t/empty"), 0755);
	assert_string_not_equal(hash_of(P("t")), before);
}

static void test_hash_counts_bytes_and_hard_links(void **s)
{
	(void)s;
	mkd(P("t"), 0755);
	put(P("t/a"), "12345", 0644);
	mkd(P("t/d"), 0755);
	put(P("t/d/b"), "1234567890", 0644);
	assert_int_equal(symlink("a-long-target-not-counted", P("t/l")), 0);
	char id[SNAP_ID_LEN + 1], linked[SNAP_ID_LEN + 1];
	uint64_t bytes = 0, size = 0;
	struct wr_error *err = NULL;
	OK(snap_layer_hash(P("t"), id, &bytes, &err), err);
	assert_int_equal(bytes, 15);
	OK(snap_layer_size(P("t"), &size, &err), err);
	assert_int_equal(size, 15);
	assert_int_equal(link(P("t/a"), P("t/hard")), 0);
	OK(snap_layer_hash(P("t"), linked, &bytes, &err), err);
	assert_int_equal(bytes, 20);
	/* a hard link hashes as the regular file it also is */
	assert_int_equal(unlink(P("t/hard")), 0);
	put(P("t/hard"), "12345", 0644);
	assert_string_equal(hash_of(P("t")), linked);
}

/* The stream format is part of every layer id on disk: pin it down. */
static void test_hash_format_is_stable(void **s)
{
	(void)s;
	if (geteuid() != 0)
		skip(); /* the owners in the stream: chown */
	mkd(P("t"), 0755);
	assert_int_equal(chown(P("t"), 0, 0), 0);
	put(P("t/a"), "hi", 0644);
	assert_int_equal(chown(P("t/a"), 7, 8), 0);
	unsigned char stream[256];
	size_t n = 0;
#define U32(v)                                                         \
	do {                                                           \
		uint32_t v_ = (v);                                     \
		for (int i_ = 0; i_ < 4; i_++)                         \
			stream[n++] = (unsigned char)(v_ >> (8 * i_)); \
	} while (0)
#define BYTES(p, len)                           \
	do {                                    \
		memcpy(stream + n, (p), (len)); \
		n += (len);                     \
	} while (0)
	U32(15);
	BYTES("warren-layer-v1", 15);
	U32(0); /* root: path "" */
	stream[n++] = 'd';
	U32(0755);
	U32(0);
	U32(0);
	U32(0); /* no xattrs */
	U32(1);
	BYTES("a", 1);
	stream[n++] = 'f';
	U32(0644);
	U32(7);
	U32(8);
	U32(2); /* u64 size 2 */
	U32(0);
	BYTES("hi", 2);
	U32(0);
#undef U32
#undef BYTES
	unsigned char digest[crypto_hash_sha256_BYTES];
	crypto_hash_sha256(digest, stream, n);
	char want[SNAP_ID_LEN + 1];
	sodium_bin2hex(want, sizeof(want), digest, sizeof(digest));
	assert_string_equal(hash_of(P("t")), want);
}

static void test_hash_does_not_follow_symlinks(void **s)
{
	(void)s;
	make_tree(P("t"));
	mkd(P("outside"), 0755);
	put(P("outside/secret"), "one", 0644);
	assert_int_equal(symlink(P("outside"), P("t/out")), 0);
	char before[SNAP_ID_LEN + 1];
	strcpy(before, hash_of(P("t")));
	put(P("outside/secret"), "two", 0644);
	assert_string_equal(hash_of(P("t")), before);
	/* the root itself must not be a symlink */
	assert_int_equal(symlink(P("t"), P("via-link")), 0);
	char id[SNAP_ID_LEN + 1];
	struct wr_error *err = NULL;
	assert_true(snap_layer_hash(P("via-link"), id, NULL, &err) < 0);
	assert_non_null(err);
	wr_error_free(err);
	err = NULL;
	assert_int_equal(snap_layer_hash(P("missing"), id, NULL, &err),
			 -ENOENT);
	assert_non_null(strstr(err->msg, "missing"));
	wr_error_free(err);
}

static void test_hash_caps_depth(void **s)
{
	(void)s;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s", P("deep"));
	mkd(path, 0755);
	int fd = open(path, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	/* 300 levels, built with *at() so no path grows past PATH_MAX */
	for (int i = 0; i < 300; i++) {
		assert_int_equal(mkdirat(fd, "d", 0755), 0);
		int next = openat(fd, "d", O_RDONLY | O_DIRECTORY);
		assert_true(next >= 0);
		close(fd);
		fd = next;
	}
	close(fd);
	char id[SNAP_ID_LEN + 1];
	struct wr_error *err = NULL;
	assert_int_equal(snap_layer_hash(path, id, NULL, &err), -ELOOP);
	wr_error_free(err);
}

static int child_hash_mount_point(void)
{
	if (unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return SKIP_STATUS;
	make_tree(P("t"));
	mkd(P("t/mnt"), 0755);
	mkd(P("src"), 0755);
	if (mount(P("src"), P("t/mnt"), NULL, MS_BIND, NULL) < 0)
		return SKIP_STATUS;
	char id[SNAP_ID_LEN + 1];
	struct wr_error *err = NULL;
	int r = snap_layer_hash(P("t"), id, NULL, &err);
	umount2(P("t/mnt"), MNT_DETACH);
	if (r != -EXDEV) {
		fprintf(stderr, "hash across a bind mount = %d\n", r);
		return 1;
	}
	wr_error_free(err);
	return 0;
}

static void test_hash_refuses_mount_points(void **s)
{
	(void)s;
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(child_hash_mount_point());
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == SKIP_STATUS)
		skip();
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- open, staging, publishing ------------------------------------------ */

static void test_open_creates_layout(void **s)
{
	(void)s;
	struct snap_store *st = open_store();
	static const char *const subdirs[] = {"layers", "layers/.keys",
					      "snapshots", "tmp"};
	for (size_t i = 0; i < 4; i++) {
		struct stat sb;
		assert_int_equal(lstat(P("data/%s", subdirs[i]), &sb), 0);
		assert_true(S_ISDIR(sb.st_mode));
		assert_int_equal(sb.st_mode & 0777, 0700);
	}
	assert_non_null(strstr(snap_store_dir(st), "/data"));
	assert_int_equal(snap_store_dir(st)[0], '/');
	snap_store_close(st);
	struct snap_store *again = open_store();
	snap_store_close(again);
	struct wr_error *err = NULL;
	struct snap_store *none = NULL;
	assert_int_equal(snap_store_open("", &none, &err), -EINVAL);
	assert_null(none);
	wr_error_free(err);
}

static void test_open_sweeps_dead_builders_only(void **s)
{
	(void)s;
	struct snap_store *live = open_store();
	struct wr_error *err = NULL;
	char *stage = snap_store_stage_dir(live, "live", &err);
	assert_non_null(stage);
	put(P("%s/x", stage + strlen(dir) + 1), "x", 0644);
	/* what a crashed builder leaves */
	mkd(P("data/tmp/stage.dead.abc"), 0755);
	mkd(P("data/tmp/stage.dead.abc/sub"), unreadable_dir_mode());
	put(P("data/tmp/manifest.XYZ"), "{", 0600);
	put(P("data/tmp/lease.XYZ"), "", 0600);
	struct snap_store *other = open_store();
	assert_false(exists(P("data/tmp/stage.dead.abc")));
	assert_false(exists(P("data/tmp/manifest.XYZ")));
	assert_false(exists(P("data/tmp/lease.XYZ")));
	assert_true(exists(stage));
	snap_store_close(other);
	/* a handle's unpublished stages go with it */
	snap_store_close(live);
	assert_false(exists(stage));
	free(stage);
	assert_int_equal(count_entries(P("data/tmp"), ""), 0);
}

static void test_stage_dir_rejects_bad_labels(void **s)
{
	(void)s;
	struct snap_store *st = open_store();
	static const char *const bad[] = {
	    "",	 "../x", "a/b",
	    ".", "a b",	 "0123456789012345678901234567890123"};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct wr_error *err = NULL;
		assert_null(snap_store_stage_dir(st, bad[i], &err));
		assert_non_null(err);
		assert_true(err->bad_input);
		wr_error_free(err);
	}
	snap_store_close(st);
}

static void test_publish_is_idempotent(void **s)
{
	(void)s;
	struct snap_store *st = open_store();
	char a[SNAP_ID_LEN + 1], b[SNAP_ID_LEN + 1], c[SNAP_ID_LEN + 1];
	publish_content(st, "same", NULL, a);
	assert_true(exists(P("data/layers/%s/file", a)));
	publish_content(st, "same", NULL, b);
	assert_string_equal(a, b);
	publish_content(st, "other", NULL, c);
	assert_string_not_equal(a, c);
	assert_int_equal(count_entries(P("data/layers"), ""), 3); /* + .keys */
	assert_int_equal(count_entries(P("data/tmp"), "stage."), 0);
	/* the id is the content hash */
	char *path = snap_store_layer_path(st, a);
	assert_non_null(path);
	assert_string_equal(hash_of(path), a);
	free(path);
	snap_store_close(st);
}

/* A sandbox's --upper DIR holds DIR/upper and DIR/work: DIR/upper is the
 * layer, and all of DIR goes. */
static void test_publish_upper_inside_stage(void **s)
{
	(void)s;
	struct snap_store *st = open_store();
	struct wr_error *err = NULL;
	char *stage = snap_store_stage_dir(st, "deps", &err);
	assert_non_null(stage);
	char up[PATH_MAX], work[PATH_MAX];
	snprintf(up, sizeof(up), "%s/upper", stage);
	snprintf(work, sizeof(work), "%s/work", stage);
	mkd(up, 0755);
	mkd(work, 0755);
	snprintf(work, sizeof(work), "%s/work/work", stage);
	mkd(work, unreadable_dir_mode());
	char file[PATH_MAX + 8];
	snprintf(file, sizeof(file), "%s/f", up);
	put(file, "data", 0644);
	char want[SNAP_ID_LEN + 1], id[SNAP_ID_LEN + 1];
	strcpy(want, hash_of(up));
	uint64_t bytes = 0;
	char with_slash[PATH_MAX + 8];
	snprintf(with_slash, sizeof(with_slash), "%s/", up);
	OK(snap_store_publish_layer(st, with_slash, "deps-1", id, &bytes, &err),
	   err);
	assert_string_equal(id, want);
	assert_int_equal(bytes, 4);
	assert_false(exists(stage));
	assert_true(exists(P("data/layers/%s/f", id)));
	free(stage);
	snap_store_close(st);
}

static void test_publish_rejects_outside_paths(void **s)
{
	(void)s;
	struct snap_store *st = open_store();
	mkd(P("elsewhere"), 0755);
	mkd(P("data/tmp/notastage"), 0755);
	struct wr_error *err = NULL;
	char *stage = snap_store_stage_dir(st, "x", &err);
	assert_non_null(stage);
	char deep[PATH_MAX + 8], dots[PATH_MAX + 8];
	snprintf(deep, sizeof(deep), "%s/a/b", stage);
	snprintf(dots, sizeof(dots), "%s/..", stage);
	const char *bad[] = {P("elsewhere"), P("data/tmp/notastage"),
			     P("data/tmp"),  deep,
			     dots,	     P("data/layers")};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		char id[SNAP_ID_LEN + 1];
		err = NULL;
		assert_int_equal(
		    snap_store_publish_layer(st, bad[i], NULL, id, NULL, &err),
		    -EINVAL);
		assert_true(err->bad_input);
		wr_error_free(err);
	}
	err = NULL;
	char id[SNAP_ID_LEN + 1];
	assert_int_equal(
	    snap_store_publish_layer(st, stage, "../k", id, NULL, &err),
	    -EINVAL);
	wr_error_free(err);
	assert_true(exists(stage));
	assert_true(exists(P("elsewhere")));
	free(stage);
	snap_store_close(st);
}

static void test_layer_path_validates_ids(void **s)
{
	(void)s;
	struct snap_store *st = open_store();
	char id[SNAP_ID_LEN + 1];
	id_of(id, "", 'a');
	char *p = snap_store_layer_path(st, id);
	assert_non_null(p);
	assert_string_equal(p, P("data/layers/%s", id));
	free(p);
	static const char *const bad[] = {
	    "../../etc",
	    "",
	    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
	    "aaaa",
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/."};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		errno = 0;
		assert_null(snap_store_layer_path(st, bad[i]));
		assert_int_equal(errno, EINVAL);
	}
	assert_false(snap_id_valid(NULL));
	assert_true(snap_key_valid("deps-0123abc_X.1"));
	assert_false(snap_key_valid(".hidden"));
	assert_false(snap_key_valid("a/b"));
	assert_false(snap_key_valid(""));
	snap_store_close(st);
}

static void test_keys(void **s)
{
	(void)s;
	struct snap_store *st = open_store();
	char a[SNAP_ID_LEN + 1], b[SNAP_ID_LEN + 1], got[SNAP_ID_LEN + 1];
	assert_int_equal(snap_store_layer_by_key(st, "deps-1", got), -ENOENT);
	publish_content(st, "first", "deps-1", a);
	OK(snap_store_layer_by_key(st, "deps-1", got), NULL);
	assert_string_equal(got, a);
	/* a later publish under the same key replaces the mapping */
	publish_content(st, "second", "deps-1", b);
	OK(snap_store_layer_by_key(st, "deps-1", got), NULL);
	assert_string_equal(got, b);
	assert_int_equal(snap_store_layer_by_key(st, "../x", got), -EINVAL);
	assert_int_equal(snap_store_layer_by_key(st, "", got), -EINVAL);
	/* a key whose layer is gone, or that holds junk */
	char *path = snap_store_layer_path(st, b);
	assert_int_equal(rename(path, P("gone")), 0);
	free(path);
	assert_int_equal(snap_store_layer_by_key(st, "deps-1", got), -ENOENT);
	put(P("data/layers/.keys/junk"), "../../../etc\n", 0600);
	assert_int_equal(snap_store_layer_by_key(st, "junk", got), -ENOENT);
	assert_int_equal(count_entries(P("data/tmp"), "key."), 0);
	snap_store_close(st);
}

/* ---- manifests ---------------------------------------------------------- */

static void assert_manifests_equal(const struct snap_manifest *x,
				   const struct snap_manifest *y)
{
	json_t *a = snap_manifest_to_json(x), *b = snap_manifest_to_json(y);
	assert_non_null(a);
	assert_non_null(b);
	if (!json_equal(a, b)) {
		char *ta = json_dumps(a, JSON_SORT_KEYS);
		char *tb = json_dumps(b, JSON_SORT_KEYS);
		fail_msg("manifests differ:\n%s\n%s", ta, tb);
	}
	json_decref(a);
	json_decref(b);
}

/* m is on disk as it is in memory, under the id its content gives. */
static void assert_manifest_stored(struct snap_store *st,
				   const struct snap_manifest *m)
{
	struct snap_manifest *got = NULL;
	struct wr_error *err = NULL;
	OK(snap_store_get(st, m->id, &got, &err), err);
	assert_manifests_equal(got, m);
	json_t *o = snap_manifest_to_json(got);
	assert_non_null(o);
	assert_int_equal(json_object_del(o, "id"), 0);
	char *canonical = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	assert_non_null(canonical);
	unsigned char digest[crypto_hash_sha256_BYTES];
	crypto_hash_sha256(digest, (const unsigned char *)canonical,
			   strlen(canonical));
	char id[SNAP_ID_LEN + 1];
	sodium_bin2hex(id, sizeof(id), digest, sizeof(digest));
	assert_string_equal(id, m->id);
	free(canonical);
	json_decref(o);
	snap_manifest_free(got);
}

static void test_manifest_round_trip(void **s)
{
	(void)s;
	struct snap_store *st = open_store();
	char layers[2][SNAP_ID_LEN + 1];
	publish_content(st, "deps", "deps-abc", layers[0]);
	publish_content(st, "repo", NULL, layers[1]);
	struct snap_manifest *m = make_manifest("github.com/a/b", layers, 2, 0);
	publish_manifest_ok(st, m);
	assert_true(m->created_ms > 0);
	assert_string_equal(m->status, "ready");
	assert_true(exists(manifest_path(m->id)));
	struct stat sb;
	assert_int_equal(stat(manifest_path(m->id), &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);

	struct snap_manifest *got = NULL;
	struct wr_error *err = NULL;
	OK(snap_store_get(st, m->id, &got, &err), err);
	assert_string_equal(got->id, m->id);
	assert_string_equal(got->repo, "github.com/a/b");
	assert_string_equal(got->ref, "main");
	assert_string_equal(got->deps_key, "deps-abc");
	assert_int_equal(got->n_layers, 2);
	assert_string_equal(got->layers[0].id, layers[0]);
	assert_string_equal(got->layers[1].role, "repo");
	assert_int_equal(got->layers[1].bytes, 2000);
	assert_int_equal(got->n_lockfiles, 2);
	assert_string_equal(got->lockfiles[1].path, "sub/Cargo.lock");
	assert_int_equal(got->n_timings, 3);
	assert_true(got->timings[0].ms == 12.5);
	assert_true(got->timings[2].ms == 0.125);
	assert_int_equal(got->created_ms, m->created_ms);
	assert_string_equal(
	    json_string_value(json_object_get(got->extra, "note")), "hi");
	assert_manifests_equal(got, m);
	assert_manifest_stored(st, m);

	/* the same manifest again: the same id, nothing new */
	struct snap_manifest *again =
	    make_manifest("github.com/a/b", layers, 2, m->created_ms);
	publish_manifest_ok(st, again);
	assert_string_equal(again->id, m->id);
	assert_int_equal(count_entries(P("data/snapshots"), ""), 1);
	/* any change is a new id */
	again->timings[0].ms = 13;
	again->id[0] = '\0';
	publish_manifest_ok(st, again);
	assert_string_not_equal(again->id, m->id);
	assert_int_equal(count_entries(P("data/tmp"), "manifest."), 0);

	snap_manifest_free(got);
	snap_manifest_free(again);
	snap_manifest_free(m);
	snap_store_close(st);
}

static void test_publish_manifest_checks_layers_and_fields(void **s)
{
	(void)s;
	struct snap_store *st = open_store();
	char layers[1][SNAP_ID_LEN + 1];
	id_of(layers[0], "", 'b'); /* not in the store */
	struct snap_manifest *m = make_manifest("r", layers, 1, 5);
	struct wr_error *err = NULL;
	assert_int_equal(snap_store_publish_manifest(st, m, &err), -ENOENT);
	assert_non_null(strstr(err->msg, layers[0]));
	assert_int_equal(m->id[0], '\0');
	wr_error_free(err);
	snap_manifest_free(m);

	publish_content(st, "x", NULL, layers[0]);
	for (int c = 0; c < 6; c++) {
		m = make_manifest("r", layers, 1, 5);
		switch (c) {
		case 0:
			free(m->repo);
			m->repo = NULL;
			break;
		case 1: m->lockfiles[0].sha256[3] = 'X'; break;
		case 2: m->layers[0].id[0] = 'G'; break;
		case 3: m->timings[1].ms = -1; break;
		case 4:
			free(m->deps_key);
			m->deps_key = xstrdup("../escape");
			break;
		case 5:
			json_decref(m->extra);
			m->extra = json_integer(1);
			break;
		}
		err = NULL;
		assert_int_equal(snap_store_publish_manifest(st, m, &err),
				 -EINVAL);
		assert_true(err->bad_input);
		wr_error_free(err);
		snap_manifest_free(m);
	}
	assert_int_equal(count_entries(P("data/snapshots"), ""), 0);
	snap_store_close(st);
}

static void test_get_by_prefix_and_ambiguity(void **s)
{
	(void)s;
	struct snap_store *st = open_store();
	char layer[SNAP_ID_LEN + 1], one[SNAP_ID_LEN + 1], two[SNAP_ID_LEN + 1];
	publish_content(st, "l", NULL, layer);
	id_of(one, "abcdef01", '1');
	id_of(two, "abcdef02", '2');
	plant_manifest(one, "r", 1, layer);
	plant_manifest(two, "r", 2, layer);
	struct snap_manifest *m = NULL;
	struct wr_error *err = NULL;
	OK(snap_store_get(st, "abcdef01", &m, &err), err);
	assert_string_equal(m->id, one);
	snap_manifest_free(m);
	OK(snap_store_get(st, "ABCDEF02", &m, &err), err);
	assert_string_equal(m->id, two);
	snap_manifest_free(m);
	OK(snap_store_get(st, two, &m, &err), err);
	snap_manifest_free(m);

	assert_int_equal(snap_store_get(st, "abcdef", &m, &err), -EINVAL);
	assert_true(err->bad_input);
	assert_non_null(strstr(err->msg, "ambiguous"));
	wr_error_free(err);
	err = NULL;
	assert_int_equal(snap_store_get(st, "abcde", &m, &err), -EINVAL);
	assert_true(err->bad_input);
	wr_error_free(err);
	err = NULL;
	assert_int_equal(snap_store_get(st, "abcdeg01", &m, &err), -EINVAL);
	wr_error_free(err);
	err = NULL;
	assert_int_equal(snap_store_get(st, "../../etc/passwd", &m, &err),
			 -EINVAL);
	wr_error_free(err);
	err = NULL;
	assert_int_equal(snap_store_get(st, "fedcba", &m, &err), -ENOENT);
	assert_true(err->bad_input);
	wr_error_free(err);
	err = NULL;
	char missing[SNAP_ID_LEN + 1];
	id_of(missing, "", 'c');
	assert_int_equal(snap_store_get(st, missing, &m, &err), -ENOENT);
	wr_error_free(err);
	snap_store_close(st);
}

static void test_list_newest_first_and_by_repo(void **s)
{
	(void)s;
	struct snap_store *st = open_store();
	char layers[1][SNAP_ID_LEN + 1];
	publish_content(st, "l", NULL, layers[0]);
	const int64_t created[] = {1000, 3000, 2000, 3000};
	const char *repos[] = {"a", "b", "a", "a"};
	char ids[4][SNAP_ID_LEN + 1];
	for (int i = 0; i < 4; i++) {
		struct snap_manifest *m =
		    make_manifest(repos[i], layers, 1, created[i]);
		publish_manifest_ok(st, m);
		strcpy(ids[i], m->id);
		snap_manifest_free(m);
	}
	struct snap_manifest **all = NULL;
	size_t n = 0;
	struct wr_error *err = NULL;
	assert_int_equal(snap_store_list(st, NULL, &all, &n, &err), 0);
	assert_null(err);
	assert_int_equal(n, 4);
	/* 3000 (two, by id), 2000, 1000 */
	const char *first = strcmp(ids[1], ids[3]) < 0 ? ids[1] : ids[3];
	const char *second = first == ids[1] ? ids[3] : ids[1];
	assert_string_equal(all[0]->id, first);
	assert_string_equal(all[1]->id, second);
	assert_string_equal(all[2]->id, ids[2]);
	assert_string_equal(all[3]->id, ids[0]);
	snap_manifest_free_array(all, n);

	assert_int_equal(snap_store_list(st, "a", &all, &n, &err), 0);
	assert_int_equal(n, 3);
	assert_string_equal(all[0]->id, ids[3]);
	assert_string_equal(all[1]->id, ids[2]);
	assert_string_equal(all[2]->id, ids[0]);
	snap_manifest_free_array(all, n);
	assert_int_equal(snap_store_list(st, "nope", &all, &n, &err), 0);
	assert_int_equal(n, 0);
	snap_manifest_free_array(all, n);

	/* remove takes a prefix too; layers stay */
	char prefix[9];
	snprintf(prefix, sizeof(prefix), "%.8s", ids[0]);
	OK(snap_store_remove(st, prefix, &err), err);
	assert_false(exists(manifest_path(ids[0])));
	assert_int_equal(snap_store_remove(st, ids[0], &err), -ENOENT);
	wr_error_free(err);
	assert_true(exists(P("data/layers/%s", layers[0])));
	assert_int_equal(snap_store_list(st, NULL, &all, &n, NULL), 0);
	assert_int_equal(n, 3);
	snap_manifest_free_array(all, n);
	snap_store_close(st);
}

static void test_corrupt_manifests(void **s)
{
	(void)s;
	struct snap_store *st = open_store();
	char layers[1][SNAP_ID_LEN + 1], kept[SNAP_ID_LEN + 1];
	publish_content(st, "good", NULL, layers[0]);
	publish_content(st, "named-in-garbage", NULL, kept);
	struct snap_manifest *m = make_manifest("r", layers, 1, 10);
	publish_manifest_ok(st, m);

	char broken[SNAP_ID_LEN + 1], wrong_id[SNAP_ID_LEN + 1],
	    bad_layer[SNAP_ID_LEN + 1];
	id_of(broken, "dead01", '0');
	id_of(wrong_id, "dead02", '0');
	id_of(bad_layer, "dead03", '0');
	char text[512];
	snprintf(text, sizeof(text), "{\"layers\": [{\"id\": \"%s\"", kept);
	put(manifest_path(broken), text, 0600);
	plant_manifest(wrong_id, "r", 1, layers[0]);
	assert_int_equal(rename(manifest_path(wrong_id),
				P("data/snapshots/%s.json", bad_layer)),
			 0);
	id_of(wrong_id, "dead04", '0');
	plant_manifest(wrong_id, "r", 1, layers[0]);
	/* plant a manifest whose layer id is malformed */
	char *t = NULL;
	{
		json_t *o = json_load_file(manifest_path(wrong_id), 0, NULL);
		assert_non_null(o);
		json_object_set_new(
		    json_array_get(json_object_get(o, "layers"), 0), "id",
		    json_string("../../etc"));
		t = json_dumps(o, 0);
		json_decref(o);
	}
	put(manifest_path(wrong_id), t, 0600);
	free(t);

	struct snap_manifest *got = NULL;
	struct wr_error *err = NULL;
	assert_int_equal(snap_store_get(st, broken, &got, &err), -EBADMSG);
	assert_false(err->bad_input);
	assert_non_null(strstr(err->msg, manifest_path(broken)));
	assert_non_null(strstr(err->msg, "corrupt"));
	wr_error_free(err);
	err = NULL;
	assert_int_equal(snap_store_get(st, bad_layer, &got, &err), -EBADMSG);
	assert_non_null(strstr(err->msg, "does not match"));
	wr_error_free(err);
	err = NULL;
	assert_int_equal(snap_store_get(st, wrong_id, &got, &err), -EBADMSG);
	assert_non_null(strstr(err->msg, "layers[0].id"));
	wr_error_free(err);
	err = NULL;

	/* list skips them, says so, and still lists the good one */
	struct snap_manifest **all = NULL;
	size_t n = 0;
	assert_int_equal(snap_store_list(st, NULL, &all, &n, &err), 3);
	assert_int_equal(n, 1);
	assert_string_equal(all[0]->id, m->id);
	assert_non_null(err);
	assert_non_null(strstr(err->msg, "skipped 3 corrupt manifests"));
	assert_non_null(strstr(err->msg, broken));
	wr_error_free(err);
	err = NULL;
	snap_manifest_free_array(all, n);

	/* gc keeps what the broken manifest's text names */
	size_t removed = 99;
	uint64_t bytes = 99;
	snap_store_close(st);
	st = open_store(); /* drops this handle's pins */
	OK(snap_store_gc(st, NULL, 0, &removed, &bytes, &err), err);
	assert_int_equal(removed, 0);
	assert_true(exists(P("data/layers/%s", kept)));
	/* once it is removed, the layer goes */
	OK(snap_store_remove(st, broken, &err), err);
	OK(snap_store_gc(st, NULL, 0, &removed, &bytes, &err), err);
	assert_int_equal(removed, 1);
	assert_int_equal(bytes, strlen("named-in-garbage"));
	assert_false(exists(P("data/layers/%s", kept)));
	assert_true(exists(P("data/layers/%s", layers[0])));
	snap_manifest_free(m);
	snap_store_close(st);
}

/* ---- verify and gc ------------------------------------------------------ */

static void test_verify_detects_changes(void **s)
{
	(void)s;
	struct snap_store *st = open_store();
	char layers[2][SNAP_ID_LEN + 1];
	publish_content(st, "one", NULL, layers[0]);
	publish_content(st, "two", NULL, layers[1]);
	struct snap_manifest *m = make_manifest("r", layers, 2, 1);
	publish_manifest_ok(st, m);
	struct snap_verify_result res;
	struct wr_error *err = NULL;
	OK(snap_store_verify(st, m->id, &res, &err), err);
	assert_int_equal(res.n_layers, 2);
	assert_int_equal(res.n_bad, 0);
	snap_verify_result_clear(&res);

	put(P("data/layers/%s/file", layers[1]), "tw0", 0644);
	OK(snap_store_verify(st, m->id, &res, &err), err);
	assert_int_equal(res.n_bad, 1);
	assert_string_equal(res.bad_ids[0], layers[1]);
	snap_verify_result_clear(&res);

	char *path = snap_store_layer_path(st, layers[0]);
	assert_int_equal(rename(path, P("moved")), 0);
	free(path);
	char prefix[8];
	snprintf(prefix, sizeof(prefix), "%.7s", m->id);
	OK(snap_store_verify(st, prefix, &res, &err), err);
	assert_int_equal(res.n_bad, 2);
	assert_string_equal(res.bad_ids[0], layers[0]);
	snap_verify_result_clear(&res);
	snap_verify_result_clear(&res); /* twice is fine */
	snap_manifest_free(m);
	snap_store_close(st);
}

/* evict removes only the layers it is given, and of those only what gc
 * would: not a referenced, pinned or in-use one */
static void test_evict(void **s)
{
	(void)s;
	struct snap_store *h1 = open_store();
	char a[1][SNAP_ID_LEN + 1], b[SNAP_ID_LEN + 1], c[SNAP_ID_LEN + 1],
	    d[SNAP_ID_LEN + 1];
	publish_content(h1, "referenced", NULL, a[0]);
	struct snap_manifest *m = make_manifest("r", a, 1, 1);
	publish_manifest_ok(h1, m);
	publish_content(h1, "unused-1", NULL, b);
	publish_content(h1, "unused-2", NULL, c);
	publish_content(h1, "in-use", NULL, d);
	snap_store_close(h1); /* its pins go with it */
	struct snap_store *h2 = open_store();
	size_t removed = 99;
	uint64_t bytes = 99;
	struct wr_error *err = NULL;
	const char *in_use[] = {d};
	const char *ids[] = {a[0], b, d};
	OK(snap_store_evict(h2, in_use, 1, ids, 3, &removed, &bytes, &err),
	   err);
	assert_int_equal(removed, 1);
	assert_int_equal(bytes, strlen("unused-1"));
	assert_true(exists(P("data/layers/%s", a[0])));
	assert_false(exists(P("data/layers/%s", b)));
	assert_true(exists(P("data/layers/%s", c))); /* not asked for */
	assert_true(exists(P("data/layers/%s", d)));
	OK(snap_store_evict(h2, NULL, 0, NULL, 0, &removed, &bytes, &err), err);
	assert_int_equal(removed, 0);
	const char *bad[] = {"../x"};
	assert_int_equal(
	    snap_store_evict(h2, NULL, 0, bad, 1, &removed, &bytes, &err),
	    -EINVAL);
	assert_true(err && err->bad_input);
	wr_error_free(err);
	err = NULL;
	/* a held layer is pinned: evict leaves it until the handle closes */
	struct snap_store *h3 = open_store();
	OK(snap_store_layer_hold(h3, c, &err), err);
	char none[SNAP_ID_LEN + 1];
	memset(none, 'f', SNAP_ID_LEN);
	none[SNAP_ID_LEN] = '\0';
	assert_int_equal(snap_store_layer_hold(h3, none, &err), -ENOENT);
	const char *unused[] = {c};
	OK(snap_store_evict(h2, NULL, 0, unused, 1, &removed, &bytes, &err),
	   err);
	assert_int_equal(removed, 0);
	snap_store_close(h3);
	OK(snap_store_evict(h2, NULL, 0, unused, 1, &removed, &bytes, &err),
	   err);
	assert_int_equal(removed, 1);
	assert_false(exists(P("data/layers/%s", c)));
	snap_manifest_free(m);
	snap_store_close(h2);
}

static void test_gc(void **s)
{
	(void)s;
	struct snap_store *h1 = open_store();
	struct snap_store *h2 = open_store();
	char a[1][SNAP_ID_LEN + 1], b[SNAP_ID_LEN + 1], c[SNAP_ID_LEN + 1],
	    d[SNAP_ID_LEN + 1];
	publish_content(h2, "referenced", "key-a", a[0]);
	publish_content(h2, "unreferenced", "key-b", b);
	publish_content(h2, "in-use", NULL, c);
	struct snap_manifest *m = make_manifest("r", a, 1, 1);
	publish_manifest_ok(h2, m);
	snap_store_close(h2); /* its pins go with it */
	struct snap_store *h3 = open_store();
	publish_content(h3, "pinned-by-a-live-handle", "key-d", d);

	size_t removed = 0;
	uint64_t bytes = 0;
	struct wr_error *err = NULL;
	const char *in_use[] = {c};
	OK(snap_store_gc(h1, in_use, 1, &removed, &bytes, &err), err);
	assert_int_equal(removed, 1);
	assert_int_equal(bytes, strlen("unreferenced"));
	assert_true(exists(P("data/layers/%s", a[0])));
	assert_false(exists(P("data/layers/%s", b)));
	assert_true(exists(P("data/layers/%s", c)));
	assert_true(exists(P("data/layers/%s", d)));
	/* the key of the removed layer went with it; the others stay */
	assert_false(exists(P("data/layers/.keys/key-b")));
	assert_true(exists(P("data/layers/.keys/key-a")));
	assert_true(exists(P("data/layers/.keys/key-d")));
	assert_int_equal(count_entries(P("data/tmp"), "trash."), 0);

	/* a layer looked up by key is pinned as well */
	char got[SNAP_ID_LEN + 1];
	struct snap_store *h4 = open_store();
	OK(snap_store_layer_by_key(h4, "key-d", got), NULL);
	snap_store_close(h3);
	OK(snap_store_gc(h1, NULL, 0, &removed, &bytes, &err), err);
	assert_int_equal(removed, 1); /* c */
	assert_true(exists(P("data/layers/%s", d)));
	snap_store_close(h4);
	OK(snap_store_gc(h1, NULL, 0, &removed, &bytes, &err), err);
	assert_int_equal(removed, 1); /* d */
	assert_false(exists(P("data/layers/.keys/key-d")));

	/* without its manifest, the last layer goes too */
	OK(snap_store_remove(h1, m->id, &err), err);
	put(P("data/layers/.keys/junk"), "not an id", 0600);
	OK(snap_store_gc(h1, NULL, 0, &removed, &bytes, &err), err);
	assert_int_equal(removed, 1);
	assert_int_equal(count_entries(P("data/layers"), ""), 1); /* .keys */
	assert_int_equal(count_entries(P("data/layers/.keys"), ""), 0);

	const char *bad[] = {"../x"};
	assert_int_equal(snap_store_gc(h1, bad, 1, &removed, &bytes, &err),
			 -EINVAL);
	wr_error_free(err);
	snap_manifest_free(m);
	snap_store_close(h1);
}

/* A layer published but not yet referenced survives a gc in between. */
static void test_gc_spares_layers_between_publish_and_manifest(void **s)
{
	(void)s;
	struct snap_store *builder = open_store();
	struct snap_store *collector = open_store();
	char layers[1][SNAP_ID_LEN + 1];
	publish_content(builder, "fresh", NULL, layers[0]);
	size_t removed = 9;
	struct wr_error *err = NULL;
	OK(snap_store_gc(collector, NULL, 0, &removed, NULL, &err), err);
	assert_int_equal(removed, 0);
	struct snap_manifest *m = make_manifest("r", layers, 1, 1);
	publish_manifest_ok(builder, m);
	/* referenced now, and no longer pinned */
	OK(snap_store_gc(collector, NULL, 0, &removed, NULL, &err), err);
	assert_int_equal(removed, 0);
	OK(snap_store_remove(collector, m->id, &err), err);
	OK(snap_store_gc(collector, NULL, 0, &removed, NULL, &err), err);
	assert_int_equal(removed, 1);
	snap_manifest_free(m);
	snap_store_close(builder);
	snap_store_close(collector);
}

/* ---- allocation failures ------------------------------------------------ */

/* Fails the nth allocation for n = 1 .. ALLOC_ROUNDS, past the last
 * allocation the call makes (the final rounds must all succeed). Every
 * failure must be a clean -ENOMEM. */
#define ALLOC_ROUNDS 1500
#define ALLOC_TAIL 100

static void test_publish_manifest_alloc_failure_at_every_n(void **s)
{
	(void)s;
	struct snap_store *st = open_store();
	char layers[1][SNAP_ID_LEN + 1];
	publish_content(st, "l", "k", layers[0]);
	int successes = 0, failures = 0, last_failure = 0;
	for (int n = 1; n <= ALLOC_ROUNDS; n++) {
		/* a new created_ms each round: a new id */
		struct snap_manifest *m = make_manifest("r", layers, 1, n);
		struct wr_error *err = NULL;
		wr_alloc_fail_at((unsigned long)n);
		int r = snap_store_publish_manifest(st, m, &err);
		wr_alloc_fail_at(0);
		if (r == 0) {
			successes++;
			assert_null(err);
			assert_manifest_stored(st, m);
		} else {
			if (r != -ENOMEM)
				fail_err("publish_manifest", r, err);
			assert_non_null(err);
			assert_int_equal(m->id[0], '\0');
			failures++;
			last_failure = n;
		}
		assert_int_equal(count_entries(P("data/snapshots"), ""),
				 successes);
		assert_int_equal(count_entries(P("data/tmp"), "manifest."), 0);
		wr_error_free(err);
		snap_manifest_free(m);
	}
	assert_true(failures >= 1); /* the default status */
	assert_true(last_failure < ALLOC_ROUNDS - ALLOC_TAIL);
	snap_store_close(st);
}

static void test_get_and_list_alloc_failure_at_every_n(void **s)
{
	(void)s;
	struct snap_store *st = open_store();
	char layers[1][SNAP_ID_LEN + 1];
	publish_content(st, "l", NULL, layers[0]);
	struct snap_manifest *m = make_manifest("r", layers, 1, 5);
	publish_manifest_ok(st, m);
	char prefix[7];
	snprintf(prefix, sizeof(prefix), "%.6s", m->id);
	int failures = 0, last_failure = 0;
	for (int n = 1; n <= ALLOC_ROUNDS; n++) {
		struct snap_manifest *got = NULL;
		struct wr_error *err = NULL;
		wr_alloc_fail_at((unsigned long)n);
		int r = snap_store_get(st, prefix, &got, &err);
		wr_alloc_fail_at(0);
		if (r == 0) {
			assert_manifests_equal(got, m);
		} else {
			if (r != -ENOMEM)
				fail_err("get", r, err);
			assert_null(got);
			failures++;
			last_failure = n;
		}
		wr_error_free(err);
		snap_manifest_free(got);
	}
	assert_true(failures >= 10);
	assert_true(last_failure < ALLOC_ROUNDS - ALLOC_TAIL);
	failures = 0;
	last_failure = 0;
	for (int n = 1; n <= ALLOC_ROUNDS; n++) {
		struct snap_manifest **all = NULL;
		size_t count = 0;
		struct wr_error *err = NULL;
		wr_alloc_fail_at((unsigned long)n);
		int r = snap_store_list(st, NULL, &all, &count, &err);
		wr_alloc_fail_at(0);
		if (r == 0) {
			assert_int_equal(count, 1);
			assert_manifests_equal(all[0], m);
		} else {
			if (r != -ENOMEM)
				fail_err("list", r, err);
			assert_null(all);
			failures++;
			last_failure = n;
		}
		wr_error_free(err);
		snap_manifest_free_array(all, count);
	}
	assert_true(failures >= 10);
	assert_true(last_failure < ALLOC_ROUNDS - ALLOC_TAIL);
	snap_manifest_free(m);
	snap_store_close(st);
}

static void test_publish_layer_alloc_failure_at_every_n(void **s)
{
	(void)s;
	struct snap_store *st = open_store();
	char want[SNAP_ID_LEN + 1] = "";
	int failures = 0, last_failure = 0;
	for (int n = 1; n <= 300; n++) {
		struct wr_error *err = NULL;
		char *stage = snap_store_stage_dir(st, "a", &err);
		assert_non_null(stage);
		char p[PATH_MAX + 8];
		snprintf(p, sizeof(p), "%s/f", stage);
		put(p, "alloc", 0644);
		if (!want[0])
			strcpy(want, hash_of(stage));
		char id[SNAP_ID_LEN + 1];
		wr_alloc_fail_at((unsigned long)n);
		int r =
		    snap_store_publish_layer(st, stage, "key", id, NULL, &err);
		wr_alloc_fail_at(0);
		if (r == 0) {
			assert_string_equal(id, want);
			assert_false(exists(stage));
			char got[SNAP_ID_LEN + 1];
			OK(snap_store_layer_by_key(st, "key", got), NULL);
			assert_string_equal(got, want);
		} else {
			if (r != -ENOMEM)
				fail_err("publish_layer", r, err);
			failures++;
			last_failure = n;
		}
		wr_error_free(err);
		free(stage);
	}
	assert_true(failures >= 3);
	assert_true(last_failure < 200);
	snap_store_close(st);
	assert_int_equal(count_entries(P("data/tmp"), ""), 0);
	assert_int_equal(count_entries(P("data/layers"), ""), 2); /* + .keys */
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, test_setup, test_teardown)
	const struct CMUnitTest tests[] = {
	    T(test_hash_is_deterministic_and_independent_of_location),
	    T(test_hash_changes_with_content),
	    T(test_hash_changes_with_mode),
	    T(test_hash_changes_with_owner),
	    T(test_hash_changes_with_xattrs),
	    T(test_hash_changes_with_symlink_target),
	    T(test_hash_whiteouts_and_special_files),
	    T(test_hash_changes_with_rename_and_ignores_times),
	    T(test_hash_counts_bytes_and_hard_links),
	    T(test_hash_format_is_stable),
	    T(test_hash_does_not_follow_symlinks),
	    T(test_hash_caps_depth),
	    T(test_hash_refuses_mount_points),
	    T(test_open_creates_layout),
	    T(test_open_sweeps_dead_builders_only),
	    T(test_stage_dir_rejects_bad_labels),
	    T(test_publish_is_idempotent),
	    T(test_publish_upper_inside_stage),
	    T(test_publish_rejects_outside_paths),
	    T(test_layer_path_validates_ids),
	    T(test_keys),
	    T(test_manifest_round_trip),
	    T(test_publish_manifest_checks_layers_and_fields),
	    T(test_get_by_prefix_and_ambiguity),
	    T(test_list_newest_first_and_by_repo),
	    T(test_corrupt_manifests),
	    T(test_verify_detects_changes),
	    T(test_gc),
	    T(test_evict),
	    T(test_gc_spares_layers_between_publish_and_manifest),
	    T(test_publish_manifest_alloc_failure_at_every_n),
	    T(test_get_and_list_alloc_failure_at_every_n),
	    T(test_publish_layer_alloc_failure_at_every_n),
	};
#undef T
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
