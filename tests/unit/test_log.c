/* test_log.c - util/log.h: the line format, the threshold and $WARREN_LOG,
 * control characters escaped, long messages cut, errno kept. stderr
 * points at a temporary file while a test logs (capture), and back at the
 * terminal before it checks what was written (written). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/log.h"

static char log_path[] = "/tmp/warren-unit-log.XXXXXX";
static int saved_stderr = -1;

static int group_setup(void **state)
{
	(void)state;
	int fd = mkstemp(log_path);
	if (fd < 0)
		return -1;
	close(fd);
	saved_stderr = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
	return saved_stderr < 0 ? -1 : 0;
}

static int group_teardown(void **state)
{
	(void)state;
	close(saved_stderr);
	unlink(log_path);
	return 0;
}

static int test_teardown(void **state)
{
	(void)state;
	dup2(saved_stderr, STDERR_FILENO);
	unsetenv("WARREN_LOG");
	wr_log_set_level(WR_LOG_INFO);
	return 0;
}

/* stderr into the (emptied) file, until written() */
static void capture(void)
{
	int fd = open(log_path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
	close(fd);
}

/* stderr back (cmocka reports failures there), and what was written
 * since capture() (static buffer). */
static const char *written(void)
{
	static char buf[8192];
	dup2(saved_stderr, STDERR_FILENO);
	int fd = open(log_path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n >= 0);
	buf[n] = '\0';
	return buf;
}

static void test_format(void **state)
{
	(void)state;
	assert_int_equal(wr_log_setup("warren-test", NULL), 0);
	capture();
	wr_log_error("open %s: %s", "/x", "No such file or directory");
	wr_log(WR_LOG_WARN, "api", "GET /v1/x: %d", 503);
	wr_log_info("listening");
	assert_string_equal(written(),
			    "warren-test: error: open /x: No such file or "
			    "directory\n"
			    "warren-test: warn: api: GET /v1/x: 503\n"
			    "warren-test: info: listening\n");
}

static int evaluated;
static int count(void)
{
	return ++evaluated;
}

static void test_threshold(void **state)
{
	(void)state;
	evaluated = 0;
	capture();
	wr_log_debug("not shown %d", count());
	assert_int_equal(evaluated, 0); /* the arguments are not evaluated */
	assert_string_equal(written(), "");
	wr_log_set_level(WR_LOG_DEBUG);
	capture();
	wr_log_debug("shown %d", count());
	assert_int_equal(evaluated, 1);
	assert_non_null(strstr(written(), ": debug: shown 1\n"));
	wr_log_set_level(WR_LOG_ERROR);
	capture();
	wr_log_warn("hidden");
	wr_log_info("hidden");
	wr_log_error("kept");
	const char *w = written();
	assert_null(strstr(w, "hidden"));
	assert_non_null(strstr(w, ": error: kept\n"));
	/* out of range: left as it was */
	wr_log_set_level(WR_LOG_LEVEL_MAX);
	assert_int_equal(wr_log_threshold, WR_LOG_ERROR);
}

static void test_env(void **state)
{
	(void)state;
	setenv("WARREN_LOG", "debug", 1);
	assert_int_equal(wr_log_setup(NULL, NULL), 0);
	assert_int_equal(wr_log_threshold, WR_LOG_DEBUG);
	setenv("WARREN_LOG", "WARN", 1);
	assert_int_equal(wr_log_setup(NULL, NULL), 0);
	assert_int_equal(wr_log_threshold, WR_LOG_WARN);
	setenv("WARREN_LOG", "", 1); /* empty: unchanged */
	assert_int_equal(wr_log_setup(NULL, NULL), 0);
	assert_int_equal(wr_log_threshold, WR_LOG_WARN);

	struct wr_error *err = NULL;
	setenv("WARREN_LOG", "verbose", 1);
	assert_int_equal(wr_log_setup(NULL, &err), -EINVAL);
	assert_non_null(err);
	assert_true(err->bad_input);
	assert_non_null(strstr(err->msg, "WARREN_LOG"));
	assert_non_null(strstr(err->msg, "'verbose'"));
	assert_non_null(strstr(err->msg, "debug"));
	wr_error_free(err);
	assert_int_equal(wr_log_threshold, WR_LOG_WARN);

	enum wr_log_level l = WR_LOG_LEVEL_MAX;
	assert_int_equal(wr_log_level_parse("info", &l), 0);
	assert_int_equal(l, WR_LOG_INFO);
	assert_int_equal(wr_log_level_parse(NULL, &l), -EINVAL);
	assert_int_equal(wr_log_level_parse("info ", &l), -EINVAL);
	assert_string_equal(wr_log_level_name(WR_LOG_ERROR), "error");
	assert_string_equal(wr_log_level_name(WR_LOG_LEVEL_MAX), "?");
}

static void test_control_characters_escaped(void **state)
{
	(void)state;
	capture();
	wr_log(WR_LOG_ERROR, "api", "GET %s: %s", "/a\nwarren: info: forged",
	       "tab\there\x7f");
	const char *w = written();
	assert_non_null(strstr(
	    w, "api: GET /a\\x0awarren: info: forged: tab\\x09here\\x7f\n"));
	/* one line */
	assert_ptr_equal(strchr(w, '\n'), w + strlen(w) - 1);
}

static void test_long_message_cut(void **state)
{
	(void)state;
	char big[3 * WR_LOG_LINE_MAX];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	capture();
	wr_log_error("%s", big);
	const char *w = written();
	size_t len = strlen(w);
	assert_true(len <= WR_LOG_LINE_MAX + 4);
	assert_string_equal(w + len - 4, "...\n");
	/* escapes that would not fit are cut whole */
	char ctl[WR_LOG_LINE_MAX];
	memset(ctl, '\001', sizeof(ctl) - 1);
	ctl[sizeof(ctl) - 1] = '\0';
	capture();
	wr_log_error("%s", ctl);
	w = written();
	len = strlen(w);
	assert_true(len <= WR_LOG_LINE_MAX + 4);
	assert_string_equal(w + len - 8, "\\x01...\n");
}

static void test_errno_kept(void **state)
{
	(void)state;
	errno = ENOSPC;
	capture();
	wr_log_error("something");
	int e = errno;
	assert_non_null(strstr(written(), "something"));
	assert_int_equal(e, ENOSPC);
	/* nowhere to write: no crash, errno kept */
	close(STDERR_FILENO);
	errno = EACCES;
	wr_log_error("lost");
	e = errno;
	dup2(saved_stderr, STDERR_FILENO);
	assert_int_equal(e, EACCES);
}

int main(void)
{
#define T(f) cmocka_unit_test_teardown(f, test_teardown)
	const struct CMUnitTest tests[] = {
	    T(test_format),
	    T(test_threshold),
	    T(test_env),
	    T(test_control_characters_escaped),
	    T(test_long_message_cut),
	    T(test_errno_kept),
	};
#undef T
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
