/* tools_fs.c - the file tools: read_file, write_file, edit_file,
 * list_files (see tools.h).
 *
 * Everything happens inside the sandbox through the exec path: the server
 * never touches the sandbox's files. Writes go through one small sh script
 * that resolves the target there (realpath -m: symlinks and ".." of the
 * existing part), refuses anything that is not /workspace or under it, and
 * only then creates the parents and writes what comes on stdin (contents
 * never travel in argv: size limits, and /proc/PID/cmdline shows them to
 * every process in the sandbox). Writing the resolved path, not the given
 * one, leaves no symlink for a second lookup to follow; a process inside
 * the sandbox racing to swap a directory for a symlink in between can only
 * redirect the write to where it could write itself. */
#include "agent/tools_internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* $1: "read" or "write", $2: the path, $3: (read) how many bytes at most.
 * Exit 99: outside the workspace (the resolved path on stderr). write
 * prints the resolved path once the content is written. */
static const char confine_script[] =
    "p=$2\n"
    "case $p in /*) ;; *) p=" TOOLS_WORKSPACE "/$p ;; esac\n"
    "r=$(realpath -m -- \"$p\") || exit 1\n"
    "case $r in\n" TOOLS_WORKSPACE "|" TOOLS_WORKSPACE "/*) ;;\n"
    "*) printf '%s\\n' \"$r\" >&2; exit 99 ;;\n"
    "esac\n"
    "if [ \"$1\" = read ]; then exec head -c \"$3\" -- \"$r\"; fi\n"
    "mkdir -p -- \"${r%/*}\" && cat >\"$r\" && printf '%s' \"$r\"\n";

#define CONFINE_REFUSED 99

/* A path the model may use: not empty, no NUL (it would cut the path
 * short in argv), no newline (the script's $(...) would eat a trailing
 * one). 0, or 1 with the content set. */
static int check_path(struct tools_ctx *c, const char *path, size_t len)
{
	if (len == 0)
		return tools_bad(c, "\"path\" is empty");
	if (strlen(path) != len)
		return tools_bad(c, "the path contains a NUL character");
	if (strchr(path, '\n'))
		return tools_bad(c, "the path contains a newline");
	if (len > 4000)
		return tools_bad(c, "the path is too long (%zu bytes)", len);
	return 0;
}

/* Runs the confinement script. *res holds the result when 0 is
 * returned; 1: refused or failed (content set); -errno. */
static int confined(struct tools_ctx *c, const char *mode, const char *path,
		    const void *in, size_t in_len,
		    struct tools_exec_result *res)
{
	char limit[32];
	snprintf(limit, sizeof(limit), "%u", TOOLS_FILE_MAX + 1);
	char *argv[] = {(char *)"sh",  (char *)"-c", (char *)confine_script,
			(char *)"sh",  (char *)mode, (char *)path,
			(char *)limit, NULL};
	int r = tools_exec_run(c, argv, in, in_len, TOOLS_FS_TIMEOUT_MS,
			       TOOLS_FILE_MAX + 64, res);
	if (r < 0)
		return r;
	c->res->status = res->status;
	if (res->status == 0)
		return 0;
	size_t len;
	const char *line = tools_first_line(res, &len);
	if (res->status == CONFINE_REFUSED)
		r = tools_bad(c,
			      "refused: \"%s\" is outside %s (it resolves to "
			      "%.*s). Only files under %s can be written; "
			      "relative paths are relative to %s. Nothing was "
			      "written.",
			      path, TOOLS_WORKSPACE, (int)len, line,
			      TOOLS_WORKSPACE, TOOLS_WORKSPACE);
	else if (res->status == 124)
		r = tools_bad(c, "timed out on \"%s\"", path);
	else
		r = tools_bad(c, "%.*s%s", (int)len, line, len ? "" : "failed");
	tools_exec_result_clear(res);
	return r;
}

static size_t count_lines(const char *s, size_t len)
{
	size_t n = 0;
	for (const char *p = s; (p = memchr(p, '\n', len - (size_t)(p - s)));
	     p++)
		n++;
	return n + (len && s[len - 1] != '\n');
}

/* Appends the lines of data, numbered from first_no, while b stays within
 * budget bytes. Returns the number of the first line not shown, 0 when
 * all were; *last: the last line shown (first_no - 1 if none). */
