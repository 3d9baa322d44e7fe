/* refs.c - the store's references for the registry's gc (refs.h).
 *
 * Referenced: every snapshot row; every session's recorded checkpoint
 * (outcome.checkpoint: its tag, its bundle's and artifacts' blobs), in
 * any state, as long as the store has the session (an API server may
 * still serve its artifacts from the registry, api/artifacts.c); and, for
 * a session not over, its checkpoint tags of its current lease epoch or
 * later (the worker holding it pushes before the review transition
 * records). A session whose outcome does not parse keeps every tag. */
#include "cli/registry/refs.h"

#include "store/store.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* the server's configuration file (as --blobs reads it) */
#define CONFIG_FILE_MAX (1u << 20)
/* sessions read at most: past it the gc stops, nothing deleted */
#define SESSIONS_MAX 1000000
#define PAGE 500

int gc_store_url(const char *store, const char *config, const char *data_dir,
		 char **url, struct wr_error **err)
{
	if (store) {
		*url = wr_strdup(store);
		return *url ? 0 : wr_error_set(err, ENOMEM, "--store");
	}
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = wr_read_file(config, CONFIG_FILE_MAX, &text, &len);
	if (r < 0)
		return wr_error_input(err, -r, "--config %s", config);
	json_error_t jerr;
	json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(doc)) {
		json_decref(doc);
		return wr_error_input(err, EINVAL, "--config %s: %d:%d: %s",
				      config, jerr.line, jerr.column,
				      doc ? "expected an object" : jerr.text);
	}
	json_t *v = json_object_get(doc, "store");
	if (v && (!json_is_string(v) || !*json_string_value(v))) {
		json_decref(doc);
		return wr_error_input(err, EINVAL,
				      "--config %s: store: expected a "
				      "PostgreSQL URL, \"sqlite:PATH\" or a "
				      "path",
				      config);
	}
	*url = v ? wr_strdup(json_string_value(v))
		 : wr_asprintf("%s/warren.db", data_dir);
	json_decref(doc);
	return *url ? 0 : wr_error_set(err, ENOMEM, "--config");
}

/* Makes room for element n of *v (elements of size bytes): the
 * capacity is 16, then doubles whenever n reaches it (a power of two), so
 * a million sessions cost some twenty reallocs. */
static int grow(void **v, size_t n, size_t size)
{
	bool full = n == 0 || (n >= 16 && !(n & (n - 1)));
	if (!full)
		return 0;
	void *grown = wr_realloc(*v, (n ? 2 * n : 16) * size);
	if (!grown)
		return -ENOMEM;
	*v = grown;
	return 0;
}

static int push_str(char ***v, size_t *n, const char *s)
{
	if (grow((void **)v, *n, sizeof(**v)) < 0)
		return -ENOMEM;
	char **grown = *v;
	if (!(grown[*n] = wr_strdup(s)))
		return -ENOMEM;
	(*n)++;
	return 0;
}

/* The session's entry, and the blobs its recorded checkpoint names. */
static int add_session(struct reg_gc_refs *out, const struct store_session *s)
{
	if (grow((void **)&out->sessions, out->n_sessions,
		 sizeof(*out->sessions)) < 0)
		return -ENOMEM;
	struct reg_gc_session *e = &out->sessions[out->n_sessions];
	memset(e, 0, sizeof(*e));
	if (!(e->id = wr_strdup(s->id)))
		return -ENOMEM;
	out->n_sessions++;
	e->keep_from_epoch =
	    session_state_terminal(s->state) ? INT64_MAX : s->lease_epoch;
	if (!s->outcome_json)
		return 0;
	json_t *o = json_loads(s->outcome_json, 0, NULL);
	if (!json_is_object(o)) {
		json_decref(o);
		e->keep_from_epoch = 0; /* unreadable: every tag stays */
		return 0;
	}
	json_t *ck = json_object_get(o, "checkpoint");
	const char *tag = json_string_value(json_object_get(ck, "tag"));
	const char *bundle = json_string_value(json_object_get(ck, "bundle"));
	int r = 0;
	if (tag && !(e->tag = wr_strdup(tag)))
		r = -ENOMEM;
	if (r == 0 && bundle)
		r = push_str(&out->blobs, &out->n_blobs, bundle);
	const char *name;
	json_t *a;
	json_object_foreach(json_object_get(ck, "artifacts"), name, a)
	{
		const char *d = json_string_value(json_object_get(a, "digest"));
		if (r == 0 && d)
			r = push_str(&out->blobs, &out->n_blobs, d);
	}
	json_decref(o);
	return r;
}

