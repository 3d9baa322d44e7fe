/* tools_run.c - the tools that run commands: bash, run_verify,
 * screenshot; and finish (see tools.h). */
#include "agent/tools_internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* stderr joins stdout (one stream, in the order written); bash where there
 * is one. $1: the command line. */
static const char bash_wrapper[] =
    "exec 2>&1\n"
    "if command -v bash >/dev/null; then exec bash -c \"$1\"; fi\n"
    "exec sh -c \"$1\"\n";

/* Appends "exit status: N" and the output, cut to max. */
static void add_output(struct tbuf *b, const struct tools_exec_result *res,
		       uint64_t timeout_ms, size_t max)
{
	if (res->status == 124 && timeout_ms)
		tbuf_printf(b,
			    "exit status: 124 (timed out after %g s: the "
			    "command was killed)\n",
			    (double)timeout_ms / 1000);
	else
		tbuf_printf(b, "exit status: %d%s\n", res->status,
			    res->out_len || res->err_len ? "" : " (no output)");
	tbuf_add_cut(b, res->out, res->out_len, max);
	if (res->out_len && res->out[res->out_len - 1] != '\n')
		tbuf_puts(b, "\n");
	if (res->truncated)
		tbuf_printf(b, "[... output past %u MiB was dropped ...]\n",
			    TOOLS_CAPTURE_MAX >> 20);
	/* stderr only carries the exec client's own messages here */
	if (res->err_len) {
		tbuf_add_cut(b, res->err, res->err_len, 1024);
		if (res->err[res->err_len - 1] != '\n')
			tbuf_puts(b, "\n");
	}
}

/* ---- bash ---------------------------------------------------------------- */

int tools_bash(struct tools_ctx *c, const json_t *args)
{
	const char *command;
	size_t clen;
	bool has_timeout;
	uint64_t timeout_s = 0;
	int r = tools_arg_string(c, args, "command", true, &command, &clen);
	if (r == 0 && strlen(command) != clen)
		r = tools_bad(c, "the command contains a NUL character");
	if (r == 0 && clen == 0)
		r = tools_bad(c, "\"command\" is empty");
	if (r == 0)
		r = tools_arg_uint(c, args, "timeout_s", 1,
				   TOOLS_MAX_BASH_TIMEOUT_MS / 1000,
				   &has_timeout, &timeout_s);
	if (r != 0)
		return r;
	uint64_t timeout_ms = c->cfg->bash_timeout_ms
				  ? c->cfg->bash_timeout_ms
				  : TOOLS_DEFAULT_BASH_TIMEOUT_MS;
	if (has_timeout)
		timeout_ms = timeout_s * 1000;
	if (timeout_ms > TOOLS_MAX_BASH_TIMEOUT_MS)
		timeout_ms = TOOLS_MAX_BASH_TIMEOUT_MS;
	char *argv[] = {(char *)"sh", (char *)"-c",    (char *)bash_wrapper,
			(char *)"sh", (char *)command, NULL};
	struct tools_exec_result res = {0};
	r = tools_exec_run(c, argv, NULL, 0, timeout_ms, TOOLS_CAPTURE_MAX,
			   &res);
	if (r < 0)
		return r;
	c->res->status = res.status;
	struct tbuf b = {0};
	add_output(&b, &res, timeout_ms, c->max_output);
	tools_exec_result_clear(&res);
	return tools_reply(c, &b);
}

/* ---- run_verify ---------------------------------------------------------- */

#define VERIFY_TIMEOUT_MS (30ull * 60 * 1000)

int tools_run_verify(struct tools_ctx *c, const json_t *args)
{
	(void)args;
	const struct tools_config *cfg = c->cfg;
	struct tbuf b = {0};
	if (cfg->n_verify == 0) {
		c->res->verify_passed = false;
		tbuf_puts(&b, "This project has no verify commands: nothing "
			      "was run. Check your work with bash instead.\n");
		return tools_reply(c, &b);
	}
	/* the output budget is shared by the commands */
	size_t per = c->max_output / cfg->n_verify;
	if (per < 1024)
		per = 1024;
	size_t failed = 0;
	int first_failure = 0;
	struct tbuf body = {0};
	for (size_t i = 0; i < cfg->n_verify; i++) {
		char *const *cmd = cfg->verify_argv[i];
		size_t n = 0;
		while (cmd[n])
			n++;
		if (n == 0)
			continue;
		/* "$@" 2>&1: the argv as given, its streams merged */
		_cleanup_free_ char **argv = wr_calloc(n + 5, sizeof(char *));
		if (!argv) {
			tbuf_free(&body);
			return wr_error_set(c->err, ENOMEM, "run_verify");
		}
		argv[0] = (char *)"sh";
		argv[1] = (char *)"-c";
		argv[2] = (char *)"exec \"$@\" 2>&1";
		argv[3] = (char *)"sh";
		memcpy(argv + 4, cmd, n * sizeof(char *));
		struct tools_exec_result res = {0};
		int r = tools_exec_run(c, argv, NULL, 0, VERIFY_TIMEOUT_MS,
				       TOOLS_CAPTURE_MAX, &res);
		if (r < 0) {
			tbuf_free(&body);
			return r;
		}
		if (res.status != 0 && failed++ == 0)
			first_failure = res.status;
		tbuf_puts(&body, "\n$");
		for (size_t k = 0; k < n; k++)
			tbuf_printf(&body, " %s", cmd[k]);
		tbuf_printf(&body, "   [%s]\n",
			    res.status == 0 ? "passed" : "FAILED");
		add_output(&body, &res, VERIFY_TIMEOUT_MS, per);
		tools_exec_result_clear(&res);
	}
	c->res->verify_passed = failed == 0;
	c->res->status = first_failure;
	if (failed)
		tbuf_printf(&b,
			    "Verification FAILED: %zu of %zu command%s "
			    "failed.\n",
			    failed, cfg->n_verify,
			    cfg->n_verify == 1 ? "" : "s");
	else
		tbuf_printf(&b, "Verification passed: %zu command%s.\n",
			    cfg->n_verify, cfg->n_verify == 1 ? "" : "s");
	if (body.failed)
		b.failed = true;
	else
		tbuf_add(&b, body.s, body.len);
	tbuf_free(&body);
	return tools_reply(c, &b);
}

