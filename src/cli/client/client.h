/* client.h - `warren-client`: the control-plane verbs over the HTTP API
 * (docs/api.md). `warren run|sessions|show|logs|send|cancel|diff|approve|
 * reject|repo|snapshots|token|secret|stats` exec this program with the same
 * argv, so argv[1] is the verb.
 *
 * One file per verb (run.c, sessions.c, ...), each a thin layer over the
 * API; options.c parses what every verb shares (--server, --token, --json,
 * --help) and maps errors to exit codes; http.c talks to the server
 * (libcurl); sse.c reads and follows a session's event stream; format.c
 * prints tables, times and events. Nothing here is used by the server. */
#ifndef WR_CLI_CLIENT_H
#define WR_CLI_CLIENT_H

#include "util/error.h"

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes (docs/cli.md, "Control plane commands"). */
#define CLIENT_EXIT_OK 0
#define CLIENT_EXIT_FAILED 1 /* API error; run --follow: not in review */
#define CLIENT_EXIT_USAGE 2
#define CLIENT_EXIT_UNREACHABLE 3
#define CLIENT_EXIT_VERIFY_FAILED 4 /* run --follow|--wait: review, checks failed */
/* client_parse(): go on with the verb (anything else is an exit code). */
#define CLIENT_CONTINUE (-1)

#define CLIENT_DEFAULT_SERVER "http://127.0.0.1:7777"
#define CLIENT_API_PREFIX "/api/v1"

/* Error returns of the HTTP layer (with a message in *err):
 *   -EHOSTUNREACH  the server could not be reached (exit 3)
 *   -ECONNRESET    the connection broke or timed out mid-transfer (exit 3)
 *   -EPROTO        the API answered with an error, or with something that
 *                  is not what the API promises (exit 1)
 *   -EINVAL        bad input: option values, token file (exit 2)
 *   -EPIPE         our own stdout went away (exit 1, no message)
 *   -ENOMEM        (exit 1) */

struct client {
	const char *verb; /* "run", "repo add": names us in messages */
	/* the command line */
	const char *server_opt; /* --server */
	const char *token_opt;	/* --token */
	bool json;		/* --json */
	char **args;		/* positional arguments */
	int n_args;
	/* resolved on the first request (client_setup in http.c) */
	char *server;	  /* base URL, without a trailing '/' */
	char *token;	  /* NULL: none found */
	char *token_file; /* the file it came from, NULL: option/env */
	void *curl;	  /* CURL *, reused: requests share a connection */
};

/* A verb's own options; the shared ones are added by client_parse. */
struct client_verb {
	const char *name;
	const char *usage; /* the full --help text */
	const char *shortopts;
	const struct option *options; /* NULL-terminated, or NULL */
	/* One of the verb's options; 0, or -1 after client_usage_error(). */
	int (*on_option)(struct client *c, void *ctx, int opt, const char *arg);
};

/* options.c */
/* Parses argv (argv[0] is the verb); options may come anywhere. Returns
 * CLIENT_CONTINUE with c->args set, or an exit code (0 after --help). */
int client_parse(struct client *c, const struct client_verb *v, void *ctx,
		 int argc, char **argv);
/* CLIENT_CONTINUE if min <= n_args <= max (max < 0: no limit), else
 * prints "missing WHAT" / "unexpected argument" and returns 2. */
