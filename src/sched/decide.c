/* decide.c - the reviewer's decision and the pilot's numbers.
 *
 * Approval is the gate for the irreversible step: only an approved
 * session's branch leaves Warren, pushed from the host (the sandbox holds
 * no credential and has no network) as refs/heads/warren/<id> and nothing
 * else. Stats aggregate what the sessions' records say. */
#include "sched/internal.h"

#include "review/forge.h"
#include "security/broker.h"
#include "review/evidence.h"
#include "review/review.h"
#include "snapshot/git.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* After the push: a pull request where the repository has a forge. A
 * failure here does not undo the push: it is recorded in the outcome. */
static void open_pull_request(const struct forge_config *fc,
			      const struct store_session *s, const char *id,
			      const char *approver, json_t *outcome)
{
	_cleanup_free_ char *branch = wr_asprintf("warren/%s", id);
	_cleanup_free_ char *title = forge_title(s->prompt, id);
	_cleanup_free_ char *body =
	    wr_asprintf("Warren session %s, asked by %s, approved by %s.", id,
			s->user ? s->user : "?", approver);
	json_t *pr = NULL;
	struct wr_error *ferr = NULL;
	int r =
	    branch && title && body
		? forge_open_pull_request(fc, branch, title, body, &pr, &ferr)
		: -ENOMEM;
	json_object_set_new(
	    outcome, "pull_request",
	    r == 0
		? pr
		: json_pack("{s:s}", "error",
			    ferr && ferr->msg ? ferr->msg : "out of memory"));
	wr_error_free(ferr);
}

static const struct forge_config *forge_of(const struct control *c,
					   const char *repo_name)
{
	for (size_t i = 0; repo_name && i < c->cfg.n_forges; i++)
		if (!strcmp(c->cfg.forges[i].repo_name, repo_name))
			return &c->cfg.forges[i].forge;
	return NULL;
}

/* The session's resting sandbox, if any, is no longer needed. */
static void release_run(struct control *c, const char *id)
{
	pthread_mutex_lock(&c->mu);
	for (struct run *r = c->runs; r; r = r->next)
		if (!r->done && !strcmp(r->id, id)) {
			r->reclaim = true;
			pthread_cond_signal(&r->cv);
		}
	pthread_mutex_unlock(&c->mu);
}

/* Loads a session in review and its outcome. */
static int load_review(struct control *c, const char *id,
		       struct store_session *s, json_t **outcome,
		       struct wr_error **err)
{
	int r = c->st->ops->session_get(c->st, id, s, err);
	if (r < 0)
		return r;
	if (s->state != SESSION_REVIEW) {
		r = wr_error_input(err, EPERM,
				   "session %s is %s, not in review", id,
				   session_state_name(s->state));
		store_session_clear(s);
		return r;
	}
	*outcome =
	    s->outcome_json ? json_loads(s->outcome_json, 0, NULL) : NULL;
	if (!json_is_object(*outcome)) {
		json_decref(*outcome);
		*outcome = json_object();
	}
	return 0;
}

/* user: who decided (NULL: the system's own step, the push) */
static int64_t transition_outcome(struct control *c, const char *user,
				  const char *id, int from,
				  enum session_state to, json_t *outcome,
				  const char *reason, struct wr_error **err)
{
	struct store_session_update upd = STORE_SESSION_UPDATE_INIT;
	_cleanup_free_ char *text = json_dumps(outcome, JSON_COMPACT);
	upd.outcome_json = text;
	upd.reason = reason;
	if (session_state_terminal(to))
		upd.finished_ms = store_now_ms();
	return control_transition_as(c, user, id, from, to, &upd, NULL, err);
}

/* The commit about to leave is the one reviewed and verified: the
 * result's id, the verification's id (when the spec verifies) and the
 * quarantine's branch agree. A mismatch is an error, never a push. */
static int result_is_evidence(struct control *c, const char *session_id,
			      const json_t *outcome, struct wr_error **err)
{
	const json_t *result = json_object_get(outcome, "result");
	const char *commit =
	    json_string_value(json_object_get(result, "commit"));
	if (!commit || strlen(commit) != 40)
		return wr_error_set(err, EPROTO, "the result names no commit");
	const json_t *verify = json_object_get(outcome, "verify");
	const char *verified =
	    json_string_value(json_object_get(verify, "commit"));
	if (verify && (!verified || strcmp(verified, commit)))
		return wr_error_set(err, EPROTO,
				    "the verified commit (%s) is not the "
				    "reviewed commit %s",
				    verified ? verified : "none", commit);
	return evidence_check_commit(c->data_dir, session_id, commit, err);
}

