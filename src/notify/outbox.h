/* outbox.h - Slack's outbox: what Warren is to post to Slack, and the
 * Events API deliveries it has handled, behind an interface of its own.
 *
 * The API adds a post when a slash command or a mention asks for one (a
 * reply, or a session's outcome); the notifier (notifier.c) reads the
 * due ones and records each attempt's outcome. The outbox is durable
 * state beside the store's, so it is a table of function pointers like
 * struct store, and a store backend that does not serve Slack needs
 * nothing of it. Both store backends implement it, in the store's
 * database and over its connections (store/sqlite_slack.c,
 * store/pg_slack.c); slack_outbox_open picks the store's.
 *
 * Rules every backend keeps (those of store.h): every call is one
 * transaction; records returned are owned by the caller (slack_post_clear,
 * slack_posts_free); out-parameters are written only on success; 0 (or a
 * count, an id) on success, -errno on failure (-ENOENT unknown id, -EEXIST
 * duplicate, -EIO for a database error, with *err). Safe to call from
 * several threads. */
#ifndef WR_NOTIFY_OUTBOX_H
#define WR_NOTIFY_OUTBOX_H

#include "store/store.h"
#include "util/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum slack_post_kind {
	SLACK_POST_OUTCOME,   /* a session's outcome, each time it rests */
	SLACK_POST_REPLY,     /* text, once, to a channel (or thread) */
	SLACK_POST_EPHEMERAL, /* text, once, seen by slack_user alone */
	SLACK_POST_KIND_MAX
};

/* Most bytes of a post's text, of its Slack ids and of its URL. */
#define SLACK_POST_TEXT_MAX (40 * 1024)
#define SLACK_POST_ID_MAX 64
#define SLACK_POST_URL_MAX 4096

struct slack_post {
	int64_t id;
	char session_id[STORE_ID_MAX]; /* "" for none (a reply about none) */
	enum slack_post_kind kind;
	char *channel;	    /* where chat.postMessage posts, or NULL */
	char *thread_ts;    /* the thread it answers in, or NULL */
	char *response_url; /* a slash command's, or NULL */
	char *slack_user;   /* who asked; who alone sees an ephemeral one */
	char *text;	    /* reply, ephemeral: the text; outcome: NULL */
	char *posted_state; /* outcome: the state last posted, or NULL */
	int attempts;	    /* failed attempts since the last success */
	int64_t created_ms;
	int64_t next_ms; /* not tried again before this time */
	int64_t done_ms; /* nothing more will be posted: 0 before */
	char *last_error;
};

/* What post_update changes; NULL / -1 keep the value. */
struct slack_post_update {
	const char *posted_state; /* NULL: keep */
	int attempts;		  /* -1: keep */
	int64_t next_ms;	  /* -1: keep */
	int64_t done_ms;	  /* -1: keep */
	const char *last_error;	  /* NULL: keep, "": clears */
};
#define SLACK_POST_UPDATE_INIT                               \
	{                                                    \
		.attempts = -1, .next_ms = -1, .done_ms = -1 \
	}

struct slack_outbox;

struct slack_outbox_ops {
	void (*close)(struct slack_outbox *ob);

	/* Adds p (its id, attempts, next_ms, done_ms, posted_state and
	 * last_error are not read; created_ms 0 means now) and returns its
	 * id. -EINVAL for a post without a way to send it (a channel or a
	 * response_url) or with fields past the SLACK_POST_* caps; -ENOENT
	 * when session_id names no session. */
	int64_t (*post_add)(struct slack_outbox *ob, const struct slack_post *p,
			    struct wr_error **err);
	/* The posts due at now_ms, oldest first, at most limit (1..100):
	 * not done, next_ms <= now_ms, and for an outcome, its session
	 * resting (review or a terminal state) in another state than the
	 * one last posted, with every reply of the same session added
	 * before it done (the outcome never overtakes the answer that
	 * announced the session). */
	int (*post_due)(struct slack_outbox *ob, int64_t now_ms, int limit,
			struct slack_post **out, size_t *n_out,
			struct wr_error **err);
	/* -ENOENT if there is no post id. */
	int (*post_update)(struct slack_outbox *ob, int64_t id,
			   const struct slack_post_update *u,
			   struct wr_error **err);
	/* A session's posts, oldest first. */
	int (*post_list)(struct slack_outbox *ob, const char *session_id,
			 struct slack_post **out, size_t *n_out,
			 struct wr_error **err);
	/* Records one of Slack's event ids (1..SLACK_POST_ID_MAX printable
	 * ASCII) as seen at now_ms, and forgets those seen before
	 * now_ms - keep_ms, in one transaction. -EEXIST if it was seen
	 * already (Slack retrying a delivery). */
	int (*event_claim)(struct slack_outbox *ob, const char *event_id,
			   int64_t now_ms, int64_t keep_ms,
			   struct wr_error **err);
	/* Forgets an event id (its handling failed: Slack's retry is to be
	 * handled). Unknown ids are no error. */
	int (*event_release)(struct slack_outbox *ob, const char *event_id,
			     struct wr_error **err);
};

struct slack_outbox {
	const struct slack_outbox_ops *ops;
};

/* The outbox in the SQLite store st (its tables slack_posts and
 * slack_events, migration 3), over st's connections: -EINVAL if st is not
 * a SQLite store. st must outlive it; *out is written only on success. */
int slack_outbox_open_sqlite(struct store *st, struct slack_outbox **out,
			     struct wr_error **err);
/* The same in a PostgreSQL store (-EINVAL if st is not one). */
int slack_outbox_open_pg(struct store *st, struct slack_outbox **out,
			 struct wr_error **err);
/* The outbox in st's database, whichever its backend. */
int slack_outbox_open(struct store *st, struct slack_outbox **out,
		      struct wr_error **err);

/* Accepts NULL. Close it before its store. */
static inline void slack_outbox_close(struct slack_outbox *ob)
{
	if (ob)
		ob->ops->close(ob);
}

/* For the backends (outbox.c): what a post must hold to be added
 * (post_add's -EINVAL); post_update's checks, with the bounded copy of its
 * last_error (*last_error points into error, or is NULL to keep); whether
 * id is one of Slack's event ids as event_claim takes them. */
#define SLACK_POST_ERROR_MAX 511
int slack_post_check(const struct slack_post *p, struct wr_error **err);
int slack_post_update_check(int64_t id, const struct slack_post_update *u,
			    char error[SLACK_POST_ERROR_MAX + 1],
			    const char **last_error, struct wr_error **err);
bool slack_event_id_ok(const char *id);

/* "outcome", "reply", "ephemeral"; NULL for an out-of-range value. */
const char *slack_post_kind_name(enum slack_post_kind k);
/* The kind named text, or -EINVAL. */
int slack_post_kind_parse(const char *text);
void slack_post_clear(struct slack_post *p);
/* Frees an array from post_due or post_list (clears every element). */
void slack_posts_free(struct slack_post *v, size_t n);

#endif
