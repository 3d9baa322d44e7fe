/* test_secrets.c - the secrets store (security/secrets.h): values round
 * trip and are never on disk in clear; another key, a file copied over
 * another name's, an edited ciphertext or header all fail to decrypt; a
 * key or directory others may read is refused; names and values are
 * checked; a list needs no key and holds no value; concurrent sets leave a
 * whole file; loading a spec's secrets names every missing one; values are
 * found in a tree (also across read chunks, in link targets and names)
 * and redacted from text; the shell payload hands any value to a hook
 * byte for byte. In a scratch directory under /tmp. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "security/secrets.h"
#include "snapshot/script.h"
#include "util/alloc.h"
#include "util/fs.h"

static char root[] = "/tmp/warren-unit-secrets.XXXXXX";
static char data[PATH_MAX]; /* this test's data directory */
static int test_seq;

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
	return mkdtemp(root) ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}

static int setup(void **state)
{
	(void)state;
	snprintf(data, sizeof(data), "%s/t%d", root, ++test_seq);
	return mkdir(data, 0700);
}

/* data/rel; four buffers in turn, so that two may be used at once */
static char *path_of(const char *rel)
{
	static char bufs[4][PATH_MAX];
	static unsigned next;
	char *buf = bufs[next++ % 4];
	snprintf(buf, PATH_MAX, "%s/%s", data, rel);
	return buf;
}

static void set_ok(const char *name, const char *value)
{
	struct wr_error *err = NULL;
	int r = secrets_set(data, name, value, strlen(value), NULL, &err);
	if (r < 0)
		fail_msg("set %s: %s", name, err ? err->msg : "?");
	wr_error_free(err);
}

/* get name: its status; the value must be want when it succeeds */
static int get_status(const char *name, const char *want)
{
	char *value = NULL;
	size_t len = 0;
	struct wr_error *err = NULL;
	int r = secrets_get(data, name, &value, &len, &err);
	if (r == 0 && want) {
		assert_int_equal(len, strlen(want));
		assert_memory_equal(value, want, len);
		assert_int_equal(value[len], '\0');
	}
	if (r < 0)
		assert_non_null(err); /* every failure says why */
	secrets_value_free(value, len);
	wr_error_free(err);
	return r;
}

static bool file_contains(const char *path, const void *needle, size_t len)
{
	char *text = NULL;
	size_t n = 0;
	if (wr_read_file(path, 1 << 20, &text, &n) < 0)
		return false;
	bool found = memmem(text, n, needle, len) != NULL;
	free(text);
	return found;
}

