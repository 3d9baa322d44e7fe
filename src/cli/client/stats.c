/* stats.c - `warren stats`: the pilot's numbers, as the server computes
 * them (sessions by outcome, verify pass rates, model tokens and cost,
 * sandbox time, reviewer time, cost per accepted change).
 *
 *   GET /stats -> 200 {...}
 *
 * The human form does not know the keys: it prints every leaf of the
 * answer as "path.to.key  value", aligned, in the server's order, so that
 * a number the server adds shows up without a new client. */
#include "cli/client/client.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define STATS_DEPTH_MAX 8     /* deeper objects are shown as JSON */
#define STATS_LINES_MAX 10000 /* a sane answer has a few dozen */

static const char stats_usage[] =
    "usage: warren stats [--json]\n"
    "\n"
    "Prints the server's numbers: sessions by outcome, verify pass rates,\n"
    "model tokens and cost, sandbox time, reviewer time, accepted changes\n"
    "per reviewer minute, cost per accepted change. One \"name  value\"\n"
    "line each; nested numbers are named with dots (sessions.pushed).\n"
    "\n"
    "  --json         the API's JSON\n"
    "  --server URL   Warren server (default $WARREN_SERVER, else\n"
    "                 " CLIENT_DEFAULT_SERVER ")\n"
    "  --token T      API token (default $WARREN_TOKEN, else\n"
    "                 $WARREN_HOME/admin.token, ./.warren/admin.token)\n";

struct stats_lines {
	char **keys, **values;
	size_t n, cap;
};

static void lines_clear(struct stats_lines *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->keys[i]);
		free(l->values[i]);
	}
	free(l->keys);
	free(l->values);
}

/* A number as people read it: integers as they are, others with up to
 * four decimals and no trailing zeros (0.75, 12.5, 0.0012). */
static char *format_value(const json_t *v)
{
	if (json_is_integer(v))
		return wr_asprintf("%lld", (long long)json_integer_value(v));
	if (json_is_real(v)) {
		char *s = wr_asprintf("%.4f", json_real_value(v));
		if (s && strchr(s, '.')) {
			size_t len = strlen(s);
			while (s[len - 1] == '0')
				s[--len] = '\0';
			if (s[len - 1] == '.')
				s[--len] = '\0';
		}
		return s;
	}
	if (json_is_string(v))
		return client_clean(json_string_value(v));
	if (json_is_null(v))
		return wr_strdup("-");
	if (json_is_boolean(v))
		return wr_strdup(json_is_true(v) ? "yes" : "no");
	char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	char *clean = text ? client_clean(text) : NULL;
	free(text);
	return clean;
}

static int lines_add(struct stats_lines *l, char *key, char *value)
{
	if (!key || !value || l->n == STATS_LINES_MAX) {
		free(key);
		free(value);
		return l->n == STATS_LINES_MAX ? -E2BIG : -ENOMEM;
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 32;
		char **k = wr_realloc(l->keys, cap * sizeof(*k));
		if (k)
			l->keys = k;
		char **v = k ? wr_realloc(l->values, cap * sizeof(*v)) : NULL;
		if (!v) {
			free(key);
			free(value);
			return -ENOMEM;
		}
		l->values = v;
		l->cap = cap;
	}
	l->keys[l->n] = key;
	l->values[l->n] = value;
	l->n++;
	return 0;
}

/* Every leaf of obj, named prefix.key. */
static int collect(struct stats_lines *l, const char *prefix, json_t *obj,
		   int depth)
{
	const char *key;
	json_t *v;
	json_object_foreach(obj, key, v)
	{
		_cleanup_free_ char *name =
		    *prefix ? wr_asprintf("%s.%s", prefix, key)
			    : wr_strdup(key);
		if (!name)
			return -ENOMEM;
		int r;
		if (json_is_object(v) && json_object_size(v) &&
		    depth < STATS_DEPTH_MAX)
			r = collect(l, name, v, depth + 1);
		else
			r = lines_add(l, client_clean(name), format_value(v));
		if (r < 0)
			return r;
	}
	return 0;
}

static int print_stats(json_t *doc)
{
	struct stats_lines l = {0};
	int r = collect(&l, "", doc, 0);
	bool cut = r == -E2BIG;
	if (cut)
		r = 0;
	size_t width = 0;
	for (size_t i = 0; r == 0 && i < l.n; i++)
		if (strlen(l.keys[i]) > width)
			width = strlen(l.keys[i]);
	for (size_t i = 0; r == 0 && i < l.n; i++)
		printf("%-*s  %s\n", (int)width, l.keys[i], l.values[i]);
	if (r == 0 && l.n == 0)
		fprintf(stderr, "no numbers yet\n");
	if (cut)
		fprintf(stderr, "(more than %d numbers: see --json)\n",
			STATS_LINES_MAX);
	lines_clear(&l);
	if (r == 0 && (fflush(stdout) != 0 || ferror(stdout)))
		r = errno ? -errno : -EIO;
	return r;
}

int client_cmd_stats(struct client *c, int argc, char **argv)
{
	static const struct client_verb verb = {
	    .name = "stats",
	    .usage = stats_usage,
	};
	int code = client_parse(c, &verb, NULL, argc, argv);
	if (code != CLIENT_CONTINUE)
		return code;
	code = client_check_args(c, 0, 0, "");
	if (code != CLIENT_CONTINUE)
		return code;

	json_t *doc = NULL;
	struct wr_error *err = NULL;
	int r = client_get(c, "/stats", &doc, &err);
	if (r < 0)
		return client_exit(c, r, err);
	if (!json_is_object(doc)) {
		json_decref(doc);
		wr_error_set(&err, 0, "bad response: not a JSON object");
		return client_exit(c, -EPROTO, err);
	}
	r = c->json ? client_print_json(doc) : print_stats(doc);
	json_decref(doc);
	return r < 0 ? client_exit(c, r, NULL) : CLIENT_EXIT_OK;
}
