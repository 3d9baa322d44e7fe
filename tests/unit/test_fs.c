/* test_fs.c - filesystem helpers, in a scratch directory under /tmp that is
 * removed at the end (with nftw, not with the code under test). Tests that
 * need mounts run in a forked child inside a private mount namespace, so
 * nothing is ever mounted on the host; they are skipped without privilege. */
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
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/alloc.h"
#include "util/fs.h"

#define SKIP_STATUS 77

static char root[] = "/tmp/warren-unit-fs.XXXXXX";
static char dir[PATH_MAX]; /* this test's own directory under root */
static int test_seq;

/* root/<test>/rel, in one of a few rotating buffers. */
static const char *P(const char *rel)
{
	static char bufs[8][PATH_MAX];
	static int next;
	char *b = bufs[next++ % 8];
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
	umask(022); /* modes below do not depend on the caller's umask */
	/* searchable by all: one test runs as an unprivileged user */
	return mkdtemp(root) && chmod(root, 0711) == 0 ? 0 : -1;
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

static void lnk(const char *target, const char *path)
{
	if (symlink(target, path) < 0)
		fail_msg("symlink %s: %s", path, strerror(errno));
}

/* Content of a file (up to 4 KiB) in a static buffer; NULL if unreadable. */
static const char *slurp(const char *path)
{
	static char buf[4097];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return NULL;
	buf[n] = '\0';
	return buf;
}

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

static mode_t mode_of(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		fail_msg("lstat %s: %s", path, strerror(errno));
	return st.st_mode;
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static int count_entries(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		fail_msg("opendir %s: %s", path, strerror(errno));
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

/* Runs fn in a forked child; the child exits 0 (pass), SKIP_STATUS (skip) or
 * anything else (fail, having printed why). */
static void in_child(int (*fn)(void))
{
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(fn());
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		fail_msg("child killed by signal %d", WTERMSIG(status));
	if (WEXITSTATUS(status) == SKIP_STATUS)
		skip();
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* In the child: a private mount namespace, or SKIP_STATUS if not allowed. */
static int private_mounts(void)
{
	if (unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		fprintf(stderr, "no mount namespace (%s): skipped\n",
			strerror(errno));
		return -1;
	}
	return 0;
}

#define CHILD_CHECK(cond)                                                      \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #cond);                              \
			return 1;                                              \
		}                                                              \
	} while (0)

/* ---- wr_mkdir_p ------------------------------------------------------------- */

static void test_mkdir_p_creates_nested(void **state)
{
	(void)state;
	assert_int_equal(wr_mkdir_p(P("a/b/c/d"), 0755), 0);
	assert_true(S_ISDIR(mode_of(P("a"))));
	assert_true(S_ISDIR(mode_of(P("a/b/c"))));
	assert_true(S_ISDIR(mode_of(P("a/b/c/d"))));
}

static void test_mkdir_p_existing_is_ok(void **state)
{
	(void)state;
	assert_int_equal(wr_mkdir_p(P("x/y"), 0755), 0);
	put(P("x/y/keep"), "k", 0644);
	assert_int_equal(wr_mkdir_p(P("x/y"), 0755), 0);
	assert_int_equal(wr_mkdir_p(P("x"), 0755), 0);
	assert_int_equal(wr_mkdir_p("/", 0755), 0);
	assert_int_equal(wr_mkdir_p(dir, 0755), 0);
	assert_string_equal(slurp(P("x/y/keep")), "k");
}

static void test_mkdir_p_applies_mode(void **state)
{
	(void)state;
	mode_t old = umask(0);
	int r = wr_mkdir_p(P("m1/m2"), 0750);
	umask(old);
	assert_int_equal(r, 0);
	assert_int_equal(mode_of(P("m1")) & 07777, 0750);
	assert_int_equal(mode_of(P("m1/m2")) & 07777, 0750);
}

static void test_mkdir_p_extra_slashes(void **state)
{
	(void)state;
	assert_int_equal(wr_mkdir_p(P("s1//s2///s3/"), 0755), 0);
	assert_true(S_ISDIR(mode_of(P("s1/s2/s3"))));
}

static void test_mkdir_p_relative_path(void **state)
{
	(void)state;
	char cwd[PATH_MAX];
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(dir), 0);
	int r = wr_mkdir_p("rel1/rel2", 0755);
	assert_int_equal(chdir(cwd), 0);
	assert_int_equal(r, 0);
	assert_true(S_ISDIR(mode_of(P("rel1/rel2"))));
}

static void test_mkdir_p_file_in_the_way(void **state)
{
	(void)state;
	put(P("f"), "", 0644);
	assert_int_equal(wr_mkdir_p(P("f"), 0755), -ENOTDIR);
	assert_int_equal(wr_mkdir_p(P("f/sub"), 0755), -ENOTDIR);
	assert_int_equal(wr_mkdir_p(P("f/sub/deeper"), 0755), -ENOTDIR);
	assert_true(S_ISREG(mode_of(P("f"))));
}

static int child_mkdir_p_unprivileged(void)
{
	/* as an unprivileged user, in a directory it cannot write to */
	if (geteuid() == 0 && (setgid(65534) < 0 || setuid(65534) < 0))
		return SKIP_STATUS;
	int r = wr_mkdir_p(P("ro/x/y"), 0755);
	if (r != -EACCES) {
		fprintf(stderr, "wr_mkdir_p = %d, want -EACCES\n", r);
		return 1;
	}
	CHILD_CHECK(!exists(P("ro/x")));
	return 0;
}

static void test_mkdir_p_permission_denied(void **state)
{
	(void)state;
	mkd(P("ro"), 0555);
	in_child(child_mkdir_p_unprivileged);
}

/* The empty path must be an error (mkdir("") is ENOENT), without reading
 * past the end of the string. */
static int child_mkdir_p_empty(void)
{
	int r = wr_mkdir_p("", 0755);
	if (r != -ENOENT) {
		fprintf(stderr, "wr_mkdir_p(\"\") = %d, want -ENOENT\n", r);
		return 1;
	}
	return 0;
}

static void test_mkdir_p_empty_path_is_error(void **state)
{
	(void)state;
	in_child(child_mkdir_p_empty); /* an ASan report only fails this test */
}

static void test_mkdir_p_alloc_failure(void **state)
{
	(void)state;
	wr_alloc_fail_at(1);
	int r = wr_mkdir_p(P("nomem"), 0755);
	wr_alloc_fail_at(0);
	assert_int_equal(r, -ENOMEM);
	assert_false(exists(P("nomem")));
}

/* ---- wr_rm_rf --------------------------------------------------------------- */

static void test_rm_rf_removes_tree(void **state)
{
	(void)state;
	mkd(P("t"), 0755);
	mkd(P("t/a"), 0755);
	mkd(P("t/a/b"), 0700);
	mkd(P("t/empty"), 0755);
	put(P("t/file"), "x", 0644);
	put(P("t/.hidden"), "x", 0000);
	put(P("t/a/b/deep"), "x", 0600);
	lnk("file", P("t/link"));
	lnk("/nonexistent/dangling", P("t/a/dangling"));
	assert_int_equal(mkfifo(P("t/a/fifo"), 0600), 0);

	assert_int_equal(wr_rm_rf(P("t")), 0);
	assert_false(exists(P("t")));
	assert_int_equal(count_entries(dir), 0);
}

static void test_rm_rf_removes_mode_000_dirs(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip(); /* only root can read them */
	/* overlay work dirs are mode 000, with content */
	mkd(P("t"), 0755);
	mkd(P("t/work"), 0755);
	mkd(P("t/work/w"), 0755);
	put(P("t/work/w/x"), "x", 0644);
	assert_int_equal(chmod(P("t/work/w"), 0), 0);
	assert_int_equal(chmod(P("t/work"), 0), 0);

	assert_int_equal(wr_rm_rf(P("t")), 0);
	assert_false(exists(P("t")));
	assert_int_equal(count_entries(dir), 0);
}

static void test_rm_rf_missing_is_success(void **state)
{
	(void)state;
	assert_int_equal(wr_rm_rf(P("missing")), 0);
	assert_int_equal(wr_rm_rf(P("missing/below")), 0);
}

static void test_rm_rf_single_file_and_symlink(void **state)
{
	(void)state;
	put(P("f"), "x", 0644);
	lnk("f", P("l"));
	assert_int_equal(wr_rm_rf(P("l")), 0);
	assert_false(exists(P("l")));
	assert_string_equal(slurp(P("f")), "x");
	assert_int_equal(wr_rm_rf(P("f")), 0);
	assert_false(exists(P("f")));
}

/* A symlink inside the tree that points to a directory outside: the link
 * goes, the outside directory and its content stay. */
static void test_rm_rf_keeps_outside_dir_behind_inner_symlink(void **state)
{
	(void)state;
	mkd(P("outside"), 0755);
	mkd(P("outside/sub"), 0755);
	put(P("outside/precious"), "keep me", 0644);
	put(P("outside/sub/precious2"), "keep me too", 0644);
	mkd(P("tree"), 0755);
	mkd(P("tree/d"), 0755);
	lnk(P("outside"), P("tree/abs"));
	lnk("../../outside", P("tree/d/rel"));
	lnk(P("outside/precious"), P("tree/file_link"));

	assert_int_equal(wr_rm_rf(P("tree")), 0);
	assert_false(exists(P("tree")));
	assert_string_equal(slurp(P("outside/precious")), "keep me");
	assert_string_equal(slurp(P("outside/sub/precious2")), "keep me too");
	assert_int_equal(count_entries(P("outside")), 2);
}

/* The path itself is a symlink to a directory: only the link is removed. */
static void test_rm_rf_does_not_follow_top_level_symlink(void **state)
{
	(void)state;
	mkd(P("outside"), 0755);
	put(P("outside/precious"), "keep me", 0644);
	lnk(P("outside"), P("link"));
	assert_int_equal(wr_rm_rf(P("link")), 0);
	assert_false(exists(P("link")));
	assert_string_equal(slurp(P("outside/precious")), "keep me");
}

static int child_rm_rf_tmpfs_mount(void)
{
	if (private_mounts() < 0)
		return SKIP_STATUS;
	CHILD_CHECK(mkdir(P("tree"), 0755) == 0);
	CHILD_CHECK(mkdir(P("tree/mnt"), 0755) == 0);
	CHILD_CHECK(mount("tmpfs", P("tree/mnt"), "tmpfs", 0, "size=1m") == 0);
	int fd = open(P("tree/mnt/precious"), O_WRONLY | O_CREAT, 0644);
	CHILD_CHECK(fd >= 0);
	close(fd);
	int fd2 = open(P("tree/file"), O_WRONLY | O_CREAT, 0644);
	CHILD_CHECK(fd2 >= 0);
	close(fd2);
	int r = wr_rm_rf(P("tree"));
	CHILD_CHECK(r == -EBUSY);
	CHILD_CHECK(exists(P("tree/mnt/precious")));
	CHILD_CHECK(!exists(P("tree/file")));
	CHILD_CHECK(umount(P("tree/mnt")) == 0);
	return 0;
}

/* A mount point inside the tree (another file system) is never entered. */
static void test_rm_rf_does_not_cross_mount_point(void **state)
{
	(void)state;
	in_child(child_rm_rf_tmpfs_mount);
}

static int child_rm_rf_bind_mount(void)
{
	if (private_mounts() < 0)
		return SKIP_STATUS;
	CHILD_CHECK(mkdir(P("outside"), 0755) == 0);
	int fd = open(P("outside/precious"), O_WRONLY | O_CREAT, 0644);
	CHILD_CHECK(fd >= 0);
	close(fd);
	CHILD_CHECK(mkdir(P("tree"), 0755) == 0);
	CHILD_CHECK(mkdir(P("tree/mnt"), 0755) == 0);
	CHILD_CHECK(mount(P("outside"), P("tree/mnt"), NULL, MS_BIND, NULL) == 0);
	int r = wr_rm_rf(P("tree"));
	umount2(P("tree/mnt"), MNT_DETACH);
	if (!exists(P("outside/precious"))) {
		fprintf(stderr, "wr_rm_rf (= %d) deleted the content of a bind "
				"mount of the same file system\n",
			r);
		return 1;
	}
	CHILD_CHECK(r < 0);
	return 0;
}

/* A bind mount inside the tree whose source is on the same file system
 * (same st_dev) is still a mount point: fs.h promises not to cross it. */
static void test_rm_rf_does_not_cross_bind_mount(void **state)
{
	(void)state;
	in_child(child_rm_rf_bind_mount);
}

/* Builds a chain root/d/d/d... `depth` directories deep. */
static void make_deep(const char *top, int depth)
{
	mkd(top, 0755);
	int fd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	for (int i = 0; i < depth; i++) {
		assert_int_equal(mkdirat(fd, "d", 0755), 0);
		int next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		assert_true(next >= 0);
		close(fd);
		fd = next;
	}
	close(fd);
}

static void test_rm_rf_deep_tree_within_cap(void **state)
{
	(void)state;
	make_deep(P("deep"), 300);
	int before = count_fds();
	assert_int_equal(wr_rm_rf(P("deep")), 0);
	assert_false(exists(P("deep")));
	assert_int_equal(count_fds(), before);
}

/* Past the depth cap wr_rm_rf gives up with an error; it must still close
 * every descriptor it opened. */
static void test_rm_rf_too_deep_tree_leaks_no_fd(void **state)
{
	(void)state;
	make_deep(P("deep"), 600);
	int before = count_fds();
	int r = wr_rm_rf(P("deep"));
	int after = count_fds();
	assert_true(r < 0);
	assert_true(exists(P("deep")));
	if (after != before)
		fail_msg("wr_rm_rf leaked %d file descriptor(s)", after - before);
}

/* ---- wr_write_file_atomic ------------------------------------------------------- */

static void test_write_atomic_creates_file(void **state)
{
	(void)state;
	mode_t old = umask(0);
	int r = wr_write_file_atomic(P("state.json"), "{\"a\":1}", 7, 0640, false);
	umask(old);
	assert_int_equal(r, 0);
	assert_string_equal(slurp(P("state.json")), "{\"a\":1}");
	assert_int_equal(mode_of(P("state.json")), S_IFREG | 0640);
}

/* The old file is replaced, not rewritten: a reader that opened it before
 * still sees the old content in full. */
static void test_write_atomic_replaces_whole_file(void **state)
{
	(void)state;
	put(P("f"), "old content that is long", 0644);
	int old_fd = open(P("f"), O_RDONLY | O_CLOEXEC);
	assert_true(old_fd >= 0);
	assert_int_equal(wr_write_file_atomic(P("f"), "new", 3, 0644, true), 0);
	assert_string_equal(slurp(P("f")), "new");
	char buf[64] = { 0 };
	assert_int_equal(read(old_fd, buf, sizeof(buf) - 1), 24);
	assert_string_equal(buf, "old content that is long");
	close(old_fd);
}

static void test_write_atomic_empty_and_binary(void **state)
{
	(void)state;
	assert_int_equal(wr_write_file_atomic(P("empty"), "", 0, 0644, false), 0);
	struct stat st;
	assert_int_equal(stat(P("empty"), &st), 0);
	assert_int_equal(st.st_size, 0);

	unsigned char data[70000];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i * 7);
	assert_int_equal(wr_write_file_atomic(P("bin"), data, sizeof(data), 0600,
					      true),
			 0);
	char *got = NULL;
	size_t len = 0;
	assert_int_equal(wr_read_file(P("bin"), sizeof(data), &got, &len), 0);
	assert_int_equal(len, sizeof(data));
	assert_memory_equal(got, data, sizeof(data));
	free(got);
}