static size_t add_numbered(struct tbuf *b, const char *data, size_t len,
			   size_t first_no, size_t budget, size_t *last)
{
	const char *p = data, *end = data + len;
	size_t no = first_no;
	*last = first_no - 1;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t ll = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
		char prefix[32];
		size_t pl =
		    (size_t)snprintf(prefix, sizeof(prefix), "%6zu\t", no);
		if (b->len + pl + ll + 1 > budget) {
			if (no != first_no)
				return no;
			/* one line longer than the budget: its start */
			size_t room = budget > b->len + pl + 80
					  ? budget - b->len - pl - 80
					  : 0;
			while (room > 0 &&
			       ((unsigned char)p[room] & 0xC0) == 0x80)
				room--;
			tbuf_add(b, prefix, pl);
			tbuf_add(b, p, room);
			tbuf_printf(
			    b, "\n[... line %zu cut: %zu more bytes ...]\n", no,
			    ll - room);
			*last = no;
			return p + ll < end ? no + 1 : 0;
		}
		tbuf_add(b, prefix, pl);
		tbuf_add(b, p, ll);
		if (!nl)
			tbuf_puts(b, "\n");
		*last = no++;
		p += ll;
	}
	return 0;
}

/* ---- read_file ----------------------------------------------------------- */

int tools_read_file(struct tools_ctx *c, const json_t *args)
{
	const char *path;
	size_t plen;
	uint64_t start = 1, end = 0;
	bool has_start, has_end;
	int r = tools_arg_string(c, args, "path", true, &path, &plen);
	if (r == 0)
		r = check_path(c, path, plen);
	if (r == 0)
		r = tools_arg_uint(c, args, "start_line", 1, UINT32_MAX,
				   &has_start, &start);
	if (r == 0)
		r = tools_arg_uint(c, args, "end_line", 1, UINT32_MAX, &has_end,
				   &end);
	if (r != 0)
		return r;
	if (!has_start)
		start = 1;
	if (has_end && end < start)
		return tools_bad(
		    c, "end_line (%llu) is before start_line (%llu)",
		    (unsigned long long)end, (unsigned long long)start);
	bool ranged = has_start || has_end;

	/* The whole file: head -c, so that /dev/zero or a huge log stops at
	 * the cap. A range: sed prints it, then the line count ($=). */
	char limit[32], range[64];
	snprintf(limit, sizeof(limit), "%u", TOOLS_FILE_MAX + 1);
	if (has_end)
		snprintf(range, sizeof(range), "%llu,%llup",
			 (unsigned long long)start, (unsigned long long)end);
	else
		snprintf(range, sizeof(range), "%llu,$p",
			 (unsigned long long)start);
	char *whole_argv[] = {(char *)"head", (char *)"-c", limit,
			      (char *)"--",   (char *)path, NULL};
	char *range_argv[] = {
	    (char *)"sed", (char *)"-n", (char *)"-e", range, (char *)"-e",
	    (char *)"$=",  (char *)"--", (char *)path, NULL};
	struct tools_exec_result res = {0};
	r = tools_exec_run(c, ranged ? range_argv : whole_argv, NULL, 0,
			   TOOLS_FS_TIMEOUT_MS, TOOLS_FILE_MAX + 64, &res);
	if (r < 0)
		return r;
	c->res->status = res.status;
	if (res.status != 0) {
		size_t len;
		const char *line = tools_first_line(&res, &len);
		r = res.status == 124
			? tools_bad(c, "timed out reading \"%s\"", path)
			: tools_bad(c, "%.*s%s", (int)len, line,
				    len ? "" : "cannot read the file");
		goto out;
	}
	const char *data = res.out;
	size_t len = res.out_len, total;
	bool partial = false;
	if (!ranged) {
		if (len > TOOLS_FILE_MAX) {
			partial = true;
			len = TOOLS_FILE_MAX;
			while (len > 0 && data[len - 1] != '\n')
				len--;
		}
		total = count_lines(data, len);
	} else if (!res.truncated && len > 0) {
		/* the last line is the count */
		size_t e = len - 1, s = e;
		while (s > 0 && data[s - 1] != '\n')
			s--;
		total = strtoull(data + s, NULL, 10);
		len = s;
	} else if (len == 0) {
		total = 0;
	} else {
		partial = true;
		total = 0;
	}
	if (memchr(data, '\0', len)) {
		r = tools_bad(c,
			      "\"%s\" is a binary file (it holds NUL bytes): "
			      "not shown. Use bash (od -c, xxd) to inspect it.",
			      path);
		goto out;
	}
	if (ranged && !partial && start > total && total > 0) {
		r = tools_bad(c,
			      "start_line %llu is past the end of \"%s\" (%zu "
			      "lines)",
			      (unsigned long long)start, path, total);
		goto out;
	}
	struct tbuf b = {0};
	if (total == 0 && !partial) {
		tbuf_puts(&b, "(empty file)\n");
		r = tools_reply(c, &b);
		goto out;
	}
	size_t last;
	size_t next = add_numbered(&b, data, len, start, c->max_output, &last);
	size_t to = ranged && has_end && end < total ? end : total;
	if (next && !partial)
		tbuf_printf(&b,
			    "[... output limit reached: lines %zu-%zu not "
			    "shown; continue with start_line=%zu ...]\n",
			    next, to, next);
	else if (next)
		tbuf_printf(&b,
			    "[... output limit reached: continue with "
			    "start_line=%zu ...]\n",
			    next);
	else if (partial)
		tbuf_printf(&b,
			    "[... the file is larger than %u MiB: continue "
			    "with start_line=%zu ...]\n",
			    TOOLS_FILE_MAX >> 20, last + 1);
	if (ranged && !partial)
		tbuf_printf(&b, "[lines %llu-%zu of %zu]\n",
			    (unsigned long long)start, last, total);
	r = tools_reply(c, &b);
out:
	tools_exec_result_clear(&res);
	return r;
}

