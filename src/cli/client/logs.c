/* logs.c - `warren logs ID [-f]`: a session's output and lifecycle.
 *
 *   GET /sessions/{id}/events?format=json   (what is there now)
 *   GET /sessions/{id}/events               (-f: SSE until it rests) */
#include "cli/client/client.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char logs_usage[] =
    "usage: warren logs ID [-f] [--raw] [--json]\n"
    "\n"
    "Prints a session's events: the agent's output lines (its stdout on\n"
    "stdout, its stderr on stderr), state changes as \"-- state: running\",\n"
    "follow-up messages, turn ends and errors as \"-- \" lines. Output\n"
    "lines going to a terminal have their control characters shown\n"
    "visibly (^[ for ESC, ^M for CR, \\u202e for a bidi override); into a\n"
    "pipe or a file they are printed as the agent wrote them.\n"
    "\n"
    "  -f, --follow   keep printing new events until the session rests\n"
    "                 (review or a final state), reconnecting if the\n"
    "                 connection drops\n"
    "  --raw          output lines as the agent wrote them, on a terminal\n"
    "                 too (colours, and any escape sequence)\n"
    "  --json         each event as one JSON line: {\"seq\", \"time_ms\",\n"
    "                 \"kind\", \"data\"}\n"
    "  --server URL   Warren server (default $WARREN_SERVER, else\n"
    "                 " CLIENT_DEFAULT_SERVER ")\n"
    "  --token T      API token (default $WARREN_TOKEN, else\n"
    "                 $WARREN_HOME/admin.token, ./.warren/admin.token)\n";

enum {
	OPT_RAW = 0x100,
};

static const struct option logs_options[] = {
    {"follow", no_argument, NULL, 'f'},
    {"raw", no_argument, NULL, OPT_RAW},
    {NULL, 0, NULL, 0},
};

struct logs {
	struct client *c;
	bool follow, raw;
};

static int on_option(struct client *c, void *ctx, int opt, const char *arg)
{
	struct logs *l = ctx;
	(void)c;
	(void)arg;
	switch (opt) {
	case 'f': l->follow = true; return 0;
	case OPT_RAW: l->raw = true; return 0;
	}
	return -1;
}

static int print_one(void *ctx, json_t *event)
{
	struct logs *l = ctx;
	return l->c->json ? client_print_json_line(event)
			  : client_print_event(event, l->raw);
}

/* ?format=json answers in pages ({"events": [...], "next_after": N or
 * null}): fetch them all, in order. */
static int print_pages(struct logs *l, const char *session_id)
{
	struct client *c = l->c;
	_cleanup_free_ char *id = client_escape(session_id);
	if (!id)
		return client_exit(c, -ENOMEM, NULL);
	int64_t after = 0;
	for (;;) {
		_cleanup_free_ char *path =
		    after ? wr_asprintf("/sessions/%s/events?format=json&"
					"after=%lld",
					id, (long long)after)
			  : wr_asprintf("/sessions/%s/events?format=json", id);
		if (!path)
			return client_exit(c, -ENOMEM, NULL);
		json_t *doc = NULL;
		struct wr_error *err = NULL;
		int r = client_get(c, path, &doc, &err);
		if (r < 0)
			return client_exit(c, r, err);
		json_t *events = json_object_get(doc, "events");
		if (!json_is_array(events)) {
			json_decref(doc);
			wr_error_set(&err, 0,
				     "bad response: no \"events\" array");
			return client_exit(c, -EPROTO, err);
		}
		size_t i;
		json_t *event;
		json_array_foreach(events, i, event)
		{
			r = print_one(l, event);
			if (r < 0)
				break;
		}
		int64_t next = client_json_int(doc, "next_after", 0);
		json_decref(doc);
		if (r < 0)
			return client_exit(c, r, NULL);
		/* a page that does not move forward ends it, whatever the
		 * server says */
		if (next <= after)
			return CLIENT_EXIT_OK;
		after = next;
	}
}

int client_cmd_logs(struct client *c, int argc, char **argv)
{
	static const struct client_verb verb = {
	    .name = "logs",
	    .usage = logs_usage,
	    .shortopts = "f",
	    .options = logs_options,
	    .on_option = on_option,
	};
	struct logs l = {.c = c};
	int code = client_parse(c, &verb, &l, argc, argv);
	if (code != CLIENT_CONTINUE)
		return code;
	code = client_check_args(c, 1, 1, "session ID");
	if (code != CLIENT_CONTINUE)
		return code;

	struct wr_error *err = NULL;
	int r;
	if (l.follow) {
		struct client_follow f = {
		    .session_id = c->args[0],
		    .on_event = print_one,
		    .ctx = &l,
		};
		r = client_follow(c, &f, &err);
		return r < 0 ? client_exit(c, r, err) : CLIENT_EXIT_OK;
	}

	return print_pages(&l, c->args[0]);
}