static void test_write_atomic_leaves_no_temp_file(void **state)
{
	(void)state;
	mkd(P("d"), 0755);
	assert_int_equal(wr_write_file_atomic(P("d/f"), "x", 1, 0644, false), 0);
	assert_int_equal(wr_write_file_atomic(P("d/f"), "y", 1, 0644, true), 0);
	assert_int_equal(count_entries(P("d")), 1);
	/* failure: the target is a non-empty directory, rename fails */
	mkd(P("d/dir"), 0755);
	put(P("d/dir/x"), "x", 0644);
	assert_true(wr_write_file_atomic(P("d/dir"), "z", 1, 0644, false) < 0);
	assert_int_equal(count_entries(P("d")), 2);
	assert_true(S_ISDIR(mode_of(P("d/dir"))));
}

static void test_write_atomic_missing_directory(void **state)
{
	(void)state;
	assert_int_equal(wr_write_file_atomic(P("nodir/f"), "x", 1, 0644, false),
			 -ENOENT);
	assert_false(exists(P("nodir")));
}

/* A symlink at the path is replaced by the file; its target is untouched. */
static void test_write_atomic_replaces_symlink_not_target(void **state)
{
	(void)state;
	put(P("target"), "original", 0644);
	lnk(P("target"), P("link"));
	assert_int_equal(wr_write_file_atomic(P("link"), "new", 3, 0644, false), 0);
	assert_true(S_ISREG(mode_of(P("link"))));
	assert_string_equal(slurp(P("link")), "new");
	assert_string_equal(slurp(P("target")), "original");
}

