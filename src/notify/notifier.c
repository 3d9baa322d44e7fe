/* notifier.c - the thread that posts to Slack what the outbox holds
 * (slack.h, outbox.h).
 *
 * The API writes a post into the outbox (slack_outbox_ops.post_add) when
 * a slash command or a mention asks for one: a reply, or a session's
 * outcome. The outbox is the only state: a post is attempted when it is
 * due (slack_outbox_ops.post_due: an outcome when its session rests in
 * review or a terminal state that was not posted yet), and each attempt's
 * result is written back before the next, so a restarted server picks up
 * exactly what is left and nothing is posted twice (but for a crash
 * between Slack's answer and that write).
 *
 * An attempt that may pass later (slack_send's retryable) is tried again
 * after retry_backoff_ms, doubled each time up to SLACK_BACKOFF_MAX_MS, or
 * after what Slack's Retry-After asks; after cfg->retries retries, or at
 * once for a final failure (an unknown channel, a revoked token), the post
 * is given up with one line in the log (util/log.h). A reply that is not an
 * outcome is done once posted; an outcome is done once a terminal state was
 * posted (after review, the reviewer's decision follows in the same thread).
 *
 * A slash command's response_url works for 30 minutes: until then the
 * post goes there, after that to the command's channel through the Web
 * API (Warren's app must be in that channel).
 *
 * The thread wakes whenever a session has an event (control_wait_events)
 * and at least every second (back-offs, replies about no session), at
 * most every MIN_PASS_GAP_MS. */
#include "notify/slack.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCH 16
#define TICK_MS 1000
#define MIN_PASS_GAP_MS 200

struct slack_notifier {
	const struct slack_config *cfg;
	struct slack_outbox *outbox;
	struct store *st;
	struct control *ctl;
	pthread_t thread;
	atomic_bool stopping;
	bool store_failing; /* the store's failure was logged */
};

/* One line in the server's log (util/log.h), "slack: " before it. */
#define notify_log(level, ...) wr_log((level), "slack", __VA_ARGS__)

static bool resting(enum session_state s)
{
	return s == SESSION_REVIEW || session_state_terminal(s);
}

static uint64_t backoff_ms(const struct slack_config *cfg, int attempts,
			   uint64_t asked_ms)
{
	if (asked_ms != UINT64_MAX)
		return asked_ms < SLACK_BACKOFF_MAX_MS ? asked_ms
						       : SLACK_BACKOFF_MAX_MS;
	uint64_t wait = cfg->retry_backoff_ms ? cfg->retry_backoff_ms
					      : SLACK_BACKOFF_MS_DEFAULT;
	for (int i = 1; i < attempts && wait < SLACK_BACKOFF_MAX_MS; i++)
		wait *= 2;
	return wait < SLACK_BACKOFF_MAX_MS ? wait : SLACK_BACKOFF_MAX_MS;
}

/* An outcome's text, for the session as it is now; *state_out is the
 * state it tells of. 0, 1 when there is nothing to post (the session
 * moved on since the post was found due), or -errno. */
static int outcome_text(const struct slack_config *cfg, struct store *st,
			const struct slack_post *p, char **text_out,
			enum session_state *state_out, struct wr_error **err)
{
	struct store_session s = {0};
	int r = st->ops->session_get(st, p->session_id, &s, err);
	if (r < 0)
		return r;
	const char *name = session_state_name(s.state);
	if (!resting(s.state) ||
	    (p->posted_state && !strcmp(p->posted_state, name))) {
		store_session_clear(&s);
		return 1;
	}
	/* the name is only for the text: an id does if it cannot be read */
	struct store_repo repo = {0};
	bool have_repo = st->ops->repo_get(st, s.repo_id, &repo, NULL) == 0;
	char *text = slack_outcome_text(cfg, &s, have_repo ? repo.name : NULL);
	*state_out = s.state;
	if (have_repo)
		store_repo_clear(&repo);
	store_session_clear(&s);
	if (!text)
		return wr_error_set(err, ENOMEM, "compose the outcome");
	*text_out = text;
	return 0;
}

/* Records the attempt's result r on post p. */
static void record(const struct slack_config *cfg, struct slack_outbox *outbox,
		   const struct slack_post *p, int64_t now, int r,
		   const struct wr_error *send_err, bool retryable,
		   uint64_t asked_ms, int posted_state)
{
	struct slack_post_update u = SLACK_POST_UPDATE_INIT;
	const char *why = send_err && send_err->msg ? send_err->msg : "failed";
	if (r == 0) {
		u.attempts = 0;
		u.last_error = "";
		if (p->kind != SLACK_POST_OUTCOME)
			u.done_ms = now;
		else {
			u.posted_state = session_state_name(posted_state);
			if (session_state_terminal(posted_state))
				u.done_ms = now;
		}
	} else {
		int attempts = p->attempts + 1;
		u.attempts = attempts;
		u.last_error = why;
		if (retryable && (unsigned)attempts <= cfg->retries) {
			u.next_ms =
			    now + (int64_t)backoff_ms(cfg, attempts, asked_ms);
		} else {
			u.done_ms = now;
			if (retryable)
				notify_log(WR_LOG_WARN,
					   "post %lld (%s%s%s): gave up after "
					   "%d attempts: %s",
					   (long long)p->id,
					   slack_post_kind_name(p->kind),
					   p->session_id[0] ? ", session " : "",
					   p->session_id, attempts, why);
			else
				notify_log(WR_LOG_WARN,
					   "post %lld (%s%s%s): %s (not "
					   "retried)",
					   (long long)p->id,
					   slack_post_kind_name(p->kind),
					   p->session_id[0] ? ", session " : "",
					   p->session_id, why);
		}
	}
	struct wr_error *err = NULL;
	if (outbox->ops->post_update(outbox, p->id, &u, &err) < 0)
		notify_log(WR_LOG_ERROR, "post %lld: record the attempt: %s",
			   (long long)p->id,
			   err && err->msg ? err->msg : "failed");
	wr_error_free(err);
}