/* ---- write_file ---------------------------------------------------------- */

int tools_write_file(struct tools_ctx *c, const json_t *args)
{
	const char *path, *content;
	size_t plen, clen;
	int r = tools_arg_string(c, args, "path", true, &path, &plen);
	if (r == 0)
		r = check_path(c, path, plen);
	if (r == 0)
		r = tools_arg_string(c, args, "content", true, &content, &clen);
	if (r != 0)
		return r;
	struct tools_exec_result res = {0};
	r = confined(c, "write", path, content, clen, &res);
	if (r != 0)
		return r;
	struct tbuf b = {0};
	size_t lines = count_lines(content, clen);
	tbuf_printf(&b, "Wrote %zu bytes (%zu line%s) to %.*s.\n", clen, lines,
		    lines == 1 ? "" : "s", (int)res.out_len, res.out);
	tools_exec_result_clear(&res);
	return tools_reply(c, &b);
}

/* ---- edit_file ----------------------------------------------------------- */

/* Where needle occurs in hay (non-overlapping); the first few positions in
 * at[]. */
static size_t occurrences(const char *hay, size_t hlen, const char *needle,
			  size_t nlen, size_t *at, size_t n_at)
{
	size_t n = 0;
	const char *p = hay, *end = hay + hlen;
	while ((size_t)(end - p) >= nlen &&
	       (p = memmem(p, (size_t)(end - p), needle, nlen))) {
		if (n < n_at)
			at[n] = (size_t)(p - hay);
		n++;
		p += nlen;
	}
	return n;
}

static size_t line_of(const char *s, size_t off)
{
	return count_lines(s, off) + (off == 0 || s[off - 1] == '\n');
}