static void test_round_trip(void **state)
{
	(void)state;
	const char *value = "ghp_0123456789abcdefTOKEN";
	struct secret_info info;
	struct wr_error *err = NULL;
	assert_int_equal(secrets_set(data, "REGISTRY_TOKEN", value,
				     strlen(value), &info, &err),
			 0);
	assert_string_equal(info.name, "REGISTRY_TOKEN");
	assert_true(info.created_ms > 0);
	assert_int_equal(info.created_ms, info.updated_ms);
	assert_int_equal(get_status("REGISTRY_TOKEN", value), 0);

	/* on disk: the key 0400, 32 bytes; the directory 0700; the file
	 * 0600 and without the value */
	struct stat st;
	assert_int_equal(stat(path_of("secrets.key"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0400);
	assert_int_equal(st.st_size, SECRETS_KEY_BYTES);
	assert_int_equal(stat(path_of("secrets"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(stat(path_of("secrets/REGISTRY_TOKEN.enc"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_false(file_contains(path_of("secrets/REGISTRY_TOKEN.enc"), value,
				   strlen(value)));
	assert_false(file_contains(path_of("secrets/REGISTRY_TOKEN.enc"),
				   "0123456789abcdef", 16));

	/* replaced: created stays, the value and updated change; nothing
	 * but the secret files is left in the directory */
	usleep(2000);
	struct secret_info again;
	assert_int_equal(secrets_set(data, "REGISTRY_TOKEN", "second value", 12,
				     &again, &err),
			 0);
	assert_int_equal(again.created_ms, info.created_ms);
	assert_true(again.updated_ms > info.updated_ms);
	assert_int_equal(get_status("REGISTRY_TOKEN", "second value"), 0);

	/* a value with every byte but NUL */
	char all[256];
	for (int i = 1; i < 256; i++)
		all[i - 1] = (char)i;
	all[255] = '\0';
	set_ok("BYTES", all);
	assert_int_equal(get_status("BYTES", all), 0);

	assert_int_equal(get_status("NOT_SET", NULL), -ENOENT);
	wr_error_free(err);
}

static void test_nothing_stored(void **state)
{
	(void)state;
	/* no directory, no key: nothing is there, nothing is created */
	struct secret_info *list = NULL;
	size_t n = 9;
	assert_int_equal(secrets_list(data, &list, &n, NULL), 0);
	assert_int_equal(n, 0);
	assert_null(list);
	assert_int_equal(get_status("ANY", NULL), -ENOENT);
	assert_int_equal(secrets_delete(data, "ANY", NULL), -ENOENT);
	struct stat st;
	assert_int_equal(stat(path_of("secrets.key"), &st), -1);
	assert_int_equal(stat(path_of("secrets"), &st), -1);
}

static void test_wrong_key(void **state)
{
	(void)state;
	set_ok("A_TOKEN", "value-of-a-token");
	/* another store's key: same size and mode, other bytes */
	unlink(path_of("secrets.key"));
	int fd =
	    open(path_of("secrets.key"), O_WRONLY | O_CREAT | O_EXCL, 0400);
	assert_true(fd >= 0);
	unsigned char other[SECRETS_KEY_BYTES];
	memset(other, 0x5a, sizeof(other));
	assert_int_equal(write(fd, other, sizeof(other)), sizeof(other));
	close(fd);
	assert_int_equal(get_status("A_TOKEN", NULL), -EBADMSG);

	/* no key at all */
	unlink(path_of("secrets.key"));
	assert_int_equal(get_status("A_TOKEN", NULL), -ENOKEY);
}

static void copy_file(const char *from, const char *to)
{
	char *text = NULL;
	size_t n = 0;
	assert_int_equal(wr_read_file(from, 1 << 20, &text, &n), 0);
	assert_int_equal(wr_write_file_atomic(to, text, n, 0600, false), 0);
	free(text);
}

static void test_swapped_files(void **state)
{
	(void)state;
	set_ok("ALPHA", "alpha-secret-value");
	set_ok("BETA", "beta-secret-value");
	/* ALPHA's file under BETA's name: the name is associated data */
	copy_file(path_of("secrets/ALPHA.enc"), path_of("secrets/BETA.enc"));
	assert_int_equal(get_status("BETA", NULL), -EBADMSG);
	assert_int_equal(get_status("ALPHA", "alpha-secret-value"), 0);
	/* ... and under a new name */
	copy_file(path_of("secrets/ALPHA.enc"), path_of("secrets/GAMMA.enc"));
	assert_int_equal(get_status("GAMMA", NULL), -EBADMSG);
}

static void flip_byte(const char *path, off_t at)
{
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	unsigned char b;
	assert_int_equal(pread(fd, &b, 1, at), 1);
	b ^= 0x01;
	assert_int_equal(pwrite(fd, &b, 1, at), 1);
	close(fd);
}

static void test_tampered(void **state)
{
	(void)state;
	const char *file = path_of("secrets/TOKEN.enc");
	struct stat st;
	/* ciphertext: first byte, last byte (the tag) */
	set_ok("TOKEN", "a-token-value-1234");
	flip_byte(file, 48);
	assert_int_equal(get_status("TOKEN", NULL), -EBADMSG);
	set_ok("TOKEN", "a-token-value-1234");
	assert_int_equal(stat(file, &st), 0);
	flip_byte(file, st.st_size - 1);
	assert_int_equal(get_status("TOKEN", NULL), -EBADMSG);
	/* the header (updated_ms) and the nonce are authenticated too */
	set_ok("TOKEN", "a-token-value-1234");
	flip_byte(file, 20);
	assert_int_equal(get_status("TOKEN", NULL), -EBADMSG);
	set_ok("TOKEN", "a-token-value-1234");
	flip_byte(file, 30);
	assert_int_equal(get_status("TOKEN", NULL), -EBADMSG);
	/* cut short */
	set_ok("TOKEN", "a-token-value-1234");
	assert_int_equal(truncate(file, 40), 0);
	assert_int_equal(get_status("TOKEN", NULL), -EBADMSG);
	/* intact again */
	set_ok("TOKEN", "a-token-value-1234");
	assert_int_equal(get_status("TOKEN", "a-token-value-1234"), 0);
}

static void test_key_mode(void **state)
{
	(void)state;
	set_ok("TOKEN", "a-token-value-1234");
	const char *key = path_of("secrets.key");
	/* readable by group or others: refused for reading and writing */
	static const mode_t bad[] = {0440, 0404, 0644, 0600 | 0002};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		assert_int_equal(chmod(key, bad[i]), 0);
		assert_int_equal(get_status("TOKEN", NULL), -EPERM);
		struct wr_error *err = NULL;
		assert_int_equal(
		    secrets_set(data, "TOKEN", "x-value-123", 11, NULL, &err),
		    -EPERM);
		assert_non_null(strstr(err->msg, "secrets.key"));
		wr_error_free(err);
	}
	assert_int_equal(chmod(key, 0600), 0);
	assert_int_equal(get_status("TOKEN", "a-token-value-1234"), 0);

	/* owned by someone else (when we can chown) */
	if (geteuid() == 0) {
		assert_int_equal(chown(key, 12345, 0), 0);
		assert_int_equal(get_status("TOKEN", NULL), -EPERM);
		assert_int_equal(chown(key, 0, 0), 0);
	}

	/* a symbolic link is not followed */
	assert_int_equal(rename(key, path_of("real.key")), 0);
	assert_int_equal(symlink(path_of("real.key"), key), 0);
	assert_true(get_status("TOKEN", NULL) < 0);
	unlink(key);
	assert_int_equal(rename(path_of("real.key"), key), 0);

	/* a wrong size */
	assert_int_equal(chmod(key, 0600), 0);
	assert_int_equal(truncate(key, 16), 0);
	assert_int_equal(get_status("TOKEN", NULL), -EINVAL);

	/* the directory open to others */
	unlink(key);
	set_ok("OTHER", "other-value-123"); /* a new key */
	assert_int_equal(chmod(path_of("secrets"), 0755), 0);
	assert_int_equal(get_status("OTHER", NULL), -EPERM);
	struct secret_info *list = NULL;
	size_t n = 0;
	assert_int_equal(secrets_list(data, &list, &n, NULL), -EPERM);
	assert_int_equal(chmod(path_of("secrets"), 0700), 0);
	assert_int_equal(get_status("OTHER", "other-value-123"), 0);
}

static void test_names_values(void **state)
{
	(void)state;
	static const char *const bad_names[] = {
	    "", "lower", "1ABC", "A-B", "A B", "A.B", "ÄB", "A\nB", NULL};
	for (size_t i = 0; bad_names[i]; i++) {
		assert_false(secrets_name_valid(bad_names[i]));
		struct wr_error *err = NULL;
		assert_int_equal(
		    secrets_set(data, bad_names[i], "value-123", 9, NULL, &err),
		    -EINVAL);
		assert_true(err && err->bad_input);
		wr_error_free(err);
	}
	char name[SECRETS_NAME_MAX + 2];
	memset(name, 'N', sizeof(name));
	name[SECRETS_NAME_MAX] = '\0';
	assert_true(secrets_name_valid(name));
	set_ok(name, "value-of-the-longest");
	name[SECRETS_NAME_MAX] = 'N';
	name[SECRETS_NAME_MAX + 1] = '\0';
	assert_false(secrets_name_valid(name));
	assert_true(secrets_name_valid("_X"));
	assert_true(secrets_name_valid("A1_2"));
	assert_false(secrets_name_valid(NULL));

	struct wr_error *err = NULL;
	assert_int_equal(secrets_set(data, "EMPTY", "", 0, NULL, &err),
			 -EINVAL);
	assert_true(err->bad_input);
	wr_error_free(err);
	err = NULL;
	assert_int_equal(secrets_set(data, "NUL", "ab\0cd", 5, NULL, &err),
			 -EINVAL);
	assert_true(err->bad_input);
	wr_error_free(err);
	err = NULL;
	char *big = malloc(SECRETS_VALUE_MAX + 2);
	memset(big, 'v', SECRETS_VALUE_MAX + 1);
	big[SECRETS_VALUE_MAX + 1] = '\0';
	assert_int_equal(
	    secrets_set(data, "BIG", big, SECRETS_VALUE_MAX + 1, NULL, &err),
	    -EINVAL);
	wr_error_free(err);
	big[SECRETS_VALUE_MAX] = '\0';
	set_ok("BIG", big); /* exactly the most */
	assert_int_equal(get_status("BIG", big), 0);
	free(big);
	assert_int_equal(get_status("BAD-NAME", NULL), -EINVAL);
}

static void test_list(void **state)
{
	(void)state;
	set_ok("ZETA", "zeta-value-123456");
	set_ok("ALPHA", "alpha-value-123456");
	set_ok("MID_1", "mid-value-123456");
	/* not secrets: ignored by the list */
	close(open(path_of("secrets/README"), O_CREAT | O_WRONLY, 0600));
	close(open(path_of("secrets/lower.enc"), O_CREAT | O_WRONLY, 0600));
	/* a list reads headers only: it works without the key */
	assert_int_equal(rename(path_of("secrets.key"), path_of("away.key")),
			 0);
	struct secret_info *list = NULL;
	size_t n = 0;
	assert_int_equal(secrets_list(data, &list, &n, NULL), 0);
	assert_int_equal(n, 3);
	assert_string_equal(list[0].name, "ALPHA");
	assert_string_equal(list[1].name, "MID_1");
	assert_string_equal(list[2].name, "ZETA");
	for (size_t i = 0; i < n; i++) {
		assert_true(list[i].created_ms > 0);
		assert_true(list[i].updated_ms >= list[i].created_ms);
		/* what a list hands out holds no value */
		assert_null(
		    memmem(&list[i], sizeof(list[i]), "value-123456", 12));
	}
	free(list);
	assert_int_equal(rename(path_of("away.key"), path_of("secrets.key")),
			 0);

	assert_int_equal(secrets_delete(data, "MID_1", NULL), 0);
	assert_int_equal(get_status("MID_1", NULL), -ENOENT);
	assert_int_equal(secrets_delete(data, "MID_1", NULL), -ENOENT);
	assert_int_equal(secrets_list(data, &list, &n, NULL), 0);
	assert_int_equal(n, 2);
	free(list);
}

static void *set_many(void *arg)
{
	const char *value = arg;
	for (int i = 0; i < 40; i++)
		if (secrets_set(data, "RACE", value, strlen(value), NULL,
				NULL) < 0)
			return (void *)1;
	return NULL;
}

static void test_concurrent_sets(void **state)
{
	(void)state;
	static const char *const values[] = {
	    "first-racer-value", "second-racer-value", "third-racer-value"};
	pthread_t t[3];
	for (int i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, set_many, (void *)values[i]);
	for (int i = 0; i < 3; i++) {
		void *ret;
		pthread_join(t[i], &ret);
		assert_null(ret);
	}
	char *value = NULL;
	size_t len = 0;
	assert_int_equal(secrets_get(data, "RACE", &value, &len, NULL), 0);
	assert_true(!strcmp(value, values[0]) || !strcmp(value, values[1]) ||
		    !strcmp(value, values[2]));
	secrets_value_free(value, len);
	/* no temporary file left */
	struct secret_info *list = NULL;
	size_t n = 0;
	assert_int_equal(secrets_list(data, &list, &n, NULL), 0);
	assert_int_equal(n, 1);
	free(list);
	DIR *d = opendir(path_of("secrets"));
	struct dirent *de;
	int entries = 0;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' || strlen(de->d_name) > 2)
			entries++;
	closedir(d);
	assert_int_equal(entries, 1);
}

static void test_load(void **state)
{
	(void)state;
	set_ok("REGISTRY_TOKEN", "registry-token-value");
	set_ok("NPM_TOKEN", "npm-token-value-xyz");
	char *names[] = {"REGISTRY_TOKEN", "NPM_TOKEN", "REGISTRY_TOKEN"};
	struct secret_set set = {0};
	assert_int_equal(secrets_load(data, names, 3, NULL, &set, NULL), 0);
	assert_int_equal(set.n, 2); /* the duplicate once */
	assert_string_equal(set.v[0].name, "REGISTRY_TOKEN");
	assert_string_equal(set.v[0].value, "registry-token-value");
	assert_int_equal(set.v[1].len, strlen("npm-token-value-xyz"));
	secret_set_clear(&set);
	assert_int_equal(set.n, 0);
	assert_null(set.v);

	/* every missing one is named, in one input error */
	char *more[] = {"NPM_TOKEN", "UNKNOWN_ONE", "lower_case",
			"UNKNOWN_TWO"};
	struct wr_error *err = NULL;
	assert_int_equal(secrets_load(data, more, 4, NULL, &set, &err),
			 -EINVAL);
	assert_true(err->bad_input);
	assert_non_null(strstr(err->msg, "UNKNOWN_ONE"));
	assert_non_null(strstr(err->msg, "UNKNOWN_TWO"));
	assert_non_null(strstr(err->msg, "lower_case"));
	assert_null(strstr(err->msg, "NPM_TOKEN"));
	assert_non_null(strstr(err->msg, "not set"));
	assert_int_equal(set.n, 0);
	wr_error_free(err);

	assert_int_equal(secrets_load(data, NULL, 0, NULL, &set, NULL), 0);
	assert_int_equal(set.n, 0);
}

/* A secret for some repositories only: the list, kept next to it; the
 * builds of others (or of none named) are refused, saying which. */
static void test_repositories(void **state)
{
	(void)state;
	set_ok("DEPLOY_KEY", "deploy-key-value-123");
	char **repos = NULL;
	size_t n = 99;
	assert_int_equal(secrets_repos_get(data, "DEPLOY_KEY", &repos, &n,
					   NULL),
			 0);
	assert_null(repos); /* any repository */
	assert_int_equal(n, 0);
	char *grant[] = {"app", "web.site"};
	assert_int_equal(
	    secrets_repos_set(data, "DEPLOY_KEY", grant, 2, NULL), 0);
	assert_int_equal(secrets_repos_get(data, "DEPLOY_KEY", &repos, &n,
					   NULL),
			 0);
	assert_int_equal(n, 2);
	assert_string_equal(repos[1], "web.site");
	secrets_repos_free(repos, n);

	char *names[] = {"DEPLOY_KEY"};
	struct secret_set set = {0};
	assert_int_equal(secrets_load(data, names, 1, "app", &set, NULL), 0);
	assert_int_equal(set.n, 1);
	secret_set_clear(&set);
	struct wr_error *err = NULL;
	assert_int_equal(secrets_load(data, names, 1, "other", &set, &err),
			 -EINVAL);
	assert_true(err->bad_input);
	assert_non_null(strstr(err->msg, "for the builds of app, web.site "
					 "only, not of other"));
	assert_null(strstr(err->msg, "deploy-key-value"));
	assert_int_equal(set.n, 0);
	wr_error_freep(&err);
	assert_int_equal(secrets_load(data, names, 1, NULL, &set, &err),
			 -EINVAL);
	assert_non_null(strstr(err->msg, "names no repository"));
	wr_error_freep(&err);

	/* bad names, unknown secrets, a list that is not one */
	char *bad[] = {"ok", "no/slash"};
	assert_int_equal(secrets_repos_set(data, "DEPLOY_KEY", bad, 2, &err),
			 -EINVAL);
	assert_non_null(strstr(err->msg, "no/slash"));
	wr_error_freep(&err);
	char *dot[] = {".hidden"};
	assert_int_equal(secrets_repos_set(data, "DEPLOY_KEY", dot, 1, NULL),
			 -EINVAL);
	assert_int_equal(secrets_repos_set(data, "NO_SUCH", grant, 1, NULL),
			 -ENOENT);
	const char *not_names = "[\"app\", 7]";
	assert_int_equal(wr_write_file_atomic(
			     path_of("secrets/DEPLOY_KEY.repos"), not_names,
			     strlen(not_names), 0600, false),
			 0);
	assert_int_equal(secrets_repos_get(data, "DEPLOY_KEY", &repos, &n,
					   &err),
			 -EBADMSG);
	wr_error_freep(&err);
	/* and the load fails closed on it */
	assert_true(secrets_load(data, names, 1, "app", &set, NULL) < 0);

	/* none: any repository again; a deleted secret leaves no list */
	assert_int_equal(secrets_repos_set(data, "DEPLOY_KEY", NULL, 0, NULL),
			 0);
	assert_int_equal(secrets_load(data, names, 1, "other", &set, NULL),
			 0);
	secret_set_clear(&set);
	assert_int_equal(secrets_repos_set(data, "DEPLOY_KEY", grant, 1, NULL),
			 0);
	assert_int_equal(secrets_delete(data, "DEPLOY_KEY", NULL), 0);
	assert_int_equal(access(path_of("secrets/DEPLOY_KEY.repos"), F_OK),
			 -1);
	assert_true(secrets_repo_name_valid("c-hello_2.x"));
	assert_false(secrets_repo_name_valid(""));
	assert_false(secrets_repo_name_valid("a b"));
}

static void write_at(const char *rel, const void *text, size_t len)
{
	assert_int_equal(
	    wr_write_file_atomic(path_of(rel), text, len, 0644, false), 0);
}

static int find(const struct secret_set *set, char **name, char **path)
{
	return secrets_find_in_tree(path_of("tree"), set, name, path, NULL);
}

static void test_find_in_tree(void **state)
{
	(void)state;
	set_ok("LONG_TOKEN", "tok-3f9a8b7c6d5e");
	set_ok("SHORT", "abc");
	char *names[] = {"LONG_TOKEN", "SHORT"};
	struct secret_set set = {0};
	assert_int_equal(secrets_load(data, names, 2, NULL, &set, NULL), 0);
	assert_int_equal(wr_mkdir_p(path_of("tree/root/.cache"), 0755), 0);
	write_at("tree/root/.bashrc", "export PATH=abc\n", 16);
	char *name = NULL, *path = NULL;
	/* a short value is not looked for: "abc" is everywhere */
	assert_int_equal(find(&set, &name, &path), 0);

	/* in a file's contents */
	write_at("tree/root/.npmrc",
		 "//registry/:_authToken=tok-3f9a8b7c6d5e\n", 40);
	assert_int_equal(find(&set, &name, &path), 1);
	assert_string_equal(name, "LONG_TOKEN");
	assert_string_equal(path, "/root/.npmrc");
	free(name);
	free(path);
	unlink(path_of("tree/root/.npmrc"));
	assert_int_equal(find(&set, &name, &path), 0);

	/* across the scanner's 1 MiB reads */
	size_t big = (1u << 20) + 64;
	char *blob = malloc(big);
	memset(blob, 'x', big);
	memcpy(blob + (1u << 20) - 7, "tok-3f9a8b7c6d5e", 16);
	write_at("tree/root/.cache/blob", blob, big);
	free(blob);
	assert_int_equal(find(&set, &name, &path), 1);
	assert_string_equal(path, "/root/.cache/blob");
	free(name);
	free(path);
	unlink(path_of("tree/root/.cache/blob"));

	/* a link's target, not followed; an entry's name */
	assert_int_equal(symlink("/tok-3f9a8b7c6d5e", path_of("tree/link")), 0);
	assert_int_equal(find(&set, &name, &path), 1);
	assert_string_equal(path, "/link");
	free(name);
	free(path);
	unlink(path_of("tree/link"));
	write_at("tree/root/tok-3f9a8b7c6d5e.txt", "nothing", 7);
	assert_int_equal(find(&set, &name, &path), 1);
	assert_string_equal(path, "/root/tok-3f9a8b7c6d5e.txt");
	free(name);
	free(path);
	unlink(path_of("tree/root/tok-3f9a8b7c6d5e.txt"));
	assert_int_equal(find(&set, &name, &path), 0);

	/* redaction: every occurrence of the long value, not the short */
	char line[] = "token tok-3f9a8b7c6d5e and tok-3f9a8b7c6d5e, abc";
	assert_int_equal(secrets_redact(line, &set), 2);
	assert_string_equal(line, "token *** and ***, abc");
	secret_set_clear(&set);
}

/* The payload the builder writes to a step's stdin, evaluated as the
 * step's script does, gives back every value byte for byte. */
static void test_shell_payload(void **state)
{
	(void)state;
	static const char *const values[] = {
	    "it's a 'quoted' value", "two\nlines\n",
	    "$(touch /tmp/no) `x` $HOME", "back\\slash \"dq\" \t tab",
	    "\x01\x7f\xff\xfe utf8: é"};
	char *names[] = {"V0", "V1", "V2", "V3", "V4"};
	for (int i = 0; i < 5; i++)
		assert_int_equal(secrets_set(data, names[i], values[i],
					     strlen(values[i]), NULL, NULL),
				 0);
	struct secret_set set = {0};
	assert_int_equal(secrets_load(data, names, 5, NULL, &set, NULL), 0);
	size_t len = 0;
	char *payload = sh_secrets_payload(&set, &len);
	assert_non_null(payload);
	assert_int_equal(len, strlen(payload));
	for (int i = 0; i < 5; i++) {
		char script[256];
		snprintf(script, sizeof(script),
			 "eval \"$(cat)\"; printf %%s \"$warren_secret_%s\"",
			 names[i]);
		int in[2], out[2];
		assert_int_equal(pipe(in), 0);
		assert_int_equal(pipe(out), 0);
		pid_t pid = fork();
		if (pid == 0) {
			dup2(in[0], 0);
			dup2(out[1], 1);
			close(in[1]);
			close(out[0]);
			execl("/bin/sh", "sh", "-c", script, (char *)NULL);
			_exit(127);
		}
		close(in[0]);
		close(out[1]);
		assert_int_equal(write(in[1], payload, len), (ssize_t)len);
		close(in[1]);
		char got[256];
		size_t n = 0;
		ssize_t k;
		while ((k = read(out[0], got + n, sizeof(got) - 1 - n)) > 0)
			n += (size_t)k;
		close(out[0]);
		int status;
		waitpid(pid, &status, 0);
		assert_int_equal(n, strlen(values[i]));
		assert_memory_equal(got, values[i], n);
	}
	secrets_value_free(payload, len);
	secret_set_clear(&set);
	struct stat st;
	assert_int_equal(stat("/tmp/no", &st), -1);
}

/* A secret's files as they are (what the store carries between hosts):
 * copied into another data directory with the same key they decrypt
 * there, with their list; under another key secrets_check says so; a
 * file or list that is not one, or a bad name, is refused. */
static void test_files_copied(void **state)
{
	(void)state;
	set_ok("COPIED", "copied-value-123456");
	char *repos_in[] = {(char *)"app"};
	struct wr_error *err = NULL;
	assert_int_equal(secrets_repos_set(data, "COPIED", repos_in, 1, &err),
			 0);
	unsigned char *file = NULL;
	size_t len = 0;
	char *repos = NULL;
	assert_int_equal(
	    secrets_file_read(data, "COPIED", &file, &len, &repos, &err), 0);
	assert_string_equal(repos, "[\"app\"]");
	char other[PATH_MAX];
	snprintf(other, sizeof(other), "%s/other", data);
	assert_int_equal(mkdir(other, 0700), 0);
	assert_int_equal(
	    secrets_file_write(other, "COPIED", file, len, repos, &err), 0);
	struct stat st;
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/secrets", other);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	snprintf(path, sizeof(path), "%s/secrets/COPIED.enc", other);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	/* no key there: it does not decrypt, and says why */
	assert_int_equal(secrets_check(other, "COPIED", &err), -ENOKEY);
	wr_error_freep(&err);
	/* another key */
	snprintf(path, sizeof(path), "%s/secrets.key", other);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0400);
	unsigned char key[SECRETS_KEY_BYTES];
	memset(key, 0x33, sizeof(key));
	assert_int_equal(write(fd, key, sizeof(key)), sizeof(key));
	close(fd);
	assert_int_equal(secrets_check(other, "COPIED", &err), -EBADMSG);
	assert_non_null(strstr(err->msg, "does not decrypt"));
	wr_error_freep(&err);
	/* the same key: it does, with its list */
	unlink(path);
	copy_file(path_of("secrets.key"), path);
	chmod(path, 0400);
	assert_int_equal(secrets_check(other, "COPIED", &err), 0);
	char **got = NULL;
	size_t n = 0;
	assert_int_equal(secrets_repos_get(other, "COPIED", &got, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(got[0], "app");
	secrets_repos_free(got, n);
	/* rewritten with no list: the list goes */
	assert_int_equal(
	    secrets_file_write(other, "COPIED", file, len, NULL, &err), 0);
	assert_int_equal(secrets_repos_get(other, "COPIED", &got, &n, &err), 0);
	assert_int_equal(n, 0);
	/* refused: not a secret's file, not a list, not a name */
	assert_int_equal(
	    secrets_file_write(other, "BAD",
			       (const unsigned char *)"WRSECRT1 short", 14,
			       NULL, &err),
	    -EBADMSG);
	wr_error_freep(&err);
	file[0] ^= 1;
	assert_int_equal(
	    secrets_file_write(other, "BAD", file, len, NULL, &err), -EBADMSG);
	wr_error_freep(&err);
	file[0] ^= 1;
	assert_int_equal(
	    secrets_file_write(other, "BAD", file, len, "[\"../x\"]", &err),
	    -EBADMSG);
	wr_error_freep(&err);
	assert_int_equal(
	    secrets_file_write(other, "../BAD", file, len, NULL, &err),
	    -EINVAL);
	wr_error_freep(&err);
	snprintf(path, sizeof(path), "%s/secrets/BAD.enc", other);
	assert_int_equal(access(path, F_OK), -1);
	free(file);
	free(repos);
	assert_int_equal(
	    secrets_file_read(data, "NONE", &file, &len, &repos, &err),
	    -ENOENT);
	wr_error_freep(&err);
}

/* secrets_key_file: checked as DATA/secrets.key is; once set, the key of
 * every data directory, never created there. Last: it is the process's. */
static void test_key_file(void **state)
{
	(void)state;
	struct wr_error *err = NULL;
	char *key = path_of("shared.key");
	assert_int_equal(secrets_use_key_file(key, &err), -ENOENT);
	assert_true(err->bad_input);
	wr_error_freep(&err);
	int fd = open(key, O_WRONLY | O_CREAT | O_EXCL, 0644);
	unsigned char bytes[SECRETS_KEY_BYTES];
	memset(bytes, 0x77, sizeof(bytes));
	assert_int_equal(write(fd, bytes, sizeof(bytes)), sizeof(bytes));
	close(fd);
	assert_int_equal(secrets_use_key_file(key, &err), -EPERM);
	wr_error_freep(&err);
	assert_int_equal(secrets_use_key_file("relative.key", &err), -EINVAL);
	wr_error_freep(&err);
	chmod(key, 0400);
	assert_int_equal(secrets_use_key_file(key, &err), 0);
	assert_string_equal(secrets_key_file(), key);
	set_ok("SHARED", "shared-value-1234");
	assert_int_equal(access(path_of("secrets.key"), F_OK), -1);
	unsigned char *file = NULL;
	size_t len = 0;
	char *repos = NULL;
	assert_int_equal(
	    secrets_file_read(data, "SHARED", &file, &len, &repos, &err), 0);
	char other[PATH_MAX];
	snprintf(other, sizeof(other), "%s/other", data);
	assert_int_equal(
	    secrets_file_write(other, "SHARED", file, len, repos, &err), 0);
	free(file);
	free(repos);
	char *value = NULL;
	size_t vlen = 0;
	assert_int_equal(secrets_get(other, "SHARED", &value, &vlen, &err), 0);
	assert_string_equal(value, "shared-value-1234");
	secrets_value_free(value, vlen);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup(f, setup)
	const struct CMUnitTest tests[] = {
	    T(test_round_trip),	     T(test_nothing_stored),
	    T(test_wrong_key),	     T(test_swapped_files),
	    T(test_tampered),	     T(test_key_mode),
	    T(test_names_values),    T(test_list),
	    T(test_concurrent_sets), T(test_load),
	    T(test_find_in_tree),    T(test_shell_payload),
	    T(test_repositories),    T(test_files_copied),
	    T(test_key_file),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
