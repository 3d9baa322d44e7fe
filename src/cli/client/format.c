/* format.c - how the client prints: JSON, tables, ages and times, events.
 *
 * Text from the server is other people's text (an agent's output, diff,
 * file names; a prompt, a reason): it must not drive the reviewer's
 * terminal. client_visible() is the one sanitizer: control characters,
 * C1 controls and bidi overrides are shown as visible text. Tables and
 * "key: value" lines always go through it (client_clean); agent output
 * lines and diffs do when they go to a terminal, unless --raw. JSON is
 * printed with those characters as \u escapes (the same JSON). */
#include "cli/client/client.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *client_json_str(const json_t *obj, const char *key)
{
	return json_string_value(json_object_get(obj, key));
}

int64_t client_json_int(const json_t *obj, const char *key, int64_t dflt)
{
	json_t *v = json_object_get(obj, key);
	if (json_is_integer(v))
		return (int64_t)json_integer_value(v);
	if (json_is_real(v))
		return (int64_t)json_real_value(v);
	return dflt;
}

static int stdout_status(void)
{
	if (fflush(stdout) != 0 || ferror(stdout))
		return errno ? -errno : -EIO;
	return 0;
}

/* Writes JSON text with DEL, C1 controls and bidi overrides as \u
 * escapes: the same JSON, nothing a terminal acts on. jansson already
 * escapes C0 controls, and its output is valid UTF-8, so these sequences
 * can only be whole characters inside strings. */
static int print_json_text(const char *text)
{
	const unsigned char *s = (const unsigned char *)text, *from = s;
	for (; *s; s++) {
		unsigned cp = 0;
		size_t n = 0;
		if (s[0] == 0x7f) {
			cp = 0x7f, n = 1;
		} else if (s[0] == 0xc2 && s[1] >= 0x80 && s[1] <= 0x9f) {
			cp = s[1], n = 2;
		} else if (s[0] == 0xe2 && s[1] && s[2]) {
			unsigned c =
			    0x2000 | (s[1] & 0x3f) << 6 | (s[2] & 0x3f);
			if ((s[1] == 0x80 || s[1] == 0x81) &&
			    client_bidi_control(c))
				cp = c, n = 3;
		}
		if (!n)
			continue;
		fwrite(from, 1, (size_t)(s - from), stdout);
		printf("\\u%04x", cp);
		s += n - 1;
		from = s + 1;
	}
	fputs((const char *)from, stdout);
	return 0;
}

static int print_json(const json_t *j, size_t flags)
{
	char *text = json_dumps(j, flags | JSON_REAL_PRECISION(10));
	if (!text)
		return -ENOMEM;
	print_json_text(text);
	free(text);
	putchar('\n');
	return stdout_status();
}

int client_print_json(const json_t *j)
{
	return print_json(j, JSON_INDENT(2));
}

int client_print_json_line(const json_t *j)
{
	return print_json(j, JSON_COMPACT);
}

int64_t client_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void client_format_age(int64_t ms, char *buf, size_t size)
{
	int64_t s = ms < 0 ? 0 : ms / 1000;
	if (s < 120)
		snprintf(buf, size, "%llds", (long long)s);
	else if (s < 120 * 60)
		snprintf(buf, size, "%lldm", (long long)(s / 60));
	else if (s < 48 * 3600)
		snprintf(buf, size, "%lldh", (long long)(s / 3600));
	else
		snprintf(buf, size, "%lldd", (long long)(s / 86400));
}

void client_format_duration(int64_t ms, char *buf, size_t size)
{
	static const struct {
		const char *unit;
		int64_t ms;
	} units[] = {{"d", 86400000},
		     {"h", 3600000},
		     {"m", 60000},
		     {"s", 1000},
		     {"ms", 1}};
	size_t used = 0;
	buf[0] = '\0';
	if (ms <= 0) {
		snprintf(buf, size, "0s");
		return;
	}
	for (size_t i = 0; i < ARRAY_SIZE(units) && used < size; i++) {
		int64_t n = ms / units[i].ms;
		if (!n)
			continue;
		ms -= n * units[i].ms;
		int w = snprintf(buf + used, size - used, "%lld%s",
				 (long long)n, units[i].unit);
		if (w < 0)
			return;
		used += (size_t)w;
	}
}

