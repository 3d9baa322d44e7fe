/* sqlite_schema.c - every SQL text of the SQLite backend: the migrations
 * and the statements.
 *
 * The table definitions stay portable to PostgreSQL: TEXT, INTEGER and
 * BIGINT columns, plain PRIMARY KEY / UNIQUE / REFERENCES constraints, no
 * WITHOUT ROWID, no AUTOINCREMENT, and no reserved words as column names
 * ("user" is user_name, "commit" is commit_id). The one SQLite reading of a
 * portable definition is messages.id: INTEGER PRIMARY KEY is SQLite's rowid
 * (an increasing id); PostgreSQL will spell it BIGINT GENERATED ALWAYS AS
 * IDENTITY. The statements use RETURNING (SQLite >= 3.35, PostgreSQL) and
 * row values; only BEGIN IMMEDIATE is SQLite's own.
 *
 * Migrations are append-only: a released entry never changes, a schema
 * change is a new entry. sqlite.c applies each pending one in its own
 * transaction and records it in schema_version. */
#include "store/sqlite_internal.h"

#include <stdio.h>

const struct sq_migration sq_migrations[] = {
    {1, "CREATE TABLE tokens ("
	"  hash TEXT PRIMARY KEY,"
	"  user_name TEXT NOT NULL,"
	"  role TEXT NOT NULL,"
	"  created_ms BIGINT NOT NULL,"
	"  expires_ms BIGINT NOT NULL DEFAULT 0"
	");"
	"CREATE TABLE repositories ("
	"  id TEXT PRIMARY KEY,"
	"  name TEXT NOT NULL UNIQUE,"
	"  url TEXT NOT NULL,"
	"  default_ref TEXT,"
	"  agent_json TEXT,"
	"  refresh_ms BIGINT NOT NULL DEFAULT 0,"
	"  created_ms BIGINT NOT NULL,"
	"  last_refresh_ms BIGINT NOT NULL DEFAULT 0"
	");"
	"CREATE TABLE snapshots ("
	"  id TEXT PRIMARY KEY,"
	"  repo_id TEXT NOT NULL REFERENCES repositories (id),"
	"  commit_id TEXT NOT NULL,"
	"  created_ms BIGINT NOT NULL,"
	"  timings_json TEXT"
	");"
	"CREATE INDEX snapshots_by_repo ON snapshots (repo_id, created_ms);"
	"CREATE INDEX snapshots_by_created ON snapshots (created_ms);"
	/* named counters: queue_seq orders the FIFO of queued sessions */
	"CREATE TABLE counters ("
	"  name TEXT PRIMARY KEY,"
	"  value BIGINT NOT NULL"
	");"
	"INSERT INTO counters (name, value) VALUES ('queue_seq', 0);"
	"CREATE TABLE sessions ("
	"  id TEXT PRIMARY KEY,"
	"  repo_id TEXT NOT NULL REFERENCES repositories (id),"
	"  user_name TEXT NOT NULL,"
	"  prompt TEXT NOT NULL,"
	"  ref TEXT,"
	"  agent_json TEXT,"
	"  limits_json TEXT,"
	"  state TEXT NOT NULL,"
	"  reason TEXT,"
	"  snapshot_id TEXT,"
	"  sandbox TEXT,"
	"  outcome_json TEXT,"
	"  attempts INTEGER NOT NULL DEFAULT 0,"
	"  turns INTEGER NOT NULL DEFAULT 0,"
	"  exit_code INTEGER NOT NULL DEFAULT -1,"
	"  queue_seq BIGINT NOT NULL,"
	"  created_ms BIGINT NOT NULL,"
	"  updated_ms BIGINT NOT NULL,"
	"  started_ms BIGINT NOT NULL DEFAULT 0,"
	"  finished_ms BIGINT NOT NULL DEFAULT 0,"
	/* the seq of the session's newest event: the next one is +1,
	 * taken inside the write transaction that inserts it */
	"  last_event_seq BIGINT NOT NULL DEFAULT 0"
	");"
	"CREATE INDEX sessions_by_state ON sessions (state, queue_seq);"
	/* the API's newest-first list of one state */
	"CREATE INDEX sessions_by_state_created ON sessions "
	"  (state, created_ms, id);"
	"CREATE INDEX sessions_by_user ON sessions (user_name, created_ms, id);"
	"CREATE INDEX sessions_by_repo ON sessions (repo_id, created_ms, id);"
	"CREATE INDEX sessions_by_created ON sessions (created_ms, id);"
	"CREATE TABLE messages ("
	"  id INTEGER PRIMARY KEY,"
	"  session_id TEXT NOT NULL REFERENCES sessions (id),"
	"  user_name TEXT NOT NULL,"
	"  text TEXT NOT NULL,"
	"  turn INTEGER NOT NULL DEFAULT 0,"
	"  created_ms BIGINT NOT NULL"
	");"
	"CREATE INDEX messages_by_session ON messages (session_id, turn, id);"
	"CREATE TABLE events ("
	"  session_id TEXT NOT NULL REFERENCES sessions (id),"
	"  seq BIGINT NOT NULL,"
	"  time_ms BIGINT NOT NULL,"
	"  kind TEXT NOT NULL,"
	"  data TEXT NOT NULL,"
	"  PRIMARY KEY (session_id, seq)"
	");"
	"CREATE TABLE artifacts ("
	"  session_id TEXT NOT NULL REFERENCES sessions (id),"
	"  name TEXT NOT NULL,"
	"  path TEXT NOT NULL,"
	"  media_type TEXT,"
	"  size BIGINT NOT NULL,"
	"  created_ms BIGINT NOT NULL,"
	"  PRIMARY KEY (session_id, name)"
	");"},
    /* Tokens get a unique name (what `warren token revoke` takes), a
     * revocation time and a last use. Tokens from before are named: the
     * oldest admin/admin one (the first start's) "admin", the others their
     * user (with the two characters a user may have and a name may not
     * replaced) and 24 hex digits of their hash. */
    {2, "ALTER TABLE tokens ADD COLUMN name TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE tokens ADD COLUMN revoked_ms BIGINT NOT NULL DEFAULT 0;"
	"ALTER TABLE tokens ADD COLUMN last_used_ms BIGINT NOT NULL "
	"  DEFAULT 0;"
	"UPDATE tokens SET name = 'admin' WHERE hash = ("
	"  SELECT hash FROM tokens WHERE user_name = 'admin' "
	"  AND role = 'admin' ORDER BY created_ms, hash LIMIT 1);"
	"UPDATE tokens SET name = "
	"  substr(replace(replace(user_name, '@', '_'), '+', '_'), 1, 39) "
	"  || '-' || substr(hash, 1, 24) WHERE name = '';"
	"CREATE UNIQUE INDEX tokens_by_name ON tokens (name);"},
    /* Slack (notify/slack.h). slack_posts is the outbox of what Warren
     * posts: replies, and a session's outcome each time it rests in
     * another state (done_ms is set once nothing more will be posted);
     * its id is an INTEGER PRIMARY KEY as messages.id. slack_events holds
     * the event ids of the Events API deliveries handled, so that Slack's
     * retries of one start nothing twice. */
    {3, "CREATE TABLE slack_posts ("
	"  id INTEGER PRIMARY KEY,"
	"  session_id TEXT REFERENCES sessions (id),"
	"  kind TEXT NOT NULL,"
	"  channel TEXT,"
	"  thread_ts TEXT,"
	"  response_url TEXT,"
	"  slack_user TEXT,"
	"  text TEXT,"
	"  posted_state TEXT,"
	"  attempts INTEGER NOT NULL DEFAULT 0,"
	"  created_ms BIGINT NOT NULL,"
	"  next_ms BIGINT NOT NULL DEFAULT 0,"
	"  done_ms BIGINT NOT NULL DEFAULT 0,"
	"  last_error TEXT"
	");"
	"CREATE INDEX slack_posts_due ON slack_posts (done_ms, next_ms);"
	"CREATE INDEX slack_posts_by_session ON slack_posts (session_id, id);"
	"CREATE TABLE slack_events ("
	"  event_id TEXT PRIMARY KEY,"
	"  received_ms BIGINT NOT NULL"
	");"
	"CREATE INDEX slack_events_by_time ON slack_events (received_ms);"},
    /* A repository can be removed (`warren repo rm`): its row stays for
     * its sessions' history, marked, its name freed (name~id: '~' is in
     * no name a repository may have). */
    {4, "ALTER TABLE repositories ADD COLUMN removed_ms BIGINT NOT NULL "
	"  DEFAULT 0;"},
    /* Workers on many hosts (store.h, "Leases"): a session's lease is
     * the worker holding it, the fencing token (lease_epoch: each claim
     * and each reap advances it) and when it runs out (NULL when not
     * held); workers lists the workers, stopped_ms NULL while one
     * runs. */
    {5, "ALTER TABLE sessions ADD COLUMN worker_id TEXT;"
	"ALTER TABLE sessions ADD COLUMN lease_epoch INTEGER NOT NULL "
	"  DEFAULT 0;"
	"ALTER TABLE sessions ADD COLUMN lease_expires_ms BIGINT;"
	/* a worker's leases (renew), the leases that run out (reap) */
	"CREATE INDEX sessions_by_worker ON sessions (worker_id, id);"
	"CREATE INDEX sessions_by_lease ON sessions (lease_expires_ms) "
	"  WHERE worker_id IS NOT NULL;"
	"CREATE TABLE workers ("
	"  id TEXT PRIMARY KEY,"
	"  host TEXT,"
	"  started_ms BIGINT NOT NULL,"
	"  heartbeat_ms BIGINT NOT NULL,"
	"  max_sandboxes INTEGER NOT NULL DEFAULT 0,"
	"  stopped_ms BIGINT"
	");"},
    /* The snapshot builds waiting for a refresh worker, oldest first:
     * in the store, so that a restart (or another server) finds them. */
    {6, "CREATE TABLE build_queue ("
	"  repo_id TEXT PRIMARY KEY,"
	"  queued_ms BIGINT NOT NULL"
	");"
	"CREATE INDEX build_queue_by_age ON build_queue (queued_ms, repo_id);"},
    /* Evals (docs/eval.md): the runs `warren eval run` publishes, their
     * attempts, and blind review batches over the resolved changes, each
     * item's verdict and review time. The runs' and attempts' objects are
     * the client's JSON, as text. */
    {7, "CREATE TABLE eval_runs ("
	"  id TEXT PRIMARY KEY,"
	"  user_name TEXT NOT NULL,"
	"  run_json TEXT NOT NULL,"
	"  created_ms BIGINT NOT NULL,"
	"  updated_ms BIGINT NOT NULL"
	");"
	"CREATE INDEX eval_runs_by_age ON eval_runs (created_ms, id);"
	"CREATE TABLE eval_attempts ("
	"  run_id TEXT NOT NULL REFERENCES eval_runs(id),"
	"  name TEXT NOT NULL,"
	"  attempt_json TEXT NOT NULL,"
	"  updated_ms BIGINT NOT NULL,"
	"  PRIMARY KEY (run_id, name)"
	");"
	"CREATE TABLE eval_batches ("
	"  id TEXT PRIMARY KEY,"
	"  user_name TEXT NOT NULL,"
	"  runs_json TEXT NOT NULL,"
	"  created_ms BIGINT NOT NULL"
	");"
	"CREATE TABLE eval_items ("
	"  batch_id TEXT NOT NULL REFERENCES eval_batches(id),"
	"  item TEXT NOT NULL,"
	"  pos INTEGER NOT NULL,"
	"  run_id TEXT NOT NULL,"
	"  attempt TEXT NOT NULL,"
	"  session_id TEXT NOT NULL,"
	"  prompt TEXT NOT NULL,"
	"  verdict TEXT,"
	"  reviewer TEXT,"
	"  review_ms BIGINT,"
	"  shown_ms BIGINT,"
	"  decided_ms BIGINT,"
	"  PRIMARY KEY (batch_id, item)"
	");"
	"CREATE INDEX eval_items_by_run ON eval_items (run_id);"},
    /* Each session's audit chain (security/audit.h), in the store so
     * that any host reads it: one row per record, its canonical text as
     * the chain hashed it, seq and hash beside it for the next append's
     * head. The primary key is the chain's order: two appenders cannot
     * both write a seq. */
    {8, "CREATE TABLE audit_records ("
	"  session_id TEXT NOT NULL REFERENCES sessions (id),"
	"  seq BIGINT NOT NULL,"
	"  hash TEXT NOT NULL,"
	"  record TEXT NOT NULL,"
	"  PRIMARY KEY (session_id, seq)"
	");"},
    /* Secrets' files (security/secrets_store.c), so that every server's
     * data directory holds the same ones: the bytes of DATA/secrets/
     * NAME.enc as base64 (ciphertext only: the key stays on the hosts),
     * the text of NAME.repos; a deleted secret a tombstone (file '',
     * deleted_ms) so that every host's copy goes too. */
    {9, "CREATE TABLE secrets ("
	"  name TEXT PRIMARY KEY,"
	"  file TEXT NOT NULL,"
	"  repos TEXT,"
	"  updated_ms BIGINT NOT NULL,"
	"  deleted_ms BIGINT"
	");"},
    /* Who builds a repository's snapshot now, among the workers sharing
     * the store: one claim per repository, with a lease like a
     * session's (renewed with the worker's leases), so that a first
     * build is one build whichever workers the sessions reach. */
    {10, "CREATE TABLE build_claims ("
	"  repo_id TEXT PRIMARY KEY,"
	"  worker TEXT NOT NULL,"
	"  expires_ms BIGINT NOT NULL"
	");"},
};
const size_t sq_n_migrations = sizeof(sq_migrations) / sizeof(sq_migrations[0]);

