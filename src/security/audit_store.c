/* audit_store.c - the audit chain in the store (audit.h): append, walk,
 * export, and the import of the log files an older server wrote.
 *
 * The store keeps each record's canonical text as audit.c made it, in the
 * chain's order, and reads the head and inserts its successor in one
 * transaction (store.h, audit_append): the record is built here, in that
 * transaction, from the head the store read, so that the chain's order is
 * the store's whichever process or host appends. Verification is
 * audit.c's walker over the rows, the very checks a file gets. */
#include "security/audit.h"

#include "store/store.h"
#include "util/alloc.h"
#include "util/cleanup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct append_ctx {
	const char *session_id;
	const char *actor;
	const char *kind;
	const json_t *details;
	int64_t time_ms;
};

/* The record after the head the store read, within its transaction. */
static int build_record(void *opaque, int64_t prev_seq, const char *prev_hash,
			struct store_audit_record *out, struct wr_error **err)
{
	struct append_ctx *a = opaque;
	char prev[AUDIT_HASH_HEX + 1];
	if (prev_seq == 0)
		memset(prev, '0', AUDIT_HASH_HEX);
	else if (strlen(prev_hash) == AUDIT_HASH_HEX &&
		 strspn(prev_hash, "0123456789abcdef") == AUDIT_HASH_HEX)
		memcpy(prev, prev_hash, AUDIT_HASH_HEX);
	else
		return wr_error_set(err, EBADMSG,
				    "audit chain of %s: record %lld's hash in "
				    "the store is unreadable, the chain cannot "
				    "go on (see `warren audit verify`)",
				    a->session_id, (long long)prev_seq);
	prev[AUDIT_HASH_HEX] = '\0';
	char *text = NULL;
	int r = audit_record_make(a->session_id, prev_seq + 1, prev, a->actor,
				  a->kind, a->details, a->time_ms, &text,
				  out->hash, err);
	if (r < 0)
		return r;
	out->seq = prev_seq + 1;
	out->record = text;
	return 0;
}

int audit_store_append(struct store *st, const char *session_id, int64_t epoch,
		       const char *actor, const char *kind,
		       const json_t *details, struct wr_error **err)
{
	/* the record is checked as it is built, inside the transaction: a
	 * bad one rolls it back, having written nothing */
	struct append_ctx a = {
	    .session_id = session_id,
	    .actor = actor,
	    .kind = kind,
	    .details = details,
	    .time_ms = audit_now_ms(),
	};
	int64_t seq =
	    st->ops->audit_append(st, session_id, epoch, build_record, &a, err);
	return seq < 0 ? (int)seq : 0;
}

int audit_store_walk(struct store *st, const char *session_id,
		     audit_record_fn each, void *ctx,
		     struct audit_verify_result *out, struct wr_error **err)
{
	struct audit_walker w;
	audit_walker_init(&w);
	int64_t after = 0;
	bool any = false;
	for (;;) {
		struct store_audit_record *v = NULL;
		size_t n = 0;
		int r =
		    st->ops->audit_list(st, session_id, after, 0, &v, &n, err);
		if (r < 0)
			return r;
		int stop = 0;
		for (size_t i = 0; i < n && !stop; i++) {
			any = true;
			json_t *rec = audit_walker_step(&w, v[i].record,
							strlen(v[i].record));
			if (!rec) {
				stop = 1;
				break;
			}
			int cr = each ? each(ctx, w.res.records, rec) : 0;
			json_decref(rec);
			if (cr < 0) {
				store_audit_records_free(v, n);
				return cr;
			}
		}
		if (n > 0)
			after = v[n - 1].seq;
		store_audit_records_free(v, n);
		if (stop || n < STORE_AUDIT_LIST_MAX)
			break;
	}
	if (!any)
		return wr_error_absent(err, true,
				       "the store has no audit record of "
				       "session %s",
				       session_id);
	*out = w.res;
	return 0;
}

