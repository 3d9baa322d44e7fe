/* outbox.c - what every backend of Slack's outbox shares (outbox.h): the
 * names of the kinds of post, as stored, the destructors of the posts it
 * hands out, the checks of what its calls are given, and a post read from
 * a row (store/backend.h). */
#include "notify/outbox.h"

#include "store/backend.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[SLACK_POST_KIND_MAX] = {
    [SLACK_POST_OUTCOME] = "outcome",
    [SLACK_POST_REPLY] = "reply",
    [SLACK_POST_EPHEMERAL] = "ephemeral",
};

const char *slack_post_kind_name(enum slack_post_kind k)
{
	if ((int)k < 0 || k >= SLACK_POST_KIND_MAX)
		return NULL;
	return kind_names[k];
}

int slack_post_kind_parse(const char *text)
{
	if (!text)
		return -EINVAL;
	for (int i = 0; i < SLACK_POST_KIND_MAX; i++)
		if (!strcmp(text, kind_names[i]))
			return i;
	return -EINVAL;
}

void slack_post_clear(struct slack_post *p)
{
	if (!p)
		return;
	free(p->channel);
	free(p->thread_ts);
	free(p->response_url);
	free(p->slack_user);
	free(p->text);
	free(p->posted_state);
	free(p->last_error);
	memset(p, 0, sizeof(*p));
}

void slack_posts_free(struct slack_post *v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		slack_post_clear(&v[i]);
	free(v);
}

int slack_outbox_open(struct store *st, struct slack_outbox **out,
		      struct wr_error **err)
{
	if (!st)
		return wr_error_set(err, EINVAL, "Slack outbox: no store");
	switch (st->ops->backend) {
	case STORE_BACKEND_SQLITE:
		return slack_outbox_open_sqlite(st, out, err);
	case STORE_BACKEND_POSTGRES: return slack_outbox_open_pg(st, out, err);
	default: break;
	}
	return wr_error_set(err, ENOTSUP,
			    "Slack outbox: the store's backend has none");
}

/* A printable, non-empty text of at most max bytes (ids, timestamps). */
static bool token_ok(const char *s, size_t max)
{
	if (!s || !*s)
		return false;
	size_t n = 0;
	for (; s[n]; n++)
		if (n == max || s[n] <= ' ' || s[n] > '~')
			return false;
	return true;
}

/* NULL, or a text of at most max bytes. */
static bool opt_text_ok(const char *s, size_t max)
{
	return !s || strnlen(s, max + 1) <= max;
}

bool slack_event_id_ok(const char *id)
{
	return token_ok(id, SLACK_POST_ID_MAX);
}

int slack_post_check(const struct slack_post *p, struct wr_error **err)
{
	if (!p || !slack_post_kind_name(p->kind))
		return wr_error_input(err, EINVAL, "add Slack post: bad kind");
	if (p->session_id[0] && !store_id_ok(p->session_id))
		return wr_error_input(err, EINVAL,
				      "add Slack post: bad session id");
	if (p->kind == SLACK_POST_OUTCOME && !p->session_id[0])
		return wr_error_input(err, EINVAL,
				      "add Slack post: an outcome needs a "
				      "session");
	if (p->kind != SLACK_POST_OUTCOME && (!p->text || !*p->text))
		return wr_error_input(err, EINVAL,
				      "add Slack post: a reply needs a text");
	if (!p->channel && !p->response_url)
		return wr_error_input(err, EINVAL,
				      "add Slack post: no channel and no "
				      "response_url");
	if (p->kind == SLACK_POST_EPHEMERAL && (!p->channel || !p->slack_user))
		return wr_error_input(err, EINVAL,
				      "add Slack post: an ephemeral reply "
				      "needs a channel and a user");
	if ((p->channel && !token_ok(p->channel, SLACK_POST_ID_MAX)) ||
	    (p->thread_ts && !token_ok(p->thread_ts, SLACK_POST_ID_MAX)) ||
	    (p->slack_user && !token_ok(p->slack_user, SLACK_POST_ID_MAX)) ||
	    (p->response_url &&
	     !token_ok(p->response_url, SLACK_POST_URL_MAX)) ||
	    !opt_text_ok(p->text, SLACK_POST_TEXT_MAX))
		return wr_error_input(err, EINVAL,
				      "add Slack post: a channel, thread, "
				      "user or URL that is empty, too long "
				      "or not printable, or a text over %d "
				      "bytes",
				      SLACK_POST_TEXT_MAX);
	return 0;
}

int slack_post_update_check(int64_t id, const struct slack_post_update *u,
			    char error[SLACK_POST_ERROR_MAX + 1],
			    const char **last_error, struct wr_error **err)
{
	if (!u)
		return wr_error_input(err, EINVAL,
				      "update Slack post: nothing "
				      "to update");
	if (u->posted_state && session_state_parse(u->posted_state) < 0)
		return wr_error_input(err, EINVAL,
				      "update Slack post %lld: unknown state",
				      (long long)id);
	/* an error is the notifier's summary of Slack's answer: keep a
	 * bounded piece of it */
	*last_error = NULL;
	if (u->last_error) {
		snprintf(error, SLACK_POST_ERROR_MAX + 1, "%s", u->last_error);
		*last_error = error;
	}
	return 0;
}

static int post_from_row(const struct store_row *row, void *out)
{
	const char *kind_name = NULL;
	int r = row->text(row, 2, &kind_name);
	if (r < 0)
		return r;
	int kind = slack_post_kind_parse(kind_name);
	if (kind < 0)
		return -EIO; /* not a kind this build knows */
	struct slack_post p = {
	    .id = row->int64(row, 0),
	    .kind = kind,
	    .attempts = (int)row->int64(row, 9),
	    .created_ms = row->int64(row, 10),
	    .next_ms = row->int64(row, 11),
	    .done_ms = row->int64(row, 12),
	};
	r = store_row_copy(row, 1, p.session_id, sizeof(p.session_id));
	char **texts[] = {&p.channel,	 &p.thread_ts, &p.response_url,
			  &p.slack_user, &p.text,      &p.posted_state,
			  &p.last_error};
	const int cols[] = {3, 4, 5, 6, 7, 8, 13};
	for (size_t i = 0; r == 0 && i < sizeof(cols) / sizeof(cols[0]); i++)
		r = store_row_strdup(row, cols[i], texts[i]);
	if (r < 0) {
		slack_post_clear(&p);
		return r;
	}
	*(struct slack_post *)out = p;
	return 0;
}

static void post_clear(void *p)
{
	slack_post_clear(p);
}

const struct store_record_type slack_post_record = {sizeof(struct slack_post),
						    post_from_row, post_clear};