/* ---- screenshot ---------------------------------------------------------- */

#define SHOT_TIMEOUT_MS (60ull * 1000)
#define SHOT_MAX (32u << 20)
#define SHOT_NAME_MAX 64

/* $1: the URL. Writes the PNG to stdout; Chromium's chatter goes to a log
 * shown on failure. /usr/bin/chromium is Debian's wrapper, which reads
 * /etc/chromium.d (absent in a sandbox): the binary behind it first.
 * HOME may be unset in a sandbox; the profile is per call (two calls at
 * once must not share its lock) and removed after. */
static const char shot_script[] =
    "b=\n"
    "for c in /usr/lib/chromium/chromium chromium chromium-browser "
    "google-chrome-stable google-chrome headless_shell; do\n"
    "  if command -v \"$c\" >/dev/null 2>&1; then b=$c; break; fi\n"
    "done\n"
    "if [ -z \"$b\" ]; then echo 'no Chromium in the sandbox' >&2; "
    "exit 98; fi\n"
    "d=$(mktemp -d /tmp/warren-shot.XXXXXX) || exit 1\n"
    "HOME=/tmp \"$b\" --headless --no-sandbox --disable-gpu --no-first-run "
    "--disable-dev-shm-usage --hide-scrollbars --user-data-dir=\"$d/profile\" "
    "--screenshot=\"$d/shot.png\" --window-size=1280,800 \"$1\" "
    ">\"$d/log\" 2>&1\n"
    "s=$?\n"
    "if [ -s \"$d/shot.png\" ]; then cat \"$d/shot.png\"; s=0; "
    "else grep -v -e dbus -e Fontconfig \"$d/log\" | tail -c 1500 >&2; "
    "[ $s = 0 ] && s=1; fi\n"
    "rm -rf \"$d\"\n"
    "exit $s\n";

static bool is_png(const char *data, size_t len)
{
	return len >= 24 && !memcmp(data, "\x89PNG\r\n\x1a\n", 8);
}

static unsigned be32(const char *p)
{
	const unsigned char *u = (const unsigned char *)p;
	return (unsigned)u[0] << 24 | (unsigned)u[1] << 16 |
	       (unsigned)u[2] << 8 | u[3];
}

/* The URL Chromium gets: as given with a scheme; a path (relative to the
 * workspace) becomes file://; host:port becomes http://. NULL: refused. */
static char *shot_url(const char *url)
{
	if (strstr(url, "://"))
		return wr_strdup(url);
	if (!strncmp(url, "localhost", 9) || !strncmp(url, "127.0.0.1", 9) ||
	    !strncmp(url, "[::1]", 5))
		return wr_asprintf("http://%s", url);
	if (url[0] == '/')
		return wr_asprintf("file://%s", url);
	return wr_asprintf("file://" TOOLS_WORKSPACE "/%s",
			   !strncmp(url, "./", 2) ? url + 2 : url);
}

/* Creates artifact_dir/NAME.png (NAME-2.png, ... if taken) and writes
 * data. Returns 0 and the path, or -errno. */
static int write_artifact(const char *dir, const char *name, const char *data,
			  size_t len, char **path_out)
{
	int r = wr_mkdir_p(dir, 0755);
	if (r < 0)
		return r;
	for (unsigned i = 1; i < 1000; i++) {
		_cleanup_free_ char *path =
		    i == 1 ? wr_asprintf("%s/%s.png", dir, name)
			   : wr_asprintf("%s/%s-%u.png", dir, name, i);
		if (!path)
			return -ENOMEM;
		_cleanup_close_ int fd =
		    open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0 && errno == EEXIST)
			continue;
		if (fd < 0)
			return -errno;
		for (size_t off = 0; off < len;) {
			ssize_t w = write(fd, data + off, len - off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0) {
				r = -errno;
				unlink(path);
				return r;
			}
			off += (size_t)w;
		}
		if (close(TAKE_FD(fd)) < 0) {
			r = -errno;
			unlink(path);
			return r;
		}
		*path_out = TAKE_PTR(path);
		return 0;
	}
	return -EEXIST;
}