static int write_all(int fd, const char *buf, size_t len)
{
	for (size_t done = 0; done < len;) {
		ssize_t w = write(fd, buf + done, len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		done += (size_t)w;
	}
	return 0;
}

int audit_store_export(struct store *st, const char *session_id, int out_fd,
		       struct wr_error **err)
{
	int64_t after = 0;
	bool any = false;
	for (;;) {
		struct store_audit_record *v = NULL;
		size_t n = 0;
		int r =
		    st->ops->audit_list(st, session_id, after, 0, &v, &n, err);
		if (r < 0)
			return r;
		for (size_t i = 0; i < n && r == 0; i++) {
			r = write_all(out_fd, v[i].record, strlen(v[i].record));
			if (r == 0)
				r = write_all(out_fd, "\n", 1);
		}
		if (n > 0)
			after = v[n - 1].seq;
		any = any || n > 0;
		store_audit_records_free(v, n);
		if (r < 0)
			return wr_error_set(err, -r, "write");
		if (n < STORE_AUDIT_LIST_MAX)
			break;
	}
	if (!any)
		return wr_error_absent(err, true,
				       "the store has no audit record of "
				       "session %s",
				       session_id);
	return 0;
}

/* ---- the import of an older server's files ------------------------------ */

struct collected {
	struct store_audit_record *v;
	size_t n;
};

/* Keeps each intact record of a file: its text is its canonical form
 * (the walk checked it), the same bytes the file holds. */
static int collect_record(void *ctx, uint64_t line, const json_t *rec)
{
	(void)line;
	struct collected *c = ctx;
	struct store_audit_record *grown =
	    wr_realloc(c->v, (c->n + 1) * sizeof(*c->v));
	if (!grown)
		return -ENOMEM;
	c->v = grown;
	struct store_audit_record *r = &c->v[c->n];
	memset(r, 0, sizeof(*r));
	r->seq = json_integer_value(json_object_get(rec, "seq"));
	snprintf(r->hash, sizeof(r->hash), "%s",
		 json_string_value(json_object_get(rec, "hash")));
	r->record = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS);
	if (!r->record)
		return -ENOMEM;
	c->n++;
	return 0;
}

/* One log: 1 imported, 0 left where it is (why in *err), -ENOMEM. */
static int import_one(struct store *st, const char *path,
		      const char *session_id, struct wr_error **err)
{
	struct collected c = {0};
	struct audit_verify_result res;
	int r = audit_walk(path, collect_record, &c, &res, err);
	if (r == 0 && !res.ok)
		r = wr_error_set(err, EBADMSG,
				 "%s: not imported, its chain is broken: %s",
				 path, res.problem);
	if (r == 0 && c.n > 0)
		r = st->ops->audit_import(st, session_id, c.v, c.n, err);
	store_audit_records_free(c.v, c.n);
	if (r < 0)
		return r == -ENOMEM ? r : 0;
	if (c.n == 0)
		return 0;
	_cleanup_free_ char *done = wr_asprintf("%s.imported", path);
	if (!done)
		return -ENOMEM;
	/* the store has it now; a rename that fails leaves a copy that the
	 * next start finds imported already (-EEXIST, counted as skipped) */
	(void)rename(path, done);
	return 1;
}

int audit_store_import_dir(struct store *st, const char *data_dir,
			   size_t *skipped, struct wr_error **err)
{
	*skipped = 0;
	_cleanup_free_ char *dir = wr_asprintf("%s/audit", data_dir);
	if (!dir)
		return wr_error_set(err, ENOMEM, "audit logs");
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT
			   ? 0
			   : wr_error_set(err, errno, "open %s", dir);
	int imported = 0;
	int r = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		if (len <= 6 || strcmp(e->d_name + len - 6, ".jsonl"))
			continue;
		char id[AUDIT_SESSION_MAX];
		if (len - 6 >= sizeof(id))
			continue;
		memcpy(id, e->d_name, len - 6);
		id[len - 6] = '\0';
		if (!audit_session_id_ok(id))
			continue;
		_cleanup_free_ char *path =
		    wr_asprintf("%s/%s", dir, e->d_name);
		if (!path) {
			r = wr_error_set(err, ENOMEM, "audit logs");
			break;
		}
		/* the first failure's message is kept, the rest counted */
		struct wr_error *one = NULL;
		int k = import_one(st, path, id, &one);
		if (k < 0) {
			wr_error_free(one);
			r = wr_error_set(err, -k, "import %s", path);
			break;
		}
		if (k == 1)
			imported++;
		else if (k == 0) {
			(*skipped)++;
			if (err && !*err)
				*err = TAKE_PTR(one);
		}
		wr_error_free(one);
	}
	closedir(d);
	return r < 0 ? r : imported;
}