static void test_write_atomic_alloc_failure(void **state)
{
	(void)state;
	wr_alloc_fail_at(1);
	int r = wr_write_file_atomic(P("f"), "x", 1, 0644, false);
	wr_alloc_fail_at(0);
	assert_int_equal(r, -ENOMEM);
	assert_int_equal(count_entries(dir), 0);
}

/* ---- wr_write_file ---------------------------------------------------------- */

static void test_write_file_existing_only(void **state)
{
	(void)state;
	put(P("f"), "", 0644);
	assert_int_equal(wr_write_file(P("f"), "1234"), 0);
	assert_string_equal(slurp(P("f")), "1234");
	assert_int_equal(wr_write_file(P("missing"), "x"), -ENOENT);
	assert_false(exists(P("missing")));
	mkd(P("d"), 0755);
	assert_int_equal(wr_write_file(P("d"), "x"), -EISDIR);
}

/* ---- wr_read_file ------------------------------------------------------------ */

static void test_read_file_reads_content(void **state)
{
	(void)state;
	put(P("f"), "hello\nworld\n", 0644);
	char *out = NULL;
	size_t len = 0;
	assert_int_equal(wr_read_file(P("f"), 4096, &out, &len), 0);
	assert_int_equal(len, 12);
	assert_string_equal(out, "hello\nworld\n");
	free(out);
	assert_int_equal(wr_read_file(P("f"), 4096, &out, NULL), 0);
	assert_string_equal(out, "hello\nworld\n");
	free(out);
}