void client_format_time(int64_t epoch_ms, char *buf, size_t size)
{
	if (epoch_ms <= 0) {
		snprintf(buf, size, "-");
		return;
	}
	time_t t = (time_t)(epoch_ms / 1000);
	struct tm tm;
	if (!localtime_r(&t, &tm) ||
	    !strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm))
		snprintf(buf, size, "%lld", (long long)epoch_ms);
}

bool client_bidi_control(unsigned cp)
{
	/* LRE RLE PDF LRO RLO, LRI RLI FSI PDI: they reorder what follows
	 * ("Trojan Source", CVE-2021-42574) */
	return (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

/* The length of the UTF-8 character at s[0..len) (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF) with its code point in
 * *cp, or 0 if the bytes there are not one. */
static size_t utf8_char(const unsigned char *s, size_t len, unsigned *cp)
{
	unsigned c = s[0], lo = 0x80, hi = 0xbf;
	size_t n;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2, c &= 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, c &= 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, c &= 0x07;
	else
		return 0;
	if (s[0] == 0xe0)
		lo = 0xa0; /* overlong */
	else if (s[0] == 0xed)
		hi = 0x9f; /* surrogates */
	else if (s[0] == 0xf0)
		lo = 0x90; /* overlong */
	else if (s[0] == 0xf4)
		hi = 0x8f; /* above U+10FFFF */
	if (len < n || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	*cp = c;
	return n;
}

char *client_visible(const char *text, size_t len, bool one_line,
		     size_t *len_out)
{
	/* the longest form is 6 bytes ("\u009b") for 2 ("\xc2\x9b") */
	if (len > (SIZE_MAX - 1) / 4)
		return NULL;
	char *out = wr_malloc(len * 4 + 1);
	if (!out)
		return NULL;
	const unsigned char *s = (const unsigned char *)text;
	char *o = out;
	for (size_t i = 0; i < len;) {
		unsigned c = s[i], cp;
		size_t n;
		if (c == '\n' || c == '\t') {
			*o++ = one_line ? ' ' : (char)c;
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			/* caret notation, as `cat -v`: ^[ ESC, ^M CR, ^? DEL */
			*o++ = '^';
			*o++ = (char)(c ^ 0x40);
			i++;
		} else if (c < 0x80) {
			*o++ = (char)c;
			i++;
		} else if (!(n = utf8_char(s + i, len - i, &cp))) {
			/* not UTF-8: a terminal might take 0x9b as CSI */
			o += sprintf(o, "\\x%02x", c);
			i++;
		} else if ((cp >= 0x80 && cp <= 0x9f) ||
			   client_bidi_control(cp)) {
			o += sprintf(o, "\\u%04x", cp);
			i += n;
		} else {
			memcpy(o, s + i, n);
			o += n;
			i += n;
		}
	}
	*o = '\0';
	if (len_out)
		*len_out = (size_t)(o - out);
	return out;
}

char *client_clean(const char *text)
{
	text = text ? text : "";
	return client_visible(text, strlen(text), true, NULL);
}

/* Characters a shell takes literally outside quotes. */
static bool shell_plain(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV"
			    "WXYZ0123456789_-./=:,+@%",
			    *s))
			return false;
	return true;
}

char *client_argv_string(const json_t *argv)
{
	if (json_is_string(argv)) /* the API also takes a string */
		return client_clean(json_string_value(argv));
	char *out = wr_strdup("");
	size_t i;
	json_t *arg;
	json_array_foreach(argv, i, arg)
	{
		const char *s = json_string_value(arg);
		if (!out || !s)
			break;
		_cleanup_free_ char *quoted = NULL;
		if (shell_plain(s)) {
			quoted = wr_strdup(s);
		} else {
			/* 'it'\''s' */
			size_t n = 2;
			for (const char *p = s; *p; p++)
				n += *p == '\'' ? 4 : 1;
			quoted = wr_malloc(n + 1);
			if (quoted) {
				char *q = quoted;
				*q++ = '\'';
				for (const char *p = s; *p; p++) {
					if (*p == '\'') {
						memcpy(q, "'\\''", 4);
						q += 4;
					} else {
						*q++ = *p;
					}
				}
				*q++ = '\'';
				*q = '\0';
			}
		}
		char *joined =
		    quoted ? wr_asprintf("%s%s%s", out, i ? " " : "", quoted)
			   : NULL;
		free(out);
		out = joined;
	}
	if (!out)
		return NULL;
	char *clean = client_clean(out);
	free(out);
	return clean;
}

bool client_state_rests(const char *state)
{
	/* as the server decides when a stream ends: review, or a state
	 * nothing follows (approved still goes on to pushed or failed) */
	static const char *const resting[] = {
	    "review", "pushed", "rejected", "failed", "cancelled", "expired",
	};
	if (!state)
		return false;
	for (size_t i = 0; i < ARRAY_SIZE(resting); i++)
		if (!strcmp(state, resting[i]))
			return true;
	return false;
}

/* One agent output line to out: as it is with raw or when out is not a
 * terminal, else with its controls made visible. */
static int print_output_line(FILE *out, const char *line, bool raw)
{
	if (raw || !isatty(fileno(out))) {
		fprintf(out, "%s\n", line);
		return 0;
	}
	_cleanup_free_ char *shown =
	    client_visible(line, strlen(line), false, NULL);
	if (!shown)
		return -ENOMEM;
	fprintf(out, "%s\n", shown);
	return 0;
}

/* The first line of text, at most max bytes (a UTF-8 sequence may be cut:
 * client_visible shows it). */
static void first_line_into(FILE *f, const char *text, size_t max)
{
	if (!text)
		return;
	size_t n = strcspn(text, "\n");
	/* more than the line (past a trailing newline): say so */
	bool more = n > max || (text[n] && text[n + 1]);
	fprintf(f, "%.*s%s", (int)(n > max ? max : n), text, more ? " …" : "");
}

/* A tool call's arguments, short: the "command" or "path" the model gave,
 * else the JSON as it came. */
static void tool_args_into(FILE *f, const char *arguments)
{
	json_t *args = arguments ? json_loads(arguments, 0, NULL) : NULL;
	const char *keys[] = {"command", "path", "summary", NULL};
	const char *v = NULL;
	for (size_t i = 0; !v && keys[i]; i++)
		v = json_string_value(json_object_get(args, keys[i]));
	first_line_into(f, v ? v : arguments, 120);
	json_decref(args);
}

char *client_event_summary(const json_t *event)
{
	const char *kind = client_json_str(event, "kind");
	json_t *data = json_object_get(event, "data");
	if (!kind)
		return NULL;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return NULL;
	bool said = false;
	if (!strcmp(kind, "verify")) {
		json_t *v = json_object_get(data, "verify");
		bool passed = json_is_true(json_object_get(v, "passed"));
		const char *commit = client_json_str(v, "commit");
		fprintf(f, "verify attempt %lld: %s",
			(long long)client_json_int(data, "attempt", 0),
			passed ? "passed" : "failed");
		if (commit)
			fprintf(f, " on commit %.12s", commit);
		size_t i;
		json_t *r;
		json_array_foreach(json_object_get(v, "results"), i, r)
		{
			int64_t st = client_json_int(r, "status", 0);
			fprintf(f, "\n  $ %s: %s",
				client_or(client_json_str(r, "command"), "?"),
				st == 0 ? "ok" : "failed");
			if (st != 0)
				fprintf(f, " (exit status %lld)", (long long)st);
			if (st == 0)
				continue;
			/* the tail of what it printed: where failures are */
			const char *out = client_json_str(r, "output");
			size_t ol = out ? strlen(out) : 0;
			while (ol && out[ol - 1] == '\n')
				ol--;
			size_t start = ol, lines = 0;
			while (start > 0 && lines < 8) {
				start--;
				if (out[start] == '\n')
					lines++;
			}
			if (start > 0 || (out && out[0] == '\n'))
				start++;
			for (size_t k = start; out && k < ol;) {
				size_t e = k;
				while (e < ol && out[e] != '\n')
					e++;
				fprintf(f, "\n    | %.*s", (int)(e - k), out + k);
				k = e + 1;
			}
		}
		said = true;
	} else if (!strcmp(kind, "result")) {
		const char *error = client_json_str(data, "error");
		const char *commit = client_json_str(data, "commit");
		if (error) {
			fprintf(f, "result refused: %s", error);
		} else if (!json_is_true(json_object_get(data, "changed"))) {
			fprintf(f, "result: no change");
		} else {
			json_t *total = json_object_get(data, "files_total");
			long long files =
			    total ? (long long)json_integer_value(total)
				  : (long long)json_array_size(
					json_object_get(data, "files"));
			fprintf(f, "result: commit %.12s, %lld file%s +%lld -%lld",
				commit ? commit : "?", files,
				files == 1 ? "" : "s",
				(long long)client_json_int(data, "additions", 0),
				(long long)client_json_int(data, "deletions", 0));
		}
		int64_t left = client_json_int(
		    json_object_get(data, "build_output"), "count", 0);
		if (!error && left > 0)
			fprintf(f, " (%lld build output%s left out)",
				(long long)left, left == 1 ? "" : "s");
		said = true;
	} else if (!strcmp(kind, "transcript")) {
		/* the built-in agent: its words and each tool call */
		json_t *m = json_object_get(data, "message");
		const char *role = client_json_str(m, "role");
		json_t *calls = json_object_get(m, "tool_calls");
		const char *content = client_json_str(m, "content");
		if (role && !strcmp(role, "assistant")) {
			if (content && *content) {
				fputs("agent: ", f);
				first_line_into(f, content, 200);
				said = true;
			}
			size_t i;
			json_t *call;
			json_array_foreach(calls, i, call)
			{
				json_t *fn = json_object_get(call, "function");
				fprintf(f, "%stool %s: ", said ? "\n" : "",
					client_or(client_json_str(fn, "name"),
						  "?"));
				tool_args_into(f, client_json_str(fn, "arguments"));
				said = true;
			}
		} else if (role && !strcmp(role, "tool")) {
			fputs("  -> ", f);
			first_line_into(f, content ? content : "", 120);
			said = true;
		}
	}
	if (fclose(f) != 0 || !said) {
		free(text);
		return NULL;
	}
	return text;
}

/* Prints each line of text, made safe, behind prefix. */
int client_print_lines(FILE *out, const char *prefix, const char *text)
{
	for (const char *p = text; p && *p;) {
		size_t n = strcspn(p, "\n");
		_cleanup_free_ char *one = wr_strndup(p, n);
		_cleanup_free_ char *clean = one ? client_clean(one) : NULL;
		if (!clean)
			return -ENOMEM;
		fprintf(out, "%s%s\n", prefix, clean);
		p += n;
		if (*p == '\n')
			p++;
	}
	return 0;
}

int client_print_event(const json_t *event, bool raw)
{
	const char *kind = client_json_str(event, "kind");
	json_t *data = json_object_get(event, "data");
	_cleanup_free_ char *a = NULL;
	_cleanup_free_ char *b = NULL;
	if (!kind)
		return 0;
	if (!strcmp(kind, "output")) {
		const char *line = client_json_str(data, "line");
		const char *stream = client_json_str(data, "stream");
		bool err = stream && !strcmp(stream, "stderr");
		if (!line)
			return 0;
		if (err) {
			fflush(stdout); /* keep the two streams in order */
			return print_output_line(stderr, line, raw);
		}
		int r = print_output_line(stdout, line, raw);
		if (r < 0)
			return r;
	} else if (!strcmp(kind, "state")) {
		a = client_clean(client_json_str(data, "state"));
		const char *reason = client_json_str(data, "reason");
		b = reason ? client_clean(reason) : NULL;
		if (!a)
			return -ENOMEM;
		printf("-- state: %s%s%s%s\n", a, b ? " (" : "", b ? b : "",
		       b ? ")" : "");
	} else if (!strcmp(kind, "message")) {
		a = client_clean(client_json_str(data, "user"));
		b = client_clean(client_json_str(data, "text"));
		if (!a || !b)
			return -ENOMEM;
		printf("-- message from %s: %s\n", a, b);
	} else if (!strcmp(kind, "turn")) {
		int64_t code = client_json_int(data, "exit_code", -1);
		const char *status = client_json_str(data, "status");
		bool started = status && !strcmp(status, "started");
		printf("-- turn %lld %s",
		       (long long)client_json_int(data, "turn", 0),
		       started ? "started" : "ended");
		if (code >= 0)
			printf(" with exit code %lld", (long long)code);
		printf("\n");
	} else if (!strcmp(kind, "error")) {
		a = client_clean(client_json_str(data, "message"));
		if (!a)
			return -ENOMEM;
		printf("-- error: %s\n", a);
	} else {
		/* verification, the result, the built-in agent's steps */
		_cleanup_free_ char *summary = client_event_summary(event);
		if (summary && client_print_lines(stdout, "-- ", summary) < 0)
			return -ENOMEM;
	}
	/* phase events are timings: `logs --json` and `run --follow` */
	return stdout_status();
}

char *client_local_path(const char *text, bool any_relative)
{
	if (text[0] == '/' || strstr(text, "://"))
		return wr_strdup(text);
	/* "host:path" is git's scp-like URL */
	const char *colon = strchr(text, ':');
	if (colon && !memchr(text, '/', (size_t)(colon - text)))
		return wr_strdup(text);
	/* A name never holds '/' nor is "." or "..": such an argument can
	 * only be a path. */
	bool path_like =
	    !strcmp(text, ".") || !strcmp(text, "..") || strchr(text, '/');
	struct stat st;
	if ((path_like || any_relative) && stat(text, &st) == 0 &&
	    S_ISDIR(st.st_mode)) {
		char *real = realpath(text, NULL);
		if (real) {
			char *copy = wr_strdup(real);
			free(real);
			return copy;
		}
	}
	return wr_strdup(text);
}

int client_json_set_str(json_t *obj, const char *key, const char *text,
			struct wr_error **err)
{
	json_t *v = json_string(text);
	if (!v) {
		/* json_string() refuses text that is not UTF-8 */
		json_t *raw = json_string_nocheck(text);
		json_decref(raw);
		if (raw)
			return wr_error_input(err, 0, "%s is not valid UTF-8",
					      key);
		return wr_error_set(err, ENOMEM, "%s", key);
	}
	if (json_object_set_new(obj, key, v) < 0)
		return wr_error_set(err, ENOMEM, "%s", key);
	return 0;
}

int client_json_set_agent(json_t *obj, const char *cmd, struct wr_error **err)
{
	json_t *holder = json_object();
	json_t *argv = json_pack("[ss]", "sh", "-c");
	int r = -ENOMEM;
	if (!holder || !argv) {
		wr_error_set(err, ENOMEM, "agent");
		goto out;
	}
	r = client_json_set_str(holder, "agent", cmd, err);
	if (r < 0)
		goto out;
	if (json_array_append(argv, json_object_get(holder, "agent")) < 0 ||
	    json_object_set(obj, "agent", argv) < 0) {
		r = wr_error_set(err, ENOMEM, "agent");
		goto out;
	}
	r = 0;
out:
	json_decref(holder);
	json_decref(argv);
	return r;
}

int client_json_set_preset(json_t *obj, const char *text,
			   struct wr_error **err)
{
	const char *at = strchr(text, '@');
	size_t n = at ? (size_t)(at - text) : strlen(text);
	if (n == 0 || (at && !at[1]))
		return wr_error_input(err, EINVAL,
				      "--agent-preset '%s': expected "
				      "NAME[@VERSION] (opencode, codex, "
				      "claude-code)",
				      text);
	json_t *p = json_object();
	json_t *name = json_stringn(text, n);
	if (!p || !name || json_object_set_new(p, "preset", name) < 0 ||
	    (at && json_object_set_new(p, "version", json_string(at + 1)) < 0) ||
	    json_object_set_new(obj, "agent", p) < 0)
		return wr_error_set(err, ENOMEM, "agent preset");
	return 0;
}

/* --- tables ------------------------------------------------------------ */

int client_table_init(struct client_table *t, const char *const *headers,
		      size_t n_cols)
{
	memset(t, 0, sizeof(*t));
	t->headers = headers;
	t->n_cols = n_cols;
	return 0;
}

int client_table_add(struct client_table *t, ...)
{
	if (t->n_rows == t->cap_rows) {
		size_t cap = t->cap_rows ? t->cap_rows * 2 : 16;
		char **grown =
		    wr_realloc(t->cells, cap * t->n_cols * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		t->cells = grown;
		t->cap_rows = cap;
	}
	char **row = t->cells + t->n_rows * t->n_cols;
	va_list ap;
	va_start(ap, t);
	int r = 0;
	for (size_t i = 0; i < t->n_cols; i++) {
		const char *cell = va_arg(ap, const char *);
		row[i] = r ? NULL : client_clean(cell ? cell : "-");
		if (!row[i])
			r = -ENOMEM;
	}
	va_end(ap);
	if (r < 0) {
		for (size_t i = 0; i < t->n_cols; i++)
			free(row[i]);
		return r;
	}
	t->n_rows++;
	return 0;
}

size_t client_terminal_width(void)
{
	struct winsize ws;
	if (!isatty(STDOUT_FILENO) ||
	    ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) < 0 || ws.ws_col == 0)
		return 0;
	return ws.ws_col;
}

/* Display width, counting UTF-8 code points (continuation bytes do not
 * add a column). */
static size_t text_width(const char *s)
{
	size_t w = 0;
	for (; *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			w++;
	return w;
}

/* Prints s padded to width, or cut to max columns with "...". */
static void print_cell(FILE *out, const char *s, size_t width, size_t max)
{
	size_t w = text_width(s);
	if (max && w > max && max > 3) {
		size_t cols = 0;
		const char *p = s;
		for (; *p; p++) {
			if (((unsigned char)*p & 0xc0) != 0x80 &&
			    cols++ == max - 3)
				break;
		}
		fprintf(out, "%.*s...", (int)(p - s), s);
		w = max;
	} else {
		fputs(s, out);
	}
	for (; w < width; w++)
		fputc(' ', out);
}

int client_table_print(struct client_table *t, FILE *out)
{
	size_t widths[16] = {0};
	if (t->n_cols > ARRAY_SIZE(widths))
		return -EINVAL;
	for (size_t c = 0; c < t->n_cols; c++) {
		widths[c] = text_width(t->headers[c]);
		for (size_t r = 0; r < t->n_rows; r++) {
			size_t w = text_width(t->cells[r * t->n_cols + c]);
			if (w > widths[c])
				widths[c] = w;
		}
	}
	size_t last = t->n_cols - 1;
	size_t last_max = t->last_max;
	if (t->fit_width) {
		size_t used = 0;
		for (size_t c = 0; c < last; c++)
			used += widths[c] + 2;
		last_max = t->fit_width > used + 20 ? t->fit_width - used : 20;
	}
	for (size_t r = 0; r <= t->n_rows; r++) {
		for (size_t c = 0; c < t->n_cols; c++) {
			const char *s = r == 0
					    ? t->headers[c]
					    : t->cells[(r - 1) * t->n_cols + c];
			if (c == last) {
				print_cell(out, s, 0, last_max);
				fputc('\n', out);
			} else {
				print_cell(out, s, widths[c] + 2, 0);
			}
		}
	}
	return 0;
}

void client_table_clear(struct client_table *t)
{
	for (size_t i = 0; i < t->n_rows * t->n_cols; i++)
		free(t->cells[i]);
	free(t->cells);
	t->cells = NULL;
	t->n_rows = t->cap_rows = 0;
}