/* the columns of each record, and the states as SQL: backend.h */
static const char *const stmt_sql[SQ_SESSION_LIST] = {
    [SQ_BEGIN] = "BEGIN",
    [SQ_BEGIN_IMMEDIATE] = "BEGIN IMMEDIATE",
    [SQ_COMMIT] = "COMMIT",
    [SQ_ROLLBACK] = "ROLLBACK",

    [SQ_TOKEN_ADD] = "INSERT INTO tokens (hash, user_name, role, created_ms, "
		     "expires_ms, name) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [SQ_TOKEN_LOOKUP] = "SELECT " STORE_TOKEN_COLUMNS " FROM tokens "
			"WHERE hash = ?1 AND revoked_ms = 0 "
			"AND (expires_ms = 0 OR expires_ms > ?2)",
    [SQ_TOKEN_COUNT] = "SELECT COUNT(*) FROM tokens",
    [SQ_TOKEN_LIST] = "SELECT " STORE_TOKEN_COLUMNS " FROM tokens "
		      "ORDER BY created_ms, name",
    /* the first revocation's time stays */
    [SQ_TOKEN_REVOKE] = "UPDATE tokens SET revoked_ms = CASE "
			"WHEN revoked_ms = 0 THEN ?2 ELSE revoked_ms END "
			"WHERE name = ?1 RETURNING revoked_ms",
    [SQ_TOKEN_TOUCH] = "UPDATE tokens SET last_used_ms = ?2 WHERE hash = ?1",

    [SQ_REPO_ADD] = "INSERT INTO repositories (" STORE_REPO_COLUMNS ") "
		    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    /* an id match wins over a name match */
    /* (a removed repository by its id only: its sessions' history) */
    [SQ_REPO_GET] = "SELECT " STORE_REPO_COLUMNS " FROM repositories "
		    "WHERE id = ?1 OR (name = ?1 AND removed_ms = 0) "
		    "ORDER BY CASE WHEN id = ?1 THEN 0 ELSE 1 END LIMIT 1",
    [SQ_REPO_LIST] = "SELECT " STORE_REPO_COLUMNS " FROM repositories "
		     "WHERE removed_ms = 0 ORDER BY name",
    [SQ_REPO_UPDATE] = "UPDATE repositories SET url = ?2, default_ref = ?3, "
		       "agent_json = ?4, refresh_ms = ?5 "
		       "WHERE id = ?1 AND removed_ms = 0",
    /* only when none of its sessions may still need it */
    [SQ_REPO_REMOVE] =
	"UPDATE repositories SET removed_ms = ?2, name = name || '~' || id "
	"WHERE id = ?1 AND removed_ms = 0 AND NOT EXISTS (SELECT 1 FROM "
	"sessions WHERE repo_id = ?1 AND state NOT IN " STORE_TERMINAL_STATES
	")",
    [SQ_REPO_ACTIVE] = "SELECT COUNT(*) FROM sessions WHERE repo_id = ?1 "
		       "AND state NOT IN " STORE_TERMINAL_STATES,
    [SQ_BUILD_ENQUEUE] = "INSERT INTO build_queue (repo_id, queued_ms) "
			 "VALUES (?1, ?2) ON CONFLICT (repo_id) DO NOTHING",
    [SQ_BUILD_DEQUEUE] = "DELETE FROM build_queue WHERE repo_id = "
			 "(SELECT repo_id FROM build_queue ORDER BY "
			 "queued_ms, repo_id LIMIT 1) RETURNING repo_id",
    [SQ_BUILD_UNQUEUE] = "DELETE FROM build_queue WHERE repo_id = ?1",
    [SQ_BUILD_QUEUE_LIST] = "SELECT repo_id FROM build_queue ORDER BY "
			    "queued_ms, repo_id",
    /* free, run out, or the claimer's already: ?3 now, ?4 its end */
    [SQ_BUILD_CLAIM] = "INSERT INTO build_claims (repo_id, worker, "
		       "expires_ms) VALUES (?1, ?2, ?4) "
		       "ON CONFLICT (repo_id) DO UPDATE SET worker = "
		       "excluded.worker, expires_ms = excluded.expires_ms "
		       "WHERE build_claims.worker = excluded.worker "
		       "OR build_claims.expires_ms < ?3 RETURNING worker",
    [SQ_BUILD_CLAIM_HOLDER] = "SELECT worker FROM build_claims "
			      "WHERE repo_id = ?1",
    [SQ_BUILD_RELEASE] = "DELETE FROM build_claims WHERE repo_id = ?1 "
			 "AND worker = ?2",
    /* with the worker's session leases (lease_renew), as they are */
    [SQ_BUILD_CLAIM_RENEW] = "UPDATE build_claims SET expires_ms = ?3 "
			     "WHERE worker = ?1 AND expires_ms >= ?2",
    /* a stopped worker's claims end when it stops (worker_stop) */
    [SQ_BUILD_CLAIM_EXPIRE] = "UPDATE build_claims SET expires_ms = ?2 - 1 "
			      "WHERE worker = ?1 AND expires_ms >= ?2",
    [SQ_EVAL_RUN_PUT] = "INSERT INTO eval_runs (id, user_name, run_json, "
			   "created_ms, updated_ms) VALUES (?1, ?2, ?3, ?4, ?4) "
			   "ON CONFLICT (id) DO UPDATE SET run_json = "
			   "excluded.run_json, updated_ms = excluded.updated_ms",
    [SQ_EVAL_RUN_GET] = "SELECT " STORE_EVAL_RUN_COLUMNS
			   " FROM eval_runs WHERE id = ?1",
    [SQ_EVAL_RUN_LIST] = "SELECT " STORE_EVAL_RUN_COLUMNS
			    " FROM eval_runs ORDER BY created_ms DESC, id DESC "
			    "LIMIT " STORE_STRINGIFY(STORE_LIST_MAX),
    [SQ_EVAL_ATTEMPT_PUT] = "INSERT INTO eval_attempts (run_id, name, "
			       "attempt_json, updated_ms) VALUES (?1, ?2, ?3, ?4) "
			       "ON CONFLICT (run_id, name) DO UPDATE SET "
			       "attempt_json = excluded.attempt_json, "
			       "updated_ms = excluded.updated_ms",
    [SQ_EVAL_ATTEMPT_LIST] = "SELECT " STORE_EVAL_ATTEMPT_COLUMNS
				" FROM eval_attempts WHERE run_id = ?1 ORDER BY name",
    [SQ_EVAL_BATCH_ADD] = "INSERT INTO eval_batches (id, user_name, "
			     "runs_json, created_ms) VALUES (?1, ?2, ?3, ?4)",
    [SQ_EVAL_ITEM_ADD] = "INSERT INTO eval_items (batch_id, item, pos, "
			    "run_id, attempt, session_id, prompt) VALUES "
			    "(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [SQ_EVAL_BATCH_GET] = "SELECT " STORE_EVAL_BATCH_COLUMNS
			     " FROM eval_batches WHERE id = ?1",
    [SQ_EVAL_BATCH_LIST] = "SELECT " STORE_EVAL_BATCH_COLUMNS
			      " FROM eval_batches ORDER BY created_ms DESC, "
			      "id DESC LIMIT " STORE_STRINGIFY(STORE_LIST_MAX),
    [SQ_EVAL_ITEMS_BATCH] = "SELECT " STORE_EVAL_ITEM_COLUMNS
			       " FROM eval_items WHERE batch_id = ?1 ORDER BY pos",
    [SQ_EVAL_ITEMS_RUN] = "SELECT " STORE_EVAL_ITEM_COLUMNS
			     " FROM eval_items WHERE run_id = ?1 ORDER BY "
			     "batch_id, pos",
    [SQ_EVAL_ITEM_GET] = "SELECT " STORE_EVAL_ITEM_COLUMNS
			    " FROM eval_items WHERE batch_id = ?1 AND item = ?2",
    [SQ_EVAL_ITEM_SHOW] = "UPDATE eval_items SET shown_ms = "
			     "COALESCE(shown_ms, ?3) WHERE batch_id = ?1 AND item = ?2",
    [SQ_EVAL_ITEM_DECIDE] = "UPDATE eval_items SET verdict = ?3, reviewer = ?4, "
			       "review_ms = ?5, decided_ms = ?6 WHERE batch_id = ?1 "
			       "AND item = ?2 AND verdict IS NULL",
    [SQ_REPO_SET_REFRESHED] = "UPDATE repositories SET last_refresh_ms = ?2 "
			      "WHERE id = ?1",

    [SQ_SNAPSHOT_ADD] = "INSERT INTO snapshots (" STORE_SNAPSHOT_COLUMNS ") "
			"VALUES (?1, ?2, ?3, ?4, ?5)",
    [SQ_SNAPSHOT_LATEST] = "SELECT " STORE_SNAPSHOT_COLUMNS " FROM snapshots "
			   "WHERE repo_id = ?1 "
			   "ORDER BY created_ms DESC, id DESC LIMIT 1",
    [SQ_SNAPSHOT_LIST_REPO] =
	"SELECT " STORE_SNAPSHOT_COLUMNS " FROM snapshots "
	"WHERE repo_id = ?1 "
	"ORDER BY created_ms DESC, id DESC",
    [SQ_SNAPSHOT_LIST_ALL] = "SELECT " STORE_SNAPSHOT_COLUMNS " FROM snapshots "
			     "ORDER BY created_ms DESC, id DESC",

    [SQ_QUEUE_SEQ_NEXT] = "UPDATE counters SET value = value + 1 "
			  "WHERE name = 'queue_seq' RETURNING value",

    [SQ_SESSION_INSERT] =
	"INSERT INTO sessions (id, repo_id, user_name, prompt, ref, "
	"agent_json, limits_json, state, queue_seq, created_ms, updated_ms) "
	"VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10)",
    [SQ_SESSION_GET] = "SELECT " STORE_SESSION_COLUMNS " FROM sessions "
		       "WHERE id = ?1",
    [SQ_SESSION_STATE] = "SELECT state, lease_epoch FROM sessions "
			 "WHERE id = ?1",
    [SQ_SESSION_EXISTS] = "SELECT 1 FROM sessions WHERE id = ?1",
    [SQ_SESSION_CREATED] = "SELECT created_ms FROM sessions WHERE id = ?1",
    [SQ_SESSION_LIST_STATE] = "SELECT " STORE_SESSION_COLUMNS " FROM sessions "
			      "WHERE state = ?1 ORDER BY queue_seq",
    [SQ_SESSION_COUNT] = "SELECT state, COUNT(*) FROM sessions "
			 "GROUP BY state",
    /* NULL parameters keep the column; '' clears the text ones */
    [SQ_SESSION_APPLY] =
	"UPDATE sessions SET "
	"state = COALESCE(?2, state), "
	"reason = CASE WHEN ?3 IS NULL THEN reason ELSE NULLIF(?3, '') END, "
	"snapshot_id = CASE WHEN ?4 IS NULL THEN snapshot_id "
	"  ELSE NULLIF(?4, '') END, "
	"sandbox = CASE WHEN ?5 IS NULL THEN sandbox ELSE NULLIF(?5, '') END, "
	"outcome_json = COALESCE(?6, outcome_json), "
	"attempts = COALESCE(?7, attempts), "
	"turns = COALESCE(?8, turns), "
	"exit_code = COALESCE(?9, exit_code), "
	"queue_seq = COALESCE(?10, queue_seq), "
	"started_ms = COALESCE(?11, started_ms), "
	"finished_ms = COALESCE(?12, finished_ms), "
	"updated_ms = ?13 "
	"WHERE id = ?1",

    [SQ_EVENT_NEXT_SEQ] = "UPDATE sessions SET last_event_seq = "
			  "last_event_seq + 1 WHERE id = ?1 "
			  "RETURNING last_event_seq",
    [SQ_EVENT_INSERT] = "INSERT INTO events (session_id, seq, time_ms, kind, "
			"data) VALUES (?1, ?2, ?3, ?4, ?5)",
    [SQ_EVENT_LIST] = "SELECT " STORE_EVENT_COLUMNS " FROM events "
		      "WHERE session_id = ?1 AND seq > ?2 "
		      "ORDER BY seq LIMIT ?3",

    [SQ_AUDIT_HEAD] = "SELECT seq, hash FROM audit_records "
		      "WHERE session_id = ?1 ORDER BY seq DESC LIMIT 1",
    [SQ_AUDIT_INSERT] = "INSERT INTO audit_records (session_id, seq, hash, "
			"record) VALUES (?1, ?2, ?3, ?4)",
    [SQ_AUDIT_LIST] = "SELECT seq, hash, record FROM audit_records "
		      "WHERE session_id = ?1 AND seq > ?2 "
		      "ORDER BY seq LIMIT ?3",

    [SQ_MESSAGE_INSERT] = "INSERT INTO messages (session_id, user_name, "
			  "text, turn, created_ms) "
			  "VALUES (?1, ?2, ?3, 0, ?4) RETURNING id",
    [SQ_MESSAGE_PENDING] = "SELECT " STORE_MESSAGE_COLUMNS " "
			   "FROM messages WHERE session_id = ?1 AND turn = 0 "
			   "ORDER BY id",
    [SQ_MESSAGE_CONSUME] = "UPDATE messages SET turn = ?2 "
			   "WHERE id = ?1 AND turn = 0",
    [SQ_MESSAGE_EXISTS] = "SELECT 1 FROM messages WHERE id = ?1",

    /* a worker that starts again under its id runs again */
    [SQ_WORKER_REGISTER] =
	"INSERT INTO workers (id, host, started_ms, heartbeat_ms, "
	"max_sandboxes, stopped_ms) VALUES (?1, ?2, ?3, ?3, ?4, NULL) "
	"ON CONFLICT (id) DO UPDATE SET host = excluded.host, "
	"started_ms = excluded.started_ms, heartbeat_ms = "
	"excluded.heartbeat_ms, max_sandboxes = excluded.max_sandboxes, "
	"stopped_ms = NULL",
    [SQ_WORKER_STOP] = "UPDATE workers SET stopped_ms = "
		       "COALESCE(stopped_ms, ?2) WHERE id = ?1",
    /* a stopped worker's leases end when it stops */
    [SQ_WORKER_EXPIRE] = "UPDATE sessions SET lease_expires_ms = ?2 - 1 "
			 "WHERE worker_id = ?1 AND lease_expires_ms >= ?2",
    [SQ_WORKER_LIST] = "SELECT " STORE_WORKER_COLUMNS " FROM workers "
		       "ORDER BY started_ms, id",
    [SQ_WORKER_GET] = "SELECT stopped_ms FROM workers WHERE id = ?1",
    [SQ_WORKER_HEARTBEAT] = "UPDATE workers SET heartbeat_ms = ?2 "
			    "WHERE id = ?1 RETURNING stopped_ms",
    /* the queue as claims see it: oldest first, no live lease */
    [SQ_CLAIM_QUEUED] = "SELECT " STORE_CLAIM_COLUMNS " FROM sessions "
			"WHERE state = 'queued' AND (worker_id IS NULL OR "
			"lease_expires_ms < ?1) "
			"ORDER BY created_ms, id LIMIT ?2",
    [SQ_CLAIM_ONE] = "SELECT state, worker_id, lease_expires_ms "
		     "FROM sessions WHERE id = ?1",
    /* ?4: 1 for a new lease, 0 to extend the holder's */
    [SQ_LEASE_TAKE] = "UPDATE sessions SET worker_id = ?2, "
		      "lease_expires_ms = ?3, lease_epoch = lease_epoch + ?4 "
		      "WHERE id = ?1 RETURNING " STORE_CLAIM_COLUMNS,
    [SQ_LEASE_RENEW] = "UPDATE sessions SET lease_expires_ms = ?3 "
		       "WHERE worker_id = ?1 AND lease_expires_ms >= ?2",
    [SQ_LEASE_HELD] = "SELECT " STORE_CLAIM_COLUMNS " FROM sessions "
		      "WHERE worker_id = ?1 AND lease_expires_ms >= ?2 "
		      "ORDER BY id",
    [SQ_LEASE_EXPIRED] =
	"SELECT " STORE_CLAIM_COLUMNS " FROM sessions "
	"WHERE worker_id IS NOT NULL AND lease_expires_ms < ?1 "
	"AND state NOT IN " STORE_TERMINAL_STATES " "
	"ORDER BY lease_expires_ms, id LIMIT ?2",
    /* ?2: 1 for a reap (the epoch advances), 0 at a terminal state */
    [SQ_LEASE_END] = "UPDATE sessions SET worker_id = NULL, "
		     "lease_expires_ms = NULL, lease_epoch = lease_epoch + ?2 "
		     "WHERE id = ?1 RETURNING lease_epoch",

    [SQ_ARTIFACT_ADD] = "INSERT INTO artifacts (session_id, name, path, "
			"media_type, size, created_ms) "
			"VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [SQ_ARTIFACT_LIST] = "SELECT " STORE_ARTIFACT_COLUMNS " "
			 "FROM artifacts WHERE session_id = ?1 ORDER BY name",

    [SQ_SLACK_POST_INSERT] =
	"INSERT INTO slack_posts (session_id, kind, channel, thread_ts, "
	"response_url, slack_user, text, created_ms) "
	"VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) RETURNING id",
    /* an outcome is due when its session rests in a state not posted
     * yet, and no reply about the session written before it (the
     * "started" answer) is still to be posted */
    [SQ_SLACK_POST_DUE] =
	"SELECT " STORE_SLACK_POST_COLUMNS " FROM slack_posts "
	"WHERE done_ms = 0 AND next_ms <= ?1 AND (kind <> 'outcome' OR ("
	"EXISTS (SELECT 1 FROM sessions WHERE sessions.id = "
	"slack_posts.session_id AND sessions.state IN " STORE_RESTING_STATES " "
	"AND (slack_posts.posted_state IS NULL OR "
	"slack_posts.posted_state <> sessions.state)) "
	"AND NOT EXISTS (SELECT 1 FROM slack_posts AS earlier WHERE "
	"earlier.session_id = slack_posts.session_id AND "
	"earlier.kind <> 'outcome' AND earlier.id < slack_posts.id AND "
	"earlier.done_ms = 0))) "
	"ORDER BY id LIMIT ?2",
    /* NULL parameters keep the column; '' clears last_error */
    [SQ_SLACK_POST_UPDATE] =
	"UPDATE slack_posts SET "
	"posted_state = COALESCE(?2, posted_state), "
	"attempts = COALESCE(?3, attempts), "
	"next_ms = COALESCE(?4, next_ms), "
	"done_ms = COALESCE(?5, done_ms), "
	"last_error = CASE WHEN ?6 IS NULL THEN last_error "
	"  ELSE NULLIF(?6, '') END "
	"WHERE id = ?1",
    [SQ_SLACK_POST_LIST] =
	"SELECT " STORE_SLACK_POST_COLUMNS " FROM slack_posts "
	"WHERE session_id = ?1 ORDER BY id",
    [SQ_SLACK_EVENT_PRUNE] = "DELETE FROM slack_events WHERE received_ms < ?1",
    [SQ_SLACK_EVENT_INSERT] = "INSERT INTO slack_events (event_id, "
			      "received_ms) VALUES (?1, ?2)",
    [SQ_SLACK_EVENT_DELETE] = "DELETE FROM slack_events WHERE event_id = ?1",
    /* a new name only while the table has room (tombstones count) */
    [SQ_SECRET_PUT] =
	"INSERT INTO secrets (name, file, repos, updated_ms, deleted_ms) "
	"SELECT ?1, ?2, ?3, ?4, NULL WHERE EXISTS (SELECT 1 FROM secrets "
	"WHERE name = ?1) OR (SELECT COUNT(*) FROM secrets) < "
	STORE_STRINGIFY(STORE_SECRETS_MAX) " ON CONFLICT (name) DO UPDATE "
	"SET file = excluded.file, repos = excluded.repos, "
	"updated_ms = excluded.updated_ms, deleted_ms = NULL",
    [SQ_SECRET_DELETE] = "UPDATE secrets SET file = '', repos = NULL, "
			 "updated_ms = ?2, deleted_ms = ?2 "
			 "WHERE name = ?1 AND deleted_ms IS NULL",
    [SQ_SECRET_LIST] = "SELECT name, file, repos, updated_ms, "
		       "COALESCE(deleted_ms, 0) FROM secrets ORDER BY name",
};