int tools_screenshot(struct tools_ctx *c, const json_t *args)
{
	const char *url, *name;
	size_t ulen, nlen;
	int r = tools_arg_string(c, args, "url", true, &url, &ulen);
	if (r == 0)
		r = tools_arg_string(c, args, "name", false, &name, &nlen);
	if (r != 0)
		return r;
	if (ulen == 0 || strlen(url) != ulen || strpbrk(url, "\n\r"))
		return tools_bad(c, "\"url\" must be a URL or a path on one "
				    "line");
	char base[SHOT_NAME_MAX + 1] = "screenshot";
	if (name && nlen) {
		size_t k = nlen;
		if (k > 4 && !strcasecmp(name + k - 4, ".png"))
			k -= 4;
		bool ok = k > 0 && k <= SHOT_NAME_MAX && name[0] != '.' &&
			  strlen(name) == nlen;
		for (size_t i = 0; ok && i < k; i++)
			ok = strchr("abcdefghijklmnopqrstuvwxyz"
				    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
				    name[i]) != NULL;
		if (!ok)
			return tools_bad(c,
					 "\"name\" may hold only letters, "
					 "digits, '.', '_' and '-' (at most "
					 "%d, not starting with '.')",
					 SHOT_NAME_MAX);
		memcpy(base, name, k);
		base[k] = '\0';
	}
	if (!c->cfg->artifact_dir)
		return tools_bad(c, "screenshots are not available in this "
				    "session (no artifact directory)");
	_cleanup_free_ char *full = shot_url(url);
	if (!full)
		return wr_error_set(c->err, ENOMEM, "screenshot");
	char *argv[] = {(char *)"sh", (char *)"-c", (char *)shot_script,
			(char *)"sh", full,	    NULL};
	struct tools_exec_result res = {0};
	r = tools_exec_run(c, argv, NULL, 0, SHOT_TIMEOUT_MS, SHOT_MAX, &res);
	if (r < 0)
		return r;
	c->res->status = res.status;
	struct tbuf b = {0};
	if (res.status != 0 || !is_png(res.out, res.out_len) || res.truncated) {
		if (res.status == 98)
			r = tools_bad(c, "no Chromium is installed in the "
					 "sandbox: screenshots are not "
					 "available");
		else if (res.status == 124)
			r = tools_bad(c,
				      "Chromium timed out after %llu s on %s",
				      SHOT_TIMEOUT_MS / 1000, full);
		else if (res.truncated)
			r = tools_bad(c, "the screenshot is larger than %u MiB",
				      SHOT_MAX >> 20);
		else {
			tbuf_add_cut(&b, res.err, res.err_len, 1500);
			r = tools_bad(
			    c, "Chromium failed on %s (status %d)%s%s", full,
			    res.status, b.len ? ":\n" : "", b.s ? b.s : "");
			tbuf_free(&b);
		}
		tools_exec_result_clear(&res);
		return r;
	}
	char *path = NULL;
	r = write_artifact(c->cfg->artifact_dir, base, res.out, res.out_len,
			   &path);
	if (r < 0) {
		tools_exec_result_clear(&res);
		return wr_error_set(c->err, -r,
				    "screenshot: write artifact in %s",
				    c->cfg->artifact_dir);
	}
	const char *file = strrchr(path, '/') + 1;
	tbuf_printf(&b,
		    "Screenshot of %s saved as the artifact %s (%ux%u PNG, "
		    "%zu bytes).\n",
		    full, file, be32(res.out + 16), be32(res.out + 20),
		    res.out_len);
	tools_exec_result_clear(&res);
	c->res->artifact = path;
	return tools_reply(c, &b);
}

/* ---- finish -------------------------------------------------------------- */

int tools_finish(struct tools_ctx *c, const json_t *args)
{
	const char *summary;
	size_t len;
	int r = tools_arg_string(c, args, "summary", true, &summary, &len);
	if (r != 0)
		return r;
	if (len == 0 || !summary[0])
		return tools_bad(c, "\"summary\" is empty: say in a few lines "
				    "what you changed and why");
	char *s = wr_strndup(summary, len);
	if (!s)
		return wr_error_set(c->err, ENOMEM, "finish");
	struct tbuf b = {0};
	tbuf_puts(&b, "Finished. The summary was recorded.\n");
	r = tools_reply(c, &b);
	if (r < 0) {
		free(s);
		return r;
	}
	free(c->res->summary);
	c->res->summary = s;
	c->res->finished = true;
	return 0;
}