static int read_store(struct store *st, const char *shown,
		      struct reg_gc_refs *out, struct wr_error **err)
{
	struct store_repo *repos = NULL;
	size_t n_repos = 0;
	int r = st->ops->repo_list(st, &repos, &n_repos, err);
	if (r < 0)
		return r;
	store_repos_free(repos, n_repos);
	struct store_snapshot *snaps = NULL;
	size_t n_snaps = 0;
	if ((r = st->ops->snapshot_list(st, NULL, &snaps, &n_snaps, err)) < 0)
		return r;
	for (size_t i = 0; r == 0 && i < n_snaps; i++)
		if (push_str(&out->snapshots, &out->n_snapshots, snaps[i].id) <
		    0)
			r = wr_error_set(err, ENOMEM, "gc");
	store_snapshots_free(snaps, n_snaps);
	/* every session, newest first, a page at a time */
	char before[STORE_ID_MAX] = "";
	while (r == 0) {
		struct store_session_filter f = {.state = -1,
						 .before_id =
						     before[0] ? before : NULL,
						 .limit = PAGE};
		struct store_session *v = NULL;
		size_t n = 0;
		if ((r = st->ops->session_list(st, &f, &v, &n, err)) < 0)
			break;
		for (size_t i = 0; r == 0 && i < n; i++)
			if (add_session(out, &v[i]) < 0)
				r = wr_error_set(err, ENOMEM, "gc");
		if (n)
			snprintf(before, sizeof(before), "%s", v[n - 1].id);
		store_sessions_free(v, n);
		if (r == 0 && out->n_sessions > SESSIONS_MAX)
			r = wr_error_set(err, E2BIG,
					 "more than %d sessions in the store",
					 SESSIONS_MAX);
		if (n < PAGE)
			break;
	}
	/* a wrong --store (a new database, another file) would make
	 * everything look unreferenced */
	if (r == 0 && !n_repos && !out->n_snapshots && !out->n_sessions)
		r = wr_error_input(err, ENOENT,
				   "the store %s is empty (no repository, "
				   "snapshot or session): not warren serve's "
				   "store?",
				   shown);
	return r;
}

static int source_read(struct reg_gc_source *base, struct reg_gc_refs *out,
		       struct wr_error **err)
{
	struct gc_store_source *src = (struct gc_store_source *)base;
	memset(out, 0, sizeof(*out));
	_cleanup_free_ char *shown = store_url_redact(src->url);
	if (!shown)
		return wr_error_set(err, ENOMEM, "store");
	if (!store_url_is_pg(src->url)) {
		/* opening an SQLite file creates it: an empty store */
		const char *path =
		    strncmp(src->url, "sqlite:", 7) ? src->url : src->url + 7;
		if (access(path, F_OK) < 0)
			return wr_error_input(err, errno, "the store %s",
					      shown);
	}
	struct store *st = store_open(src->url, err);
	if (!st)
		return wr_error_wrap(err, "read the store %s", shown);
	int r = read_store(st, shown, out, err);
	store_close(st);
	if (r < 0) {
		reg_gc_refs_clear(out);
		return wr_error_wrap(err, "read the store %s", shown);
	}
	return 0;
}

void gc_store_source_init(struct gc_store_source *s, const char *url)
{
	s->base.read = source_read;
	s->url = url;
}