/* Imports on this host are one at a time: two approvals of a session
 * through one server must not fetch into its quarantine at once. */
static pthread_mutex_t import_mu = PTHREAD_MUTEX_INITIALIZER;

/* The reviewed commit in this host's quarantine before the decision is
 * recorded: there already (the session ran here), else imported from the
 * checkpoint its worker pushed to the registry (it ran on another host),
 * when that checkpoint is of the reviewed commit. A failure leaves the
 * session in review: -EPERM when this server cannot get the change
 * (409), -EAGAIN when the registry or the repository failed (503). */
static int evidence_here(struct control *c, const char *session_id,
			 const struct store_session *s, const json_t *outcome,
			 struct wr_error **err)
{
	const char *commit = json_string_value(
	    json_object_get(json_object_get(outcome, "result"), "commit"));
	if (!commit)
		return wr_error_input(err, EPERM,
				      "session %s: the result names no commit",
				      session_id);
	if (evidence_check_commit(c->data_dir, session_id, commit, NULL) ==
	    0)
		return 0;
	const json_t *ckpt = json_object_get(outcome, "checkpoint");
	const char *ck_commit =
	    json_string_value(json_object_get(ckpt, "commit"));
	const char *worker =
	    json_string_value(json_object_get(ckpt, "worker"));
	if (!ckpt || !ck_commit || strcmp(ck_commit, commit))
		return wr_error_input(
		    err, EPERM,
		    "session %s: its change is on the host that ran it and "
		    "the registry has no checkpoint of commit %.12s; approve "
		    "it through that host's server",
		    session_id, commit);
	if (!c->cfg.blobs)
		return wr_error_input(
		    err, EPERM,
		    "session %s: its change is in the registry (checkpoint "
		    "%s of worker %s) and this server has no registry "
		    "(blobs) to fetch it from",
		    session_id,
		    json_string_value(json_object_get(ckpt, "tag"))
			? json_string_value(json_object_get(ckpt, "tag"))
			: "?",
		    worker ? worker : "?");
	struct store_repo repo = {0};
	int r = c->st->ops->repo_get(c->st, s->repo_id, &repo, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *mirror = git_mirror_update(c->data_dir, repo.url,
							err);
	store_repo_clear(&repo);
	if (!mirror) {
		wr_error_wrap(err, "session %s: the repository's mirror",
			      session_id);
		return -EAGAIN;
	}
	/* the bundle in a file of the data directory's, for git to read
	 * (removed whatever happens) */
	_cleanup_free_ char *sessions = wr_asprintf("%s/sessions", c->data_dir);
	_cleanup_free_ char *bundle =
	    sessions ? wr_asprintf("%s/%s.approve.XXXXXX", sessions,
				   session_id)
		     : NULL;
	if (sessions)
		wr_mkdir_p(sessions, 0755);
	_cleanup_close_ int fd =
	    bundle ? mkostemp(bundle, O_CLOEXEC) : -1;
	if (fd < 0)
		return wr_error_set(err, bundle ? errno : ENOMEM,
				    "a file for the checkpoint's bundle");
	r = checkpoint_pull_bundle(c, ckpt, fd, err);
	if (r == 0) {
		pthread_mutex_lock(&import_mu);
		r = evidence_import_bundle(c->data_dir, session_id, mirror,
					   bundle, commit, err);
		pthread_mutex_unlock(&import_mu);
	}
	unlink(bundle);
	if (r < 0) {
		wr_error_wrap(err, "session %s", session_id);
		return -EAGAIN;
	}
	wr_log(WR_LOG_INFO, "review",
	       "session %s: its change imported from checkpoint %s of worker "
	       "%s",
	       session_id,
	       json_string_value(json_object_get(ckpt, "tag"))
		   ? json_string_value(json_object_get(ckpt, "tag"))
		   : "?",
	       worker ? worker : "?");
	return 0;
}

int control_approve(struct control *c, const char *session_id, const char *user,
		    struct wr_error **err)
{
	struct store_session s;
	json_t *outcome = NULL;
	int r = load_review(c, session_id, &s, &outcome, err);
	if (r < 0)
		return r;
	json_t *result = json_object_get(outcome, "result");
	if (!result) {
		json_decref(outcome);
		store_session_clear(&s);
		return wr_error_input(err, EPERM,
				      "session %s has no result to approve",
				      session_id);
	}
	bool changed = json_is_true(json_object_get(result, "changed"));
	if (changed &&
	    (r = evidence_here(c, session_id, &s, outcome, err)) < 0) {
		json_decref(outcome);
		store_session_clear(&s);
		return r;
	}
	int64_t now = store_now_ms();
	json_object_set_new(outcome, "decision",
			    json_pack("{s:s, s:s, s:I, s:I}", "decision",
				      "approved", "by", user, "at_ms",
				      (json_int_t)now, "review_ms",
				      (json_int_t)(now - s.finished_ms)));
	if (transition_outcome(c, user, session_id, SESSION_REVIEW,
			       SESSION_APPROVED, outcome, "", err) < 0) {
		json_decref(outcome);
		store_session_clear(&s);
		return -EPERM;
	}
	perimeter_audit_decision(c->perimeter, session_id, user, "approved", NULL);
	release_run(c, session_id);