/* One attempt at post p. */
static void deliver(const struct slack_config *cfg, struct slack_outbox *outbox,
		    struct store *st, const struct slack_post *p, int64_t now)
{
	_cleanup_free_ char *text = NULL;
	enum session_state state = SESSION_STATE_MAX;
	struct wr_error *err = NULL;
	bool retryable = false;
	uint64_t asked_ms = UINT64_MAX;
	int r = 0;
	if (p->kind == SLACK_POST_OUTCOME) {
		r = outcome_text(cfg, st, p, &text, &state, &err);
		if (r == 1)
			goto out; /* nothing to post after all */
		/* the session is there (the store refuses a post of an
		 * unknown one): a failure to read it is the store's, which
		 * may pass */
		retryable = r < 0;
	} else {
		text = wr_strdup(p->text ? p->text : "");
		if (!text) {
			r = wr_error_set(&err, ENOMEM, "post");
			retryable = true;
		}
	}
	if (r == 0) {
		struct slack_message m = {
		    .text = text,
		    .channel = p->channel,
		    .thread_ts = p->thread_ts,
		    .user = p->slack_user,
		    .ephemeral = p->kind == SLACK_POST_EPHEMERAL,
		};
		/* a response_url while it works; the channel after that */
		if (p->response_url &&
		    now - p->created_ms < (int64_t)SLACK_RESPONSE_URL_MS)
			m.response_url = p->response_url;
		if (!m.response_url && !p->channel)
			r = wr_error_set(&err, ENOENT,
					 "the response_url has expired and "
					 "there is no channel to post to");
		else
			r = slack_send(cfg, &m, &retryable, &asked_ms, &err);
	}
	record(cfg, outbox, p, now, r, err, retryable, asked_ms, (int)state);
out:
	wr_error_free(err);
}

static int pass(const struct slack_config *cfg, struct slack_outbox *outbox,
		struct store *st, int64_t now, const atomic_bool *stopping,
		struct wr_error **err)
{
	struct slack_post *due = NULL;
	size_t n = 0;
	int r = outbox->ops->post_due(outbox, now, BATCH, &due, &n, err);
	if (r < 0)
		return r;
	size_t i;
	for (i = 0; i < n && !(stopping && atomic_load(stopping)); i++)
		deliver(cfg, outbox, st, &due[i], now);
	slack_posts_free(due, n);
	return (int)i;
}

int slack_notifier_pass(const struct slack_config *cfg,
			struct slack_outbox *outbox, struct store *st,
			int64_t now_ms)
{
	struct wr_error *err = NULL;
	int r = pass(cfg, outbox, st, now_ms, NULL, &err);
	wr_error_free(err);
	return r;
}

static void sleep_ms(int64_t ms)
{
	struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
			      .tv_nsec = (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void *notifier_main(void *arg)
{
	struct slack_notifier *n = arg;
	uint64_t gen = control_event_generation(n->ctl);
	while (!atomic_load(&n->stopping)) {
		int64_t start = store_now_ms();
		struct wr_error *err = NULL;
		int r =
		    pass(n->cfg, n->outbox, n->st, start, &n->stopping, &err);
		/* a failing store is logged once, and again only after it
		 * worked in between */
		if (r < 0 && !n->store_failing)
			notify_log(WR_LOG_ERROR,
				   "read the outbox: %s (not logged again "
				   "until it works)",
				   err && err->msg ? err->msg : "failed");
		n->store_failing = r < 0;
		wr_error_free(err);
		if (atomic_load(&n->stopping))
			break;
		gen = control_wait_events(n->ctl, gen, TICK_MS);
		/* a busy server has events all the time */
		int64_t spent = store_now_ms() - start;
		if (spent < MIN_PASS_GAP_MS && !atomic_load(&n->stopping))
			sleep_ms(MIN_PASS_GAP_MS - spent);
	}
	return NULL;
}

int slack_notifier_start(const struct slack_config *cfg,
			 struct slack_outbox *outbox, struct store *st,
			 struct control *ctl, struct slack_notifier **out,
			 struct wr_error **err)
{
	if (!cfg || !outbox || !st || !ctl)
		return wr_error_set(err, EINVAL,
				    "slack notifier: nothing to "
				    "run with");
	struct slack_notifier *n = wr_calloc(1, sizeof(*n));
	if (!n)
		return wr_error_set(err, ENOMEM, "slack notifier");
	n->cfg = cfg;
	n->outbox = outbox;
	n->st = st;
	n->ctl = ctl;
	atomic_init(&n->stopping, false);
	int e = pthread_create(&n->thread, NULL, notifier_main, n);
	if (e != 0) {
		free(n);
		return wr_error_set(err, e, "slack notifier: start the thread");
	}
	*out = n;
	return 0;
}

void slack_notifier_stop(struct slack_notifier *n)
{
	if (!n)
		return;
	atomic_store(&n->stopping, true);
	pthread_join(n->thread, NULL);
	free(n);
}