static void test_read_file_cap_boundaries(void **state)
{
	(void)state;
	put(P("f"), "0123456789", 0644);
	char *out = NULL;
	size_t len = 0;
	assert_int_equal(wr_read_file(P("f"), 10, &out, &len), 0);
	assert_int_equal(len, 10);
	assert_string_equal(out, "0123456789");
	free(out);
	out = NULL;
	len = 12345;
	assert_int_equal(wr_read_file(P("f"), 9, &out, &len), -EFBIG);
	assert_null(out);
	assert_int_equal(len, 12345);
	assert_int_equal(wr_read_file(P("f"), 1, &out, &len), -EFBIG);
	assert_int_equal(wr_read_file(P("f"), 0, &out, &len), -EFBIG);
	assert_int_equal(wr_read_file(P("f"), 11, &out, &len), 0);
	assert_int_equal(len, 10);
	free(out);
}

static void test_read_file_empty(void **state)
{
	(void)state;
	put(P("e"), "", 0644);
	char *out = NULL;
	size_t len = 99;
	assert_int_equal(wr_read_file(P("e"), 0, &out, &len), 0);
	assert_int_equal(len, 0);
	assert_string_equal(out, "");
	free(out);
	assert_int_equal(wr_read_file(P("e"), 100, &out, &len), 0);
	assert_int_equal(len, 0);
	free(out);
}