	/* the push: the irreversible step, after approval only */
	struct store_repo repo = {0};
	_cleanup_free_ char *mirror = NULL, *quarantine = NULL;
	json_t *push = NULL;
	struct wr_error *perr = NULL;
	const char *commit =
	    json_string_value(json_object_get(result, "commit"));
	if (!changed) {
		push = json_pack("{s:s, s:s?}", "skipped", "no changes to push",
				 "commit", commit);
	} else if ((r = result_is_evidence(c, session_id, outcome, &perr)) ==
			   0 &&
		   (r = c->st->ops->repo_get(c->st, s.repo_id, &repo, &perr)) ==
		       0) {
		mirror = git_mirror_path(c->data_dir, repo.url, &perr);
		quarantine = evidence_repo_path(c->data_dir, session_id);
		/* the repository's credentials, as the broker uses them */
		char **remote_env =
		    perimeter_remote_env(c->perimeter, repo.name, repo.url, mirror);
		r = mirror && quarantine
			? review_push(quarantine, session_id, commit, repo.url,
				      remote_env, &push, &perr)
			: -ENOMEM;
		broker_env_free(remote_env);
	}
	if (changed && r < 0) {
		char why[1024];
		snprintf(why, sizeof(why), "push failed: %s",
			 perr && perr->msg ? perr->msg : "failed");
		json_object_set_new(outcome, "push",
				    json_pack("{s:s}", "error", why));
		perimeter_audit_push(c->perimeter, session_id, user, NULL, why);
		transition_outcome(c, NULL, session_id, SESSION_APPROVED,
				   SESSION_FAILED, outcome, why, NULL);
	} else {
		perimeter_audit_push(c->perimeter, session_id, user, push, NULL);
		json_object_set_new(outcome, "push", push);
		push = NULL;
		const struct forge_config *fc = forge_of(c, repo.name);
		if (changed && fc) {
			open_pull_request(fc, &s, session_id, user, outcome);
			/* an irreversible external action: audited */
			json_t *pr = json_object_get(outcome, "pull_request");
			perimeter_audit(c->perimeter, session_id, "system", "pull_request",
				      json_pack("{s:s, s:s, s:O?}", "repo",
						fc->repo, "approved_by", user,
						"pull_request", pr));
		}
		if (changed)
			transition_outcome(c, NULL, session_id,
					   SESSION_APPROVED, SESSION_PUSHED,
					   outcome, "", NULL);
		else {
			/* approved, nothing to push: it stays approved */
			struct store_session_update upd =
			    STORE_SESSION_UPDATE_INIT;
			char *text = json_dumps(outcome, JSON_COMPACT);
			upd.outcome_json = text;
			c->st->ops->session_update(c->st, session_id, &upd,
						   NULL);
			free(text);
		}
	}
	json_decref(push);
	wr_error_free(perr);
	store_repo_clear(&repo);
	json_decref(outcome);
	store_session_clear(&s);
	control_notify(c);
	return 0;
}

int control_reject(struct control *c, const char *session_id, const char *user,
		   const char *reason, struct wr_error **err)
{
	struct store_session s;
	json_t *outcome = NULL;
	int r = load_review(c, session_id, &s, &outcome, err);
	if (r < 0)
		return r;
	int64_t now = store_now_ms();
	json_object_set_new(
	    outcome, "decision",
	    json_pack("{s:s, s:s, s:I, s:I, s:s?}", "decision", "rejected",
		      "by", user, "at_ms", (json_int_t)now, "review_ms",
		      (json_int_t)(now - s.finished_ms), "reason", reason));
	int64_t t = transition_outcome(c, user, session_id, SESSION_REVIEW,
				       SESSION_REJECTED, outcome,
				       reason ? reason : "rejected", err);
	json_decref(outcome);
	store_session_clear(&s);
	if (t < 0)
		return (int)t;
	perimeter_audit_decision(c->perimeter, session_id, user, "rejected", reason);
	release_run(c, session_id);
	return 0;
}

json_t *control_stats(struct control *c)
{
	int64_t counts[SESSION_STATE_MAX] = {0};
	c->st->ops->session_count(c->st, counts, NULL);
	json_t *by_state = json_object();
	for (int i = 0; i < SESSION_STATE_MAX; i++)
		json_object_set_new(by_state,
				    session_state_name((enum session_state)i),
				    json_integer(counts[i]));
	/* walk every session's record, newest first, page by page */
	long long sessions = 0, verified = 0, first_pass = 0, final_pass = 0;
	long long decided = 0, accepted = 0, rejected = 0;
	double review_ms = 0, cost = 0, sandbox_s = 0;
	long long prompt_tokens = 0, completion_tokens = 0;
	char before[STORE_ID_MAX] = "";
	for (;;) {
		struct store_session_filter f = {.state = -1,
						 .limit = 500,
						 .before_id =
						     before[0] ? before : NULL};
		struct store_session *v = NULL;
		size_t n = 0;
		if (c->st->ops->session_list(c->st, &f, &v, &n, NULL) < 0 ||
		    n == 0)
			break;
		for (size_t i = 0; i < n; i++) {
			sessions++;
			json_t *o = v[i].outcome_json
					? json_loads(v[i].outcome_json, 0, NULL)
					: NULL;
			json_t *vr = json_object_get(o, "verify");
			if (vr) {
				verified++;
				first_pass += json_is_true(json_object_get(
				    vr, "first_attempt_passed"));
				final_pass +=
				    json_is_true(json_object_get(vr, "passed"));
			}
			json_t *u = json_object_get(o, "usage");
			cost += json_number_value(json_object_get(u, "cost"));
			prompt_tokens += json_integer_value(
			    json_object_get(u, "prompt_tokens"));
			completion_tokens += json_integer_value(
			    json_object_get(u, "completion_tokens"));
			json_t *d = json_object_get(o, "decision");
			if (d) {
				decided++;
				review_ms += (double)json_integer_value(
				    json_object_get(d, "review_ms"));
				const char *what = json_string_value(
				    json_object_get(d, "decision"));
				if (what && !strcmp(what, "approved"))
					accepted++;
				else
					rejected++;
			}
			json_decref(o);
		}
		snprintf(before, sizeof(before), "%s", v[n - 1].id);
		store_sessions_free(v, n);
		if (n < 500)
			break;
	}
	pthread_mutex_lock(&c->metrics_mu);
	sandbox_s = c->m.sandbox_seconds;
	pthread_mutex_unlock(&c->metrics_mu);
	double review_min = review_ms / 60000.0;
	return json_pack(
	    "{s:I, s:o, s:{s:I, s:o?, s:o?}, s:{s:I, s:I, s:f}, s:f, "
	    "s:{s:I, s:I, s:I, s:f, s:o?}, s:o?, s:o?}",
	    "sessions", (json_int_t)sessions, "by_state", by_state, "verify",
	    "sessions", (json_int_t)verified, "first_attempt_pass_rate",
	    verified ? json_real((double)first_pass / verified) : NULL,
	    "final_pass_rate",
	    verified ? json_real((double)final_pass / verified) : NULL, "model",
	    "prompt_tokens", (json_int_t)prompt_tokens, "completion_tokens",
	    (json_int_t)completion_tokens, "cost", cost, "sandbox_seconds",
	    sandbox_s, "review", "decided", (json_int_t)decided, "accepted",
	    (json_int_t)accepted, "rejected", (json_int_t)rejected,
	    "reviewer_minutes", review_min, "mean_minutes_to_decision",
	    decided ? json_real(review_min / decided) : NULL,
	    "accepted_per_reviewer_minute",
	    review_min > 0 ? json_real(accepted / review_min) : NULL,
	    "cost_per_accepted_change",
	    accepted ? json_real(cost / accepted) : NULL);
}