/* session_list, newest first, with the filters of the SQ_LIST_* bits:
 * ?1 state, ?2 user, ?3 repo, ?4 ?5 the (created_ms, id) of the page's
 * boundary, ?6 the limit. */
static const char *session_list_sql(unsigned mask, char *buf, size_t len)
{
	int n = snprintf(
	    buf, len,
	    "SELECT " STORE_SESSION_COLUMNS
	    " FROM sessions WHERE 1 = 1%s%s%s%s "
	    "ORDER BY created_ms DESC, id DESC LIMIT ?6",
	    mask & SQ_LIST_STATE ? " AND state = ?1" : "",
	    mask & SQ_LIST_USER ? " AND user_name = ?2" : "",
	    mask & SQ_LIST_REPO ? " AND repo_id = ?3" : "",
	    mask & SQ_LIST_BEFORE ? " AND (created_ms, id) < (?4, ?5)" : "");
	return n > 0 && (size_t)n < len ? buf : NULL;
}

const char *sq_stmt_sql(enum sq_stmt id, char *buf, size_t len)
{
	if (id >= SQ_SESSION_LIST && id < SQ_STMT_MAX)
		return session_list_sql((unsigned)(id - SQ_SESSION_LIST), buf,
					len);
	if ((int)id < 0 || id >= SQ_SESSION_LIST)
		return NULL;
	return stmt_sql[id];
}