static void test_read_file_binary_and_large(void **state)
{
	(void)state;
	size_t n = 1 << 20;
	unsigned char *data = malloc(n);
	assert_non_null(data);
	for (size_t i = 0; i < n; i++)
		data[i] = (unsigned char)(i % 251);
	int fd = open(P("big"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, n), (ssize_t)n);
	close(fd);
	char *out = NULL;
	size_t len = 0;
	assert_int_equal(wr_read_file(P("big"), 2 * n, &out, &len), 0);
	assert_int_equal(len, n);
	assert_memory_equal(out, data, n);
	assert_int_equal(out[n], '\0');
	free(out);
	assert_int_equal(wr_read_file(P("big"), n - 1, &out, &len), -EFBIG);
	free(data);
}

/* procfs files report size 0: reading must not rely on st_size. */
static void test_read_file_procfs(void **state)
{
	(void)state;
	char *out = NULL;
	size_t len = 0;
	assert_int_equal(wr_read_file("/proc/self/status", 64 * 1024, &out, &len),
			 0);
	assert_true(len > 0);
	assert_int_equal(strlen(out), len);
	assert_non_null(strstr(out, "Name:"));
	free(out);
}

static void test_read_file_errors(void **state)
{
	(void)state;
	char *out = NULL;
	assert_int_equal(wr_read_file(P("missing"), 10, &out, NULL), -ENOENT);
	mkd(P("d"), 0755);
	assert_int_equal(wr_read_file(P("d"), 10, &out, NULL), -EISDIR);
	assert_null(out);
	put(P("f"), "x", 0644);
	wr_alloc_fail_at(1);
	int r = wr_read_file(P("f"), 10, &out, NULL);
	wr_alloc_fail_at(0);
	assert_int_equal(r, -ENOMEM);
	assert_null(out);
}

/* ---- wr_copy_tree ---------------------------------------------------------- */