int tools_edit_file(struct tools_ctx *c, const json_t *args)
{
	const char *path, *old_text, *new_text;
	size_t plen, olen, nlen;
	int r = tools_arg_string(c, args, "path", true, &path, &plen);
	if (r == 0)
		r = check_path(c, path, plen);
	if (r == 0)
		r = tools_arg_string(c, args, "old_text", true, &old_text,
				     &olen);
	if (r == 0)
		r = tools_arg_string(c, args, "new_text", true, &new_text,
				     &nlen);
	if (r != 0)
		return r;
	if (olen == 0)
		return tools_bad(c, "old_text is empty; to create a file or "
				    "replace all of it, use write_file");
	struct tools_exec_result res = {0};
	r = confined(c, "read", path, NULL, 0, &res);
	if (r != 0)
		return r;
	_cleanup_free_ char *edited = NULL;
	struct tbuf b = {0};
	if (res.out_len > TOOLS_FILE_MAX) {
		r = tools_bad(c,
			      "\"%s\" is larger than %u MiB: edit it with bash "
			      "(sed, patch) instead. Nothing was changed.",
			      path, TOOLS_FILE_MAX >> 20);
		goto out;
	}
	size_t at[8];
	size_t n = occurrences(res.out, res.out_len, old_text, olen, at,
			       ARRAY_SIZE(at));
	if (n == 0) {
		bool crlf = memmem(res.out, res.out_len, "\r\n", 2) &&
			    !memchr(old_text, '\r', olen) &&
			    memchr(old_text, '\n', olen);
		r = tools_bad(c,
			      "old_text was not found in \"%s\"; nothing was "
			      "changed. It must match the file exactly, "
			      "whitespace and indentation included, without "
			      "the line-number prefixes read_file shows: read "
			      "the file again and copy the text.%s",
			      path,
			      crlf ? " (The file has CRLF line ends: old_text "
				     "needs \\r\\n too.)"
				   : "");
		goto out;
	}
	if (n > 1) {
		tbuf_printf(&b, "at lines");
		for (size_t i = 0; i < n && i < ARRAY_SIZE(at); i++)
			tbuf_printf(&b, "%s %zu", i ? "," : "",
				    line_of(res.out, at[i]));
		if (n > ARRAY_SIZE(at))
			tbuf_puts(&b, ", ...");
		r = tools_bad(
		    c,
		    "old_text occurs %zu times in \"%s\" (%s); "
		    "nothing was changed. Include more of the "
		    "surrounding lines in old_text so that it matches "
		    "exactly one place.",
		    n, path, b.s ? b.s : "");
		tbuf_free(&b);
		goto out;
	}
	size_t elen = res.out_len - olen + nlen;
	edited = wr_malloc(elen + 1);
	if (!edited) {
		r = wr_error_set(c->err, ENOMEM, "edit %s", path);
		goto out;
	}
	memcpy(edited, res.out, at[0]);
	memcpy(edited + at[0], new_text, nlen);
	memcpy(edited + at[0] + nlen, res.out + at[0] + olen,
	       res.out_len - at[0] - olen);
	edited[elen] = '\0';
	size_t first = line_of(res.out, at[0]);
	size_t old_lines = count_lines(old_text, olen);
	size_t new_lines = count_lines(new_text, nlen);
	tools_exec_result_clear(&res);

	r = confined(c, "write", path, edited, elen, &res);
	if (r != 0)
		goto out;
	tbuf_printf(&b,
		    "Edited %.*s: replaced %zu line%s at line %zu with %zu "
		    "line%s. Now:\n",
		    (int)res.out_len, res.out, old_lines,
		    old_lines == 1 ? "" : "s", first, new_lines,
		    new_lines == 1 ? "" : "s");
	/* the edited region with a little context, to check at a glance */
	size_t from = first > 3 ? first - 3 : 1;
	size_t to = first + (new_lines ? new_lines - 1 : 0) + 3;
	const char *p = edited, *e = edited + elen;
	for (size_t no = 1; no < from && p < e; no++) {
		const char *nl = memchr(p, '\n', (size_t)(e - p));
		p = nl ? nl + 1 : e;
	}
	const char *q = p;
	for (size_t no = from; no <= to && q < e; no++) {
		const char *nl = memchr(q, '\n', (size_t)(e - q));
		q = nl ? nl + 1 : e;
	}
	size_t last;
	add_numbered(&b, p, (size_t)(q - p), from, b.len + c->max_output / 2,
		     &last);
	r = tools_reply(c, &b);
out:
	tbuf_free(&b);
	tools_exec_result_clear(&res);
	return r;
}

/* ---- list_files ---------------------------------------------------------- */

/* Steps one match may take: patterns with many '**' backtrack, and a
 * pattern comes from the model. */
#define GLOB_BUDGET 100000

static bool glob_at(const char *p, const char *s, long *budget)
{
	for (;;) {
		if (--*budget < 0)
			return false;
		switch (*p) {
		case '\0': return *s == '\0';
		case '*':
			if (p[1] == '*') {
				const char *rest = p + 2;
				while (*rest == '*')
					rest++;
				/* '**' then '/': also no directory at all */
				if (*rest == '/' &&
				    glob_at(rest + 1, s, budget))
					return true;
				for (const char *t = s;; t++) {
					if (glob_at(rest, t, budget))
						return true;
					if (!*t || *budget < 0)
						return false;
				}
			}
			for (const char *t = s;; t++) {
				if (glob_at(p + 1, t, budget))
					return true;
				if (!*t || *t == '/' || *budget < 0)
					return false;
			}
		case '?':
			if (!*s || *s == '/')
				return false;
			p++;
			s++;
			break;
		case '[': {
			const char *q = p + 1;
			bool neg = *q == '!' || *q == '^';
			if (neg)
				q++;
			const char *first = q;
			bool hit = false;
			unsigned char ch = (unsigned char)*s;
			while (*q && (*q != ']' || q == first)) {
				unsigned char lo = (unsigned char)*q, hi = lo;
				if (q[1] == '-' && q[2] && q[2] != ']') {
					hi = (unsigned char)q[2];
					q += 3;
				} else {
					q++;
				}
				if (ch >= lo && ch <= hi)
					hit = true;
			}
			if (*q != ']') { /* no closing bracket: a plain '[' */
				if (*s != '[')
					return false;
				p++;
				s++;
				break;
			}
			if (!*s || *s == '/' || hit == neg)
				return false;
			p = q + 1;
			s++;
			break;
		}
		case '\\':
			if (p[1])
				p++;
			/* fall through */
		default:
			if (*p != *s)
				return false;
			p++;
			s++;
		}
	}
}