int client_check_args(struct client *c, int min, int max, const char *what);
void client_usage_error(struct client *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prints err once ("warren VERB: message") and returns the exit code for
 * ret (an error return of the HTTP layer); frees err. */
int client_exit(struct client *c, int ret, struct wr_error *err);
void client_clear(struct client *c);

/* http.c */
/* Percent-encodes text for a path segment or a query value. */
char *client_escape(const char *text);
/* Appends "?key=value" or "&key=value" (value escaped) to *query. */
int client_query_add(char **query, const char *key, const char *value);
/* GET CLIENT_API_PREFIX + path; a 2xx JSON body goes to *out. */
int client_get(struct client *c, const char *path, json_t **out,
	       struct wr_error **err);
/* GET CLIENT_API_PREFIX + path for bytes that are not JSON (a diff):
 * accept is the Accept header's value; the 2xx body goes to *out (NUL-
 * terminated, the caller frees it) and *len_out. */
int client_get_bytes(struct client *c, const char *path, const char *accept,
		     char **out, size_t *len_out, struct wr_error **err);
/* POST body (NULL sends {}); a 2xx JSON body goes to *out (if out). */
int client_post(struct client *c, const char *path, json_t *body, json_t **out,
		struct wr_error **err);
/* PUT body, as client_post; the serialized body is wiped once sent. */
int client_put(struct client *c, const char *path, json_t *body, json_t **out,
	       struct wr_error **err);
/* PATCH body, as client_post. */
int client_patch(struct client *c, const char *path, json_t *body,
		 json_t **out, struct wr_error **err);
/* DELETE (no body); a 2xx JSON body goes to *out (if out). */
int client_delete(struct client *c, const char *path, json_t **out,
		  struct wr_error **err);
/* GET an event stream: on_data gets the body of a 200 text/event-stream
 * response as it arrives. 0 when the server ended the stream, else an
 * error return (on_data's own errors come back as they are). */
int client_stream(struct client *c, const char *path, const char *last_event_id,
		  int (*on_data)(void *ctx, const char *buf, size_t len),
		  void *ctx, struct wr_error **err);

/* sse.c */
#define SSE_LINE_MAX (4u << 20) /* one field line; an event's data */
#define SSE_ID_MAX 128

/* One dispatched event: data without its final newline, NUL-terminated. */
typedef int (*sse_event_fn)(void *ctx, const char *id, const char *event,
			    const char *data, size_t data_len);

/* The text/event-stream format (WHATWG HTML, "Server-sent events"):
 * lines end in LF, CRLF or CR; "field: value"; a blank line dispatches. */
struct sse_parser {
	sse_event_fn on_event;
	void *ctx;
	char *line; /* the line being read */
	size_t line_len, line_cap;
	char *data; /* data: lines of the event being read */
	size_t data_len, data_cap;
	bool has_data;
	bool after_cr; /* the last byte was CR: skip an LF right after */
	bool started;  /* past a leading byte-order mark */
	char event[64];
	char id_buf[SSE_ID_MAX];  /* the id: field, takes effect at a blank line
				   */
	char last_id[SSE_ID_MAX]; /* for Last-Event-ID on reconnection */
};

void sse_parser_init(struct sse_parser *p, sse_event_fn on_event, void *ctx);
/* 0, -E2BIG for a line or event over SSE_LINE_MAX, -ENOMEM, or what
 * on_event returned (non-zero stops). */
int sse_parser_feed(struct sse_parser *p, const char *buf, size_t len);
void sse_parser_clear(struct sse_parser *p);

/* Follows a session's events until the stream ends (the session rests),
 * reconnecting with Last-Event-ID when the connection drops. */
struct client_follow {
	const char *session_id;
	/* Called once per event, in order; 0, or -errno to stop. */
	int (*on_event)(void *ctx, json_t *event);
	void *ctx;
	bool quiet; /* no "reconnecting" notes on stderr */
	/* kept up to date as events arrive */
	int64_t last_seq;
	char last_state[32]; /* data.state of the last state event */
};
int client_follow(struct client *c, struct client_follow *f,
		  struct wr_error **err);

/* format.c */
static inline const char *client_or(const char *s, const char *dflt)
{
	return s ? s : dflt;
}
const char *client_json_str(const json_t *obj, const char *key);
/* An integer (or a real, truncated) member; dflt if missing or null. */
int64_t client_json_int(const json_t *obj, const char *key, int64_t dflt);
/* JSON on stdout: one indented document / one compact line (flushed),
 * with DEL, C1 controls and bidi overrides written as \u escapes.
 * 0 or -errno (-EPIPE when stdout is gone). */
int client_print_json(const json_t *j);
int client_print_json_line(const json_t *j);
int64_t client_now_ms(void);
/* "42s", "5m", "3h", "2d": the unit grows with the amount. */
void client_format_age(int64_t ms, char *buf, size_t size);
/* "1h30m", "90s", "250ms"; "0s" for 0. */
void client_format_duration(int64_t ms, char *buf, size_t size);
/* Local time "2025-03-01 14:02:11", or "-" for 0. */
void client_format_time(int64_t epoch_ms, char *buf, size_t size);
/* Text from the server made safe to show on a terminal (docs/cli.md,
 * "What reaches the terminal"): text[0..len) with control characters in
 * caret notation (^[ ESC, ^M CR, ^G BEL, ^? DEL, ^@ NUL), C1 controls
 * (U+0080..U+009F) and bidi overrides and isolates as \u009b, \u202e,
 * and bytes that are not UTF-8 as \xff. Newline and tab stay, or with
 * one_line become spaces. NUL-terminated; its length in *len_out (if
 * len_out). NULL on ENOMEM. */
char *client_visible(const char *text, size_t len, bool one_line,
		     size_t *len_out);
/* client_visible(text, one_line): a copy safe to print on one line of a
 * terminal (NULL text: ""). */
char *client_clean(const char *text);
/* U+202A..U+202E, U+2066..U+2069: the bidi overrides and isolates. */
bool client_bidi_control(unsigned cp);
/* An argv array as a shell command line ("sh -c 'make test'"). */
char *client_argv_string(const json_t *argv);
/* review or a terminal state: the event stream ends there. */
bool client_state_rests(const char *state);
/* How `logs` shows an event: output lines to stdout or stderr (through
 * client_visible when that stream is a terminal, unless raw), the rest
 * as "-- " lines on stdout (always cleaned). 0 or -errno. */
int client_print_event(const json_t *event, bool raw);
/* What a verify, result or (built-in agent) transcript event says, as
 * lines of text for people (NULL: nothing to say for that kind). Caller
 * frees. */
char *client_event_summary(const json_t *event);
/* Each line of text behind prefix, control characters made visible. */
int client_print_lines(FILE *out, const char *prefix, const char *text);
/* Turns a local path argument ("./repo", "../x", "dir/sub") into an
 * absolute one when it names a local directory, since the server resolves
 * paths from its own working directory. NULL on ENOMEM; text otherwise. */
char *client_local_path(const char *text, bool any_relative);
/* obj[key] = text; -EINVAL (bad input: "KEY is not valid UTF-8") or
 * -ENOMEM with *err. */
int client_json_set_str(json_t *obj, const char *key, const char *text,
			struct wr_error **err);
/* obj["agent"] = ["sh", "-c", CMD]: the agent command line CMD as the
 * API's argv. Errors as client_json_set_str. */
int client_json_set_agent(json_t *obj, const char *cmd, struct wr_error **err);
/* obj["agent"] = {"preset": NAME, "version": VERSION} from "NAME[@VERSION]"
 * (--agent-preset; the server knows the names). */
int client_json_set_preset(json_t *obj, const char *text,
			   struct wr_error **err);

/* A table with aligned columns; the last column may be cut to fit. */
struct client_table {
	size_t n_cols, n_rows, cap_rows;
	const char *const *headers;
	char **cells;	  /* n_rows * n_cols, owned, already cleaned */
	size_t last_max;  /* longest last cell shown, 0: no limit */
	size_t fit_width; /* terminal width: cut the last column to fit */
};
/* The width of the terminal on stdout, 0 if it is not one. */
size_t client_terminal_width(void);
int client_table_init(struct client_table *t, const char *const *headers,
		      size_t n_cols);
/* n_cols strings (NULL prints "-"); copied. 0 or -ENOMEM. */
int client_table_add(struct client_table *t, ...);
int client_table_print(struct client_table *t, FILE *out);
void client_table_clear(struct client_table *t);

/* The verbs (argv[0] is the verb). */
int client_cmd_run(struct client *c, int argc, char **argv);
int client_cmd_sessions(struct client *c, int argc, char **argv);
int client_cmd_show(struct client *c, int argc, char **argv);
int client_cmd_logs(struct client *c, int argc, char **argv);
int client_cmd_send(struct client *c, int argc, char **argv);
int client_cmd_cancel(struct client *c, int argc, char **argv);
int client_cmd_repo(struct client *c, int argc, char **argv);
int client_cmd_snapshots(struct client *c, int argc, char **argv);
int client_cmd_token(struct client *c, int argc, char **argv);
int client_cmd_secret(struct client *c, int argc, char **argv);
int client_cmd_diff(struct client *c, int argc, char **argv);
int client_cmd_approve(struct client *c, int argc, char **argv);
int client_cmd_reject(struct client *c, int argc, char **argv);
int client_cmd_stats(struct client *c, int argc, char **argv);
int client_cmd_eval(struct client *c, int argc, char **argv);

#endif