static void test_copy_tree_copies_files_dirs_and_modes(void **state)
{
	(void)state;
	mkd(P("src"), 0751);
	put(P("src/a"), "alpha", 0640);
	put(P("src/.hidden"), "h", 0600);
	put(P("src/empty"), "", 0644);
	mkd(P("src/sub"), 0750);
	put(P("src/sub/b"), "beta", 0755);
	mkd(P("src/sub/deeper"), 0700);
	mkd(P("src/sub/deeper/void"), 0755);
	put(P("src/sub/deeper/c"), "gamma", 0444);

	assert_int_equal(wr_copy_tree(P("src"), P("dst")), 0);
	assert_int_equal(mode_of(P("dst")), S_IFDIR | 0751);
	assert_string_equal(slurp(P("dst/a")), "alpha");
	assert_int_equal(mode_of(P("dst/a")), S_IFREG | 0640);
	assert_string_equal(slurp(P("dst/.hidden")), "h");
	assert_int_equal(mode_of(P("dst/.hidden")), S_IFREG | 0600);
	assert_string_equal(slurp(P("dst/empty")), "");
	assert_int_equal(mode_of(P("dst/sub")), S_IFDIR | 0750);
	assert_string_equal(slurp(P("dst/sub/b")), "beta");
	assert_int_equal(mode_of(P("dst/sub/b")), S_IFREG | 0755);
	assert_int_equal(mode_of(P("dst/sub/deeper")), S_IFDIR | 0700);
	assert_int_equal(mode_of(P("dst/sub/deeper/void")), S_IFDIR | 0755);
	assert_string_equal(slurp(P("dst/sub/deeper/c")), "gamma");
	assert_int_equal(mode_of(P("dst/sub/deeper/c")), S_IFREG | 0444);
	assert_int_equal(count_entries(P("dst")), 4);
	assert_int_equal(count_entries(P("dst/sub/deeper")), 2);
	/* the source is unchanged */
	assert_string_equal(slurp(P("src/a")), "alpha");
}

/* cp -a keeps modes exactly, whatever the umask: a layer's /tmp stays 1777. */
static void test_copy_tree_keeps_dir_modes_under_umask(void **state)
{
	(void)state;
	mkd(P("src"), 0775);
	mkd(P("src/tmp"), 01777);
	mkd(P("src/shared"), 0777);
	put(P("src/shared/f"), "f", 0666);
	mode_t old = umask(022);
	int r = wr_copy_tree(P("src"), P("dst"));
	umask(old);
	assert_int_equal(r, 0);
	assert_int_equal(mode_of(P("dst/shared/f")) & 07777, 0666);
	if ((mode_of(P("dst")) & 07777) != 0775 ||
	    (mode_of(P("dst/tmp")) & 07777) != 01777 ||
	    (mode_of(P("dst/shared")) & 07777) != 0777)
		fail_msg("directory modes: dst %04o (want 0775), dst/tmp %04o "
			 "(want 1777), dst/shared %04o (want 0777)",
			 (unsigned)(mode_of(P("dst")) & 07777),
			 (unsigned)(mode_of(P("dst/tmp")) & 07777),
			 (unsigned)(mode_of(P("dst/shared")) & 07777));
}

/* Symlinks are copied as symlinks with the same target, never followed:
 * a link to a directory outside does not pull that directory in. */
static void test_copy_tree_copies_symlinks_as_links(void **state)
{
	(void)state;
	mkd(P("outside"), 0755);
	put(P("outside/secret"), "s", 0600);
	mkd(P("src"), 0755);
	put(P("src/f"), "f", 0644);
	lnk("f", P("src/rel"));
	lnk(P("outside"), P("src/abs_dir"));
	lnk("/nonexistent/dangling", P("src/dangling"));
	lnk("../outside/secret", P("src/up"));

	assert_int_equal(wr_copy_tree(P("src"), P("dst")), 0);
	static const char *const links[] = { "rel", "abs_dir", "dangling", "up" };
	for (size_t i = 0; i < 4; i++) {
		char a[PATH_MAX], b[PATH_MAX];
		snprintf(a, sizeof(a), "src/%s", links[i]);
		snprintf(b, sizeof(b), "dst/%s", links[i]);
		assert_true(S_ISLNK(mode_of(P(b))));
		char ta[PATH_MAX] = { 0 }, tb[PATH_MAX] = { 0 };
		assert_true(readlink(P(a), ta, sizeof(ta) - 1) > 0);
		assert_true(readlink(P(b), tb, sizeof(tb) - 1) > 0);
		assert_string_equal(ta, tb);
	}
	assert_int_equal(count_entries(P("outside")), 1);
}