bool tools_glob_match(const char *pattern, const char *path)
{
	long budget = GLOB_BUDGET;
	return glob_at(pattern, path, &budget);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int tools_list_files(struct tools_ctx *c, const json_t *args)
{
	const char *pattern;
	size_t pat_len;
	int r = tools_arg_string(c, args, "pattern", false, &pattern, &pat_len);
	if (r != 0)
		return r;
	if (pattern && strlen(pattern) != pat_len)
		return tools_bad(c, "the pattern contains a NUL character");
	if (pat_len > 512)
		return tools_bad(c, "the pattern is too long (%zu bytes)",
				 pat_len);
	/* paths are relative to the workspace: so is the pattern */
	if (pattern &&
	    !strncmp(pattern, TOOLS_WORKSPACE "/", strlen(TOOLS_WORKSPACE "/")))
		pattern += strlen(TOOLS_WORKSPACE "/");
	while (pattern && !strncmp(pattern, "./", 2))
		pattern += 2;
	if (pattern && (!*pattern || !strcmp(pattern, "**")))
		pattern = NULL;
	bool by_name = pattern && !strchr(pattern, '/');
	size_t list_max =
	    c->cfg->list_max ? c->cfg->list_max : TOOLS_DEFAULT_LIST_MAX;

	char *argv[] = {(char *)"find",
			(char *)".",
			(char *)"-name",
			(char *)".git",
			(char *)"-prune",
			(char *)"-o",
			(char *)"!",
			(char *)"-type",
			(char *)"d",
			(char *)"-print0",
			NULL};
	struct tools_exec_result res = {0};
	r = tools_exec_run(c, argv, NULL, 0, TOOLS_FS_TIMEOUT_MS,
			   TOOLS_CAPTURE_MAX * 4, &res);
	if (r < 0)
		return r;
	c->res->status = res.status;
	_cleanup_free_ char **paths = NULL;
	struct tbuf b = {0};
	if (res.status != 0 && res.out_len == 0) {
		size_t len;
		const char *line = tools_first_line(&res, &len);
		r = tools_bad(c, "find failed (status %d): %.*s", res.status,
			      (int)len, line);
		goto out;
	}
	/* NUL-separated "./a/b" records; a cut last record is dropped */
	size_t n = 0, cap = 0;
	const char *p = res.out, *end = res.out + res.out_len;
	while (p < end) {
		const char *z = memchr(p, '\0', (size_t)(end - p));
		if (!z)
			break;
		const char *rel = !strncmp(p, "./", 2) ? p + 2 : p;
		const char *base = strrchr(rel, '/');
		base = base ? base + 1 : rel;
		if (*rel && (!pattern ||
			     tools_glob_match(pattern, by_name ? base : rel))) {
			if (n == cap) {
				cap = cap ? cap * 2 : 256;
				char **np =
				    wr_realloc(paths, cap * sizeof(*paths));
				if (!np) {
					r = wr_error_set(c->err, ENOMEM,
							 "list_files");
					goto out;
				}
				paths = np;
			}
			paths[n++] = (char *)rel;
		}
		p = z + 1;
	}
	if (n == 0) {
		if (pattern)
			tbuf_printf(&b, "No files match \"%s\".\n", pattern);
		else
			tbuf_puts(&b, "The workspace has no files.\n");
	} else {
		qsort(paths, n, sizeof(*paths), cmp_str);
	}
	size_t shown = 0;
	for (; shown < n && shown < list_max; shown++) {
		size_t len = strlen(paths[shown]);
		if (b.len + len + 100 > c->max_output)
			break;
		tbuf_add(&b, paths[shown], len);
		tbuf_puts(&b, "\n");
	}
	if (shown < n)
		tbuf_printf(&b,
			    "[... %zu more not shown (%zu files match): "
			    "narrow the pattern ...]\n",
			    n - shown, n);
	else if (n)
		tbuf_printf(&b, "[%zu file%s]\n", n, n == 1 ? "" : "s");
	if (res.truncated)
		tbuf_puts(&b, "[the listing is incomplete: the workspace "
			      "holds too many files; use a more specific "
			      "pattern, or bash with find]\n");
	r = tools_reply(c, &b);
out:
	tbuf_free(&b);
	tools_exec_result_clear(&res);
	return r;
}