static void test_copy_tree_skips_special_files(void **state)
{
	(void)state;
	mkd(P("src"), 0755);
	assert_int_equal(mkfifo(P("src/fifo"), 0644), 0);
	put(P("src/f"), "f", 0644);
	assert_int_equal(wr_copy_tree(P("src"), P("dst")), 0);
	assert_false(exists(P("dst/fifo")));
	assert_string_equal(slurp(P("dst/f")), "f");
}

static void test_copy_tree_errors(void **state)
{
	(void)state;
	assert_int_equal(wr_copy_tree(P("missing"), P("dst")), -ENOENT);
	assert_false(exists(P("dst")));
	mkd(P("src"), 0755);
	mkd(P("exists"), 0755);
	assert_int_equal(wr_copy_tree(P("src"), P("exists")), -EEXIST);
	assert_int_equal(wr_copy_tree(P("src"), P("nodir/dst")), -ENOENT);
}

static void test_copy_tree_single_file_and_symlink(void **state)
{
	(void)state;
	mkd(P("a"), 0755);
	mkd(P("b"), 0755);
	put(P("a/name"), "content", 0604);
	assert_int_equal(wr_copy_tree(P("a/name"), P("b/name")), 0);
	assert_string_equal(slurp(P("b/name")), "content");
	assert_int_equal(mode_of(P("b/name")), S_IFREG | 0604);
	/* a file can only be copied under its own name */
	assert_int_equal(wr_copy_tree(P("a/name"), P("b/other")), -EINVAL);
	assert_false(exists(P("b/other")));
	/* a symlink is copied as a symlink */
	lnk("name", P("a/link"));
	assert_int_equal(wr_copy_tree(P("a/link"), P("b/link")), 0);
	assert_true(S_ISLNK(mode_of(P("b/link"))));
}

static int child_copy_tree_mount(void)
{
	if (private_mounts() < 0)
		return SKIP_STATUS;
	CHILD_CHECK(mkdir(P("src"), 0755) == 0);
	CHILD_CHECK(mkdir(P("src/mnt"), 0755) == 0);
	CHILD_CHECK(mount("tmpfs", P("src/mnt"), "tmpfs", 0, "size=1m") == 0);
	int fd = open(P("src/mnt/on_other_fs"), O_WRONLY | O_CREAT, 0644);
	CHILD_CHECK(fd >= 0);
	close(fd);
	CHILD_CHECK(wr_copy_tree(P("src"), P("dst")) == 0);
	CHILD_CHECK(!exists(P("dst/mnt/on_other_fs")));
	CHILD_CHECK(umount(P("src/mnt")) == 0);
	return 0;
}

static void test_copy_tree_does_not_cross_mounts(void **state)
{
	(void)state;
	in_child(child_copy_tree_mount);
}

/* ---- wr_chown_tree ------------------------------------------------------------ */

static void assert_owner(const char *path, uid_t uid, gid_t gid)
{
	struct stat st;
	assert_int_equal(lstat(path, &st), 0);
	if (st.st_uid != uid || st.st_gid != gid)
		fail_msg("%s owned by %u:%u, want %u:%u", path,
			 (unsigned)st.st_uid, (unsigned)st.st_gid, (unsigned)uid,
			 (unsigned)gid);
}

static void test_chown_tree_changes_every_entry(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	mkd(P("t"), 0755);
	mkd(P("t/sub"), 0700);
	mkd(P("t/sub/deeper"), 0755);
	put(P("t/f"), "x", 0644);
	put(P("t/sub/deeper/g"), "x", 0600);
	lnk("f", P("t/link"));
	assert_int_equal(wr_chown_tree(P("t"), 4242, 4343), 0);
	static const char *const all[] = { "t", "t/sub", "t/sub/deeper", "t/f",
					   "t/sub/deeper/g", "t/link" };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		assert_owner(P(all[i]), 4242, 4343);
}

static void test_chown_tree_does_not_follow_symlinks(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	mkd(P("outside"), 0755);
	put(P("outside/secret"), "s", 0600);
	mkd(P("t"), 0755);
	lnk(P("outside"), P("t/dir_link"));
	lnk(P("outside/secret"), P("t/file_link"));
	lnk(P("outside"), P("top_link"));
	assert_int_equal(wr_chown_tree(P("t"), 4242, 4343), 0);
	assert_owner(P("t/dir_link"), 4242, 4343);
	assert_owner(P("t/file_link"), 4242, 4343);
	assert_int_equal(wr_chown_tree(P("top_link"), 4242, 4343), 0);
	assert_owner(P("top_link"), 4242, 4343);
	assert_owner(P("outside"), 0, 0);
	assert_owner(P("outside/secret"), 0, 0);
}

static void test_chown_tree_file_and_missing(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	put(P("f"), "x", 0644);
	assert_int_equal(wr_chown_tree(P("f"), 7, 8), 0);
	assert_owner(P("f"), 7, 8);
	assert_int_equal(wr_chown_tree(P("missing"), 7, 8), -ENOENT);
}

/* ---- wr_is_mount_point, wr_self_dir ------------------------------------------- */

static void test_is_mount_point(void **state)
{
	(void)state;
	assert_int_equal(wr_is_mount_point("/"), 1);
	assert_int_equal(wr_is_mount_point("/proc"), 1);
	assert_int_equal(wr_is_mount_point(dir), 0);
	mkd(P("d"), 0755);
	assert_int_equal(wr_is_mount_point(P("d")), 0);
	assert_int_equal(wr_is_mount_point(P("missing")), -ENOENT);
}

static int child_is_mount_point(void)
{
	if (private_mounts() < 0)
		return SKIP_STATUS;
	CHILD_CHECK(mkdir(P("m"), 0755) == 0);
	CHILD_CHECK(wr_is_mount_point(P("m")) == 0);
	CHILD_CHECK(mount("tmpfs", P("m"), "tmpfs", 0, "size=1m") == 0);
	CHILD_CHECK(wr_is_mount_point(P("m")) == 1);
	CHILD_CHECK(umount(P("m")) == 0);
	return 0;
}

static void test_is_mount_point_sees_new_mount(void **state)
{
	(void)state;
	in_child(child_is_mount_point);
}

static void test_self_dir(void **state)
{
	(void)state;
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	assert_true(n > 0);
	exe[n] = '\0';
	*strrchr(exe, '/') = '\0';
	char *got = wr_self_dir();
	assert_non_null(got);
	assert_string_equal(got, exe);
	free(got);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, test_setup, test_teardown)
	const struct CMUnitTest tests[] = {
		T(test_mkdir_p_creates_nested),
		T(test_mkdir_p_existing_is_ok),
		T(test_mkdir_p_applies_mode),
		T(test_mkdir_p_extra_slashes),
		T(test_mkdir_p_relative_path),
		T(test_mkdir_p_file_in_the_way),
		T(test_mkdir_p_permission_denied),
		T(test_mkdir_p_empty_path_is_error),
		T(test_mkdir_p_alloc_failure),
		T(test_rm_rf_removes_tree),
		T(test_rm_rf_removes_mode_000_dirs),
		T(test_rm_rf_missing_is_success),
		T(test_rm_rf_single_file_and_symlink),
		T(test_rm_rf_keeps_outside_dir_behind_inner_symlink),
		T(test_rm_rf_does_not_follow_top_level_symlink),
		T(test_rm_rf_does_not_cross_mount_point),
		T(test_rm_rf_does_not_cross_bind_mount),
		T(test_rm_rf_deep_tree_within_cap),
		T(test_rm_rf_too_deep_tree_leaks_no_fd),
		T(test_write_atomic_creates_file),
		T(test_write_atomic_replaces_whole_file),
		T(test_write_atomic_empty_and_binary),
		T(test_write_atomic_leaves_no_temp_file),
		T(test_write_atomic_missing_directory),
		T(test_write_atomic_replaces_symlink_not_target),
		T(test_write_atomic_alloc_failure),
		T(test_write_file_existing_only),
		T(test_read_file_reads_content),
		T(test_read_file_cap_boundaries),
		T(test_read_file_empty),
		T(test_read_file_binary_and_large),
		T(test_read_file_procfs),
		T(test_read_file_errors),
		T(test_copy_tree_copies_files_dirs_and_modes),
		T(test_copy_tree_keeps_dir_modes_under_umask),
		T(test_copy_tree_copies_symlinks_as_links),
		T(test_copy_tree_skips_special_files),
		T(test_copy_tree_errors),
		T(test_copy_tree_single_file_and_symlink),
		T(test_copy_tree_does_not_cross_mounts),
		T(test_chown_tree_changes_every_entry),
		T(test_chown_tree_does_not_follow_symlinks),
		T(test_chown_tree_file_and_missing),
		T(test_is_mount_point),
		T(test_is_mount_point_sees_new_mount),
		T(test_self_dir),
	};
#undef T
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
