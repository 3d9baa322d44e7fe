/* pg_schema.c - every SQL text of the PostgreSQL backend: the migrations
 * and the statements.
 *
 * The schema is SQLite's (sqlite_schema.c), version for version, in
 * PostgreSQL's dialect where it differs:
 *   - an increasing id (messages.id, slack_posts.id: SQLite's rowid) is
 *     BIGINT GENERATED ALWAYS AS IDENTITY;
 *   - every text column compares and sorts by bytes (COLLATE "C"), as
 *     SQLite's do, whatever the database's locale: lists are in the same
 *     order on both backends, and the page boundary of session_list
 *     (created_ms, id) means the same thing as its ORDER BY.
 * The statements take $1, $2... (PQexecParams, values never in the text),
 * with a cast where PostgreSQL could not infer a parameter's type
 * ("$3::text IS NULL"). An event's seq is taken and its row inserted by one
 * statement (PG_EVENT_APPEND: an UPDATE ... RETURNING in a WITH, then the
 * INSERT), so that an append is one round trip and one transaction.
 *
 * Migrations are append-only, as SQLite's: a released entry never
 * changes. pg.c applies each pending one in its own transaction, under an
 * advisory lock, and records it in schema_version. */
#include "store/pg_internal.h"

#include <stddef.h>

/* a text column that compares as bytes (see above) */
#define C_TEXT "TEXT COLLATE \"C\""

const struct pg_migration pg_migrations[] = {
    {1, "CREATE TABLE tokens ("
	"  hash " C_TEXT " PRIMARY KEY,"
	"  user_name " C_TEXT " NOT NULL,"
	"  role " C_TEXT " NOT NULL,"
	"  created_ms BIGINT NOT NULL,"
	"  expires_ms BIGINT NOT NULL DEFAULT 0"
	");"
	"CREATE TABLE repositories ("
	"  id " C_TEXT " PRIMARY KEY,"
	"  name " C_TEXT " NOT NULL UNIQUE,"
	"  url " C_TEXT " NOT NULL,"
	"  default_ref " C_TEXT ","
	"  agent_json " C_TEXT ","
	"  refresh_ms BIGINT NOT NULL DEFAULT 0,"
	"  created_ms BIGINT NOT NULL,"
	"  last_refresh_ms BIGINT NOT NULL DEFAULT 0"
	");"
	"CREATE TABLE snapshots ("
	"  id " C_TEXT " PRIMARY KEY,"
	"  repo_id " C_TEXT " NOT NULL REFERENCES repositories (id),"
	"  commit_id " C_TEXT " NOT NULL,"
	"  created_ms BIGINT NOT NULL,"
	"  timings_json " C_TEXT ");"
	"CREATE INDEX snapshots_by_repo ON snapshots (repo_id, created_ms);"
	"CREATE INDEX snapshots_by_created ON snapshots (created_ms);"
	/* named counters: queue_seq orders the FIFO of queued sessions */
	"CREATE TABLE counters ("
	"  name " C_TEXT " PRIMARY KEY,"
	"  value BIGINT NOT NULL"
	");"
	"INSERT INTO counters (name, value) VALUES ('queue_seq', 0);"
	"CREATE TABLE sessions ("
	"  id " C_TEXT " PRIMARY KEY,"
	"  repo_id " C_TEXT " NOT NULL REFERENCES repositories (id),"
	"  user_name " C_TEXT " NOT NULL,"
	"  prompt " C_TEXT " NOT NULL,"
	"  ref " C_TEXT ","
	"  agent_json " C_TEXT ","
	"  limits_json " C_TEXT ","
	"  state " C_TEXT " NOT NULL,"
	"  reason " C_TEXT ","
	"  snapshot_id " C_TEXT ","
	"  sandbox " C_TEXT ","
	"  outcome_json " C_TEXT ","
	"  attempts INTEGER NOT NULL DEFAULT 0,"
	"  turns INTEGER NOT NULL DEFAULT 0,"
	"  exit_code INTEGER NOT NULL DEFAULT -1,"
	"  queue_seq BIGINT NOT NULL,"
	"  created_ms BIGINT NOT NULL,"
	"  updated_ms BIGINT NOT NULL,"
	"  started_ms BIGINT NOT NULL DEFAULT 0,"
	"  finished_ms BIGINT NOT NULL DEFAULT 0,"
	/* the seq of the session's newest event: the next one is +1,
	 * taken by the statement that inserts it, under the row's lock */
	"  last_event_seq BIGINT NOT NULL DEFAULT 0"
	");"
	"CREATE INDEX sessions_by_state ON sessions (state, queue_seq);"
	"CREATE INDEX sessions_by_state_created ON sessions "
	"  (state, created_ms, id);"
	"CREATE INDEX sessions_by_user ON sessions (user_name, created_ms, id);"
	"CREATE INDEX sessions_by_repo ON sessions (repo_id, created_ms, id);"
	"CREATE INDEX sessions_by_created ON sessions (created_ms, id);"
	"CREATE TABLE messages ("
	"  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
	"  session_id " C_TEXT " NOT NULL REFERENCES sessions (id),"
	"  user_name " C_TEXT " NOT NULL,"
	"  text " C_TEXT " NOT NULL,"
	"  turn INTEGER NOT NULL DEFAULT 0,"
	"  created_ms BIGINT NOT NULL"
	");"
	"CREATE INDEX messages_by_session ON messages (session_id, turn, id);"
	"CREATE TABLE events ("
	"  session_id " C_TEXT " NOT NULL REFERENCES sessions (id),"
	"  seq BIGINT NOT NULL,"
	"  time_ms BIGINT NOT NULL,"
	"  kind " C_TEXT " NOT NULL,"
	"  data " C_TEXT " NOT NULL,"
	"  PRIMARY KEY (session_id, seq)"
	");"
	"CREATE TABLE artifacts ("
	"  session_id " C_TEXT " NOT NULL REFERENCES sessions (id),"
	"  name " C_TEXT " NOT NULL,"
	"  path " C_TEXT " NOT NULL,"
	"  media_type " C_TEXT ","
	"  size BIGINT NOT NULL,"
	"  created_ms BIGINT NOT NULL,"
	"  PRIMARY KEY (session_id, name)"
	");"},
    /* Tokens get a unique name, a revocation time and a last use; older
     * tokens are named as SQLite's migration 2 names them. */
    {2, "ALTER TABLE tokens ADD COLUMN name " C_TEXT " NOT NULL DEFAULT '';"
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
    /* Slack's outbox and the Events API ids handled (notify/outbox.h). */
    {3, "CREATE TABLE slack_posts ("
	"  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
	"  session_id " C_TEXT " REFERENCES sessions (id),"
	"  kind " C_TEXT " NOT NULL,"
	"  channel " C_TEXT ","
	"  thread_ts " C_TEXT ","
	"  response_url " C_TEXT ","
	"  slack_user " C_TEXT ","
	"  text " C_TEXT ","
	"  posted_state " C_TEXT ","
	"  attempts INTEGER NOT NULL DEFAULT 0,"
	"  created_ms BIGINT NOT NULL,"
	"  next_ms BIGINT NOT NULL DEFAULT 0,"
	"  done_ms BIGINT NOT NULL DEFAULT 0,"
	"  last_error " C_TEXT ");"
	"CREATE INDEX slack_posts_due ON slack_posts (done_ms, next_ms);"
	"CREATE INDEX slack_posts_by_session ON slack_posts (session_id, id);"
	"CREATE TABLE slack_events ("
	"  event_id " C_TEXT " PRIMARY KEY,"
	"  received_ms BIGINT NOT NULL"
	");"
	"CREATE INDEX slack_events_by_time ON slack_events (received_ms);"},
    /* A repository can be removed: its row stays, marked, its name
     * freed (name~id). */
    {4, "ALTER TABLE repositories ADD COLUMN removed_ms BIGINT NOT NULL "
	"  DEFAULT 0;"},
    /* Leases: the worker holding a session, the fencing token, when the
     * lease runs out; the workers (SQLite's migration 5). */
    {5, "ALTER TABLE sessions ADD COLUMN worker_id " C_TEXT ";"
	"ALTER TABLE sessions ADD COLUMN lease_epoch INTEGER NOT NULL "
	"  DEFAULT 0;"
	"ALTER TABLE sessions ADD COLUMN lease_expires_ms BIGINT;"
	"CREATE INDEX sessions_by_worker ON sessions (worker_id, id);"
	"CREATE INDEX sessions_by_lease ON sessions (lease_expires_ms) "
	"  WHERE worker_id IS NOT NULL;"
	"CREATE TABLE workers ("
	"  id " C_TEXT " PRIMARY KEY,"
	"  host " C_TEXT ","
	"  started_ms BIGINT NOT NULL,"
	"  heartbeat_ms BIGINT NOT NULL,"
	"  max_sandboxes INTEGER NOT NULL DEFAULT 0,"
	"  stopped_ms BIGINT"
	");"},
    /* The snapshot builds waiting (SQLite's migration 6). */
    {6, "CREATE TABLE build_queue ("
	"  repo_id " C_TEXT " PRIMARY KEY,"
	"  queued_ms BIGINT NOT NULL"
	");"
	"CREATE INDEX build_queue_by_age ON build_queue (queued_ms, repo_id);"},
    /* Evals (SQLite's migration 7; docs/eval.md): the runs `warren eval run` publishes, their
     * attempts, and blind review batches over the resolved changes, each
     * item's verdict and review time. The runs' and attempts' objects are
     * the client's JSON, as text. */
    {7, "CREATE TABLE eval_runs ("
	"  id " C_TEXT " PRIMARY KEY,"
	"  user_name " C_TEXT " NOT NULL,"
	"  run_json " C_TEXT " NOT NULL,"
	"  created_ms BIGINT NOT NULL,"
	"  updated_ms BIGINT NOT NULL"
	");"
	"CREATE INDEX eval_runs_by_age ON eval_runs (created_ms, id);"
	"CREATE TABLE eval_attempts ("
	"  run_id " C_TEXT " NOT NULL REFERENCES eval_runs(id),"
	"  name " C_TEXT " NOT NULL,"
	"  attempt_json " C_TEXT " NOT NULL,"
	"  updated_ms BIGINT NOT NULL,"
	"  PRIMARY KEY (run_id, name)"
	");"
	"CREATE TABLE eval_batches ("
	"  id " C_TEXT " PRIMARY KEY,"
	"  user_name " C_TEXT " NOT NULL,"
	"  runs_json " C_TEXT " NOT NULL,"
	"  created_ms BIGINT NOT NULL"
	");"
	"CREATE TABLE eval_items ("
	"  batch_id " C_TEXT " NOT NULL REFERENCES eval_batches(id),"
	"  item " C_TEXT " NOT NULL,"
	"  pos INTEGER NOT NULL,"
	"  run_id " C_TEXT " NOT NULL,"
	"  attempt " C_TEXT " NOT NULL,"
	"  session_id " C_TEXT " NOT NULL,"
	"  prompt " C_TEXT " NOT NULL,"
	"  verdict " C_TEXT ","
	"  reviewer " C_TEXT ","
	"  review_ms BIGINT,"
	"  shown_ms BIGINT,"
	"  decided_ms BIGINT,"
	"  PRIMARY KEY (batch_id, item)"
	");"
	"CREATE INDEX eval_items_by_run ON eval_items (run_id);"},
    {8, "CREATE TABLE audit_records ("
	"  session_id " C_TEXT " NOT NULL REFERENCES sessions (id),"
	"  seq BIGINT NOT NULL,"
	"  hash " C_TEXT " NOT NULL,"
	"  record TEXT NOT NULL,"
	"  PRIMARY KEY (session_id, seq)"
	");"},
    /* Secrets' files (SQLite's migration 9). */
    {9, "CREATE TABLE secrets ("
	"  name " C_TEXT " PRIMARY KEY,"
	"  file TEXT NOT NULL,"
	"  repos TEXT,"
	"  updated_ms BIGINT NOT NULL,"
	"  deleted_ms BIGINT"
	");"},
    /* Who builds a repository's snapshot now (SQLite's migration 10). */
    {10, "CREATE TABLE build_claims ("
	"  repo_id " C_TEXT " PRIMARY KEY,"
	"  worker " C_TEXT " NOT NULL,"
	"  expires_ms BIGINT NOT NULL"
	");"},
};
const size_t pg_n_migrations = sizeof(pg_migrations) / sizeof(pg_migrations[0]);

static const char *const stmt_sql[PG_STMT_MAX] = {
    [PG_BEGIN] = "BEGIN",
    [PG_COMMIT] = "COMMIT",
    [PG_ROLLBACK] = "ROLLBACK",

    /* held until the migration's transaction ends: two servers opening
     * one database at once apply each migration once */
    [PG_MIGRATION_LOCK] = "SELECT pg_advisory_xact_lock($1)",
    [PG_MIGRATION_TABLE] = "CREATE TABLE IF NOT EXISTS schema_version ("
			   "  version INTEGER PRIMARY KEY,"
			   "  applied_ms BIGINT NOT NULL)",
    [PG_MIGRATION_VERSION] = "SELECT COALESCE(MAX(version), 0) "
			     "FROM schema_version",
    [PG_MIGRATION_RECORD] = "INSERT INTO schema_version (version, "
			    "applied_ms) VALUES ($1, $2)",

    [PG_TOKEN_ADD] = "INSERT INTO tokens (hash, user_name, role, created_ms, "
		     "expires_ms, name) VALUES ($1, $2, $3, $4, $5, $6)",
    [PG_TOKEN_LOOKUP] = "SELECT " STORE_TOKEN_COLUMNS " FROM tokens "
			"WHERE hash = $1 AND revoked_ms = 0 "
			"AND (expires_ms = 0 OR expires_ms > $2)",
    [PG_TOKEN_COUNT] = "SELECT COUNT(*) FROM tokens",
    [PG_TOKEN_LIST] = "SELECT " STORE_TOKEN_COLUMNS " FROM tokens "
		      "ORDER BY created_ms, name",
    /* the first revocation's time stays */
    [PG_TOKEN_REVOKE] = "UPDATE tokens SET revoked_ms = CASE "
			"WHEN revoked_ms = 0 THEN $2::bigint ELSE revoked_ms "
			"END WHERE name = $1 RETURNING revoked_ms",
    [PG_TOKEN_TOUCH] = "UPDATE tokens SET last_used_ms = $2 WHERE hash = $1",

    [PG_REPO_ADD] = "INSERT INTO repositories (" STORE_REPO_COLUMNS ") "
		    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    /* an id match wins over a name match; a removed repository by its
     * id only (its sessions' history) */
    [PG_REPO_GET] = "SELECT " STORE_REPO_COLUMNS " FROM repositories "
		    "WHERE id = $1 OR (name = $1 AND removed_ms = 0) "
		    "ORDER BY CASE WHEN id = $1 THEN 0 ELSE 1 END LIMIT 1",
    [PG_REPO_LIST] = "SELECT " STORE_REPO_COLUMNS " FROM repositories "
		     "WHERE removed_ms = 0 ORDER BY name",
    [PG_REPO_UPDATE] = "UPDATE repositories SET url = $2, default_ref = $3, "
		       "agent_json = $4, refresh_ms = $5 "
		       "WHERE id = $1 AND removed_ms = 0",
    /* only when none of its sessions may still need it */
    [PG_REPO_REMOVE] =
	"UPDATE repositories SET removed_ms = $2, name = name || '~' || id "
	"WHERE id = $1 AND removed_ms = 0 AND NOT EXISTS (SELECT 1 FROM "
	"sessions WHERE repo_id = $1 AND state NOT IN " STORE_TERMINAL_STATES
	")",
    [PG_REPO_ACTIVE] = "SELECT COUNT(*) FROM sessions WHERE repo_id = $1 "
		       "AND state NOT IN " STORE_TERMINAL_STATES,
    [PG_BUILD_ENQUEUE] = "INSERT INTO build_queue (repo_id, queued_ms) "
			 "VALUES ($1, $2) ON CONFLICT (repo_id) DO NOTHING",
    /* servers taking builds at once each take another */
    [PG_BUILD_DEQUEUE] = "DELETE FROM build_queue WHERE repo_id = "
			 "(SELECT repo_id FROM build_queue ORDER BY "
			 "queued_ms, repo_id LIMIT 1 FOR UPDATE SKIP LOCKED) "
			 "RETURNING repo_id",
    [PG_BUILD_UNQUEUE] = "DELETE FROM build_queue WHERE repo_id = $1",
    [PG_BUILD_QUEUE_LIST] = "SELECT repo_id FROM build_queue ORDER BY "
			    "queued_ms, repo_id",
    /* free, run out, or the claimer's already: $3 now, $4 its end. A
     * claim another worker holds keeps its row (locked until this
     * transaction ends: two claimers at once are served in turn) */
    [PG_BUILD_CLAIM] = "INSERT INTO build_claims (repo_id, worker, "
		       "expires_ms) VALUES ($1, $2, $4) "
		       "ON CONFLICT (repo_id) DO UPDATE SET worker = "
		       "excluded.worker, expires_ms = excluded.expires_ms "
		       "WHERE build_claims.worker = excluded.worker "
		       "OR build_claims.expires_ms < $3::bigint "
		       "RETURNING worker",
    [PG_BUILD_CLAIM_HOLDER] = "SELECT worker FROM build_claims "
			      "WHERE repo_id = $1",
    [PG_BUILD_RELEASE] = "DELETE FROM build_claims WHERE repo_id = $1 "
			 "AND worker = $2",
    /* with the worker's session leases (lease_renew), as they are */
    [PG_BUILD_CLAIM_RENEW] = "UPDATE build_claims SET expires_ms = $3 "
			     "WHERE worker = $1 AND expires_ms >= $2::bigint",
    /* a stopped worker's claims end when it stops (worker_stop) */
    [PG_BUILD_CLAIM_EXPIRE] = "UPDATE build_claims SET expires_ms = "
			      "$2::bigint - 1 WHERE worker = $1 AND "
			      "expires_ms >= $2::bigint",
    [PG_EVAL_RUN_PUT] = "INSERT INTO eval_runs (id, user_name, run_json, "
			   "created_ms, updated_ms) VALUES ($1, $2, $3, $4, $4) "
			   "ON CONFLICT (id) DO UPDATE SET run_json = "
			   "excluded.run_json, updated_ms = excluded.updated_ms",
    [PG_EVAL_RUN_GET] = "SELECT " STORE_EVAL_RUN_COLUMNS
			   " FROM eval_runs WHERE id = $1",
    [PG_EVAL_RUN_LIST] = "SELECT " STORE_EVAL_RUN_COLUMNS
			    " FROM eval_runs ORDER BY created_ms DESC, id DESC "
			    "LIMIT " STORE_STRINGIFY(STORE_LIST_MAX),
    [PG_EVAL_ATTEMPT_PUT] = "INSERT INTO eval_attempts (run_id, name, "
			       "attempt_json, updated_ms) VALUES ($1, $2, $3, $4) "
			       "ON CONFLICT (run_id, name) DO UPDATE SET "
			       "attempt_json = excluded.attempt_json, "
			       "updated_ms = excluded.updated_ms",
    [PG_EVAL_ATTEMPT_LIST] = "SELECT " STORE_EVAL_ATTEMPT_COLUMNS
				" FROM eval_attempts WHERE run_id = $1 ORDER BY name",
    [PG_EVAL_BATCH_ADD] = "INSERT INTO eval_batches (id, user_name, "
			     "runs_json, created_ms) VALUES ($1, $2, $3, $4)",
    [PG_EVAL_ITEM_ADD] = "INSERT INTO eval_items (batch_id, item, pos, "
			    "run_id, attempt, session_id, prompt) VALUES "
			    "($1, $2, $3, $4, $5, $6, $7)",
    [PG_EVAL_BATCH_GET] = "SELECT " STORE_EVAL_BATCH_COLUMNS
			     " FROM eval_batches WHERE id = $1",
    [PG_EVAL_BATCH_LIST] = "SELECT " STORE_EVAL_BATCH_COLUMNS
			      " FROM eval_batches ORDER BY created_ms DESC, "
			      "id DESC LIMIT " STORE_STRINGIFY(STORE_LIST_MAX),
    [PG_EVAL_ITEMS_BATCH] = "SELECT " STORE_EVAL_ITEM_COLUMNS
			       " FROM eval_items WHERE batch_id = $1 ORDER BY pos",
    [PG_EVAL_ITEMS_RUN] = "SELECT " STORE_EVAL_ITEM_COLUMNS
			     " FROM eval_items WHERE run_id = $1 ORDER BY "
			     "batch_id, pos",
    [PG_EVAL_ITEM_GET] = "SELECT " STORE_EVAL_ITEM_COLUMNS
			    " FROM eval_items WHERE batch_id = $1 AND item = $2",
    [PG_EVAL_ITEM_SHOW] = "UPDATE eval_items SET shown_ms = "
			     "COALESCE(shown_ms, $3) WHERE batch_id = $1 AND item = $2",
    [PG_EVAL_ITEM_DECIDE] = "UPDATE eval_items SET verdict = $3, reviewer = $4, "
			       "review_ms = $5, decided_ms = $6 WHERE batch_id = $1 "
			       "AND item = $2 AND verdict IS NULL",
    [PG_REPO_SET_REFRESHED] = "UPDATE repositories SET last_refresh_ms = $2 "
			      "WHERE id = $1",

    [PG_SNAPSHOT_ADD] = "INSERT INTO snapshots (" STORE_SNAPSHOT_COLUMNS ") "
			"VALUES ($1, $2, $3, $4, $5)",
    [PG_SNAPSHOT_LATEST] = "SELECT " STORE_SNAPSHOT_COLUMNS " FROM snapshots "
			   "WHERE repo_id = $1 "
			   "ORDER BY created_ms DESC, id DESC LIMIT 1",
    [PG_SNAPSHOT_LIST_REPO] =
	"SELECT " STORE_SNAPSHOT_COLUMNS " FROM snapshots WHERE repo_id = $1 "
	"ORDER BY created_ms DESC, id DESC",
    [PG_SNAPSHOT_LIST_ALL] = "SELECT " STORE_SNAPSHOT_COLUMNS " FROM snapshots "
			     "ORDER BY created_ms DESC, id DESC",

    /* the counter's row lock is held to the end of the transaction: a
     * rolled back one gives its position back */
    [PG_QUEUE_SEQ_NEXT] = "UPDATE counters SET value = value + 1 "
			  "WHERE name = 'queue_seq' RETURNING value",

    [PG_SESSION_INSERT] =
	"INSERT INTO sessions (id, repo_id, user_name, prompt, ref, "
	"agent_json, limits_json, state, queue_seq, created_ms, updated_ms) "
	"VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)",
    [PG_SESSION_GET] = "SELECT " STORE_SESSION_COLUMNS " FROM sessions "
		       "WHERE id = $1",
    /* the session's row, locked to the end of the transaction: taken
     * first by every transaction that writes a session, before the
     * queue counter, so that two never wait on each other */
    [PG_SESSION_LOCK] = "SELECT state, lease_epoch FROM sessions "
			"WHERE id = $1 FOR UPDATE",
    [PG_SESSION_EXISTS] = "SELECT 1 FROM sessions WHERE id = $1",
    /* newest first; a NULL parameter is no filter, $4 the page's
     * boundary (the session the previous page ended with) */
    [PG_SESSION_LIST] =
	"SELECT " STORE_SESSION_COLUMNS " FROM sessions "
	"WHERE ($1::text IS NULL OR state = $1) "
	"AND ($2::text IS NULL OR user_name = $2) "
	"AND ($3::text IS NULL OR repo_id = $3) "
	"AND ($4::text IS NULL OR (created_ms, id) < "
	"  (SELECT b.created_ms, b.id FROM sessions b WHERE b.id = $4)) "
	"ORDER BY created_ms DESC, id DESC LIMIT $5",
    [PG_SESSION_LIST_STATE] = "SELECT " STORE_SESSION_COLUMNS " FROM sessions "
			      "WHERE state = $1 ORDER BY queue_seq",
    [PG_SESSION_COUNT] = "SELECT state, COUNT(*) FROM sessions "
			 "GROUP BY state",
    /* NULL parameters keep the column; '' clears the text ones */
    [PG_SESSION_APPLY] =
	"UPDATE sessions SET "
	"state = COALESCE($2::text, state), "
	"reason = CASE WHEN $3::text IS NULL THEN reason "
	"  ELSE NULLIF($3::text, '') END, "
	"snapshot_id = CASE WHEN $4::text IS NULL THEN snapshot_id "
	"  ELSE NULLIF($4::text, '') END, "
	"sandbox = CASE WHEN $5::text IS NULL THEN sandbox "
	"  ELSE NULLIF($5::text, '') END, "
	"outcome_json = COALESCE($6::text, outcome_json), "
	"attempts = COALESCE($7::integer, attempts), "
	"turns = COALESCE($8::integer, turns), "
	"exit_code = COALESCE($9::integer, exit_code), "
	"queue_seq = COALESCE($10::bigint, queue_seq), "
	"started_ms = COALESCE($11::bigint, started_ms), "
	"finished_ms = COALESCE($12::bigint, finished_ms), "
	"updated_ms = $13 "
	"WHERE id = $1",

    /* the next seq under the session row's lock, and the event, in one
     * statement; no row: no such session */
    [PG_EVENT_APPEND] =
	"WITH s AS (UPDATE sessions SET last_event_seq = last_event_seq + 1 "
	"  WHERE id = $1 RETURNING id, last_event_seq"
	"), e AS (INSERT INTO events (session_id, seq, time_ms, kind, data) "
	"SELECT s.id, s.last_event_seq, $2::bigint, $3::text, $4::text "
	"FROM s RETURNING session_id, seq) "
	/* other processes' watches learn of it at the commit */
	"SELECT e.seq, pg_notify('" PG_WATCH_CHANNEL "', "
	"e.session_id || ' ' || $3::text) FROM e",
    [PG_EVENT_LIST] = "SELECT " STORE_EVENT_COLUMNS " FROM events "
		      "WHERE session_id = $1 AND seq > $2 "
		      "ORDER BY seq LIMIT $3",

    /* under the session's row lock (PG_SESSION_LOCK) */
    [PG_AUDIT_HEAD] = "SELECT seq, hash FROM audit_records "
		      "WHERE session_id = $1 ORDER BY seq DESC LIMIT 1",
    [PG_AUDIT_INSERT] = "INSERT INTO audit_records (session_id, seq, hash, "
			"record) VALUES ($1, $2, $3, $4)",
    [PG_AUDIT_LIST] = "SELECT seq, hash, record FROM audit_records "
		      "WHERE session_id = $1 AND seq > $2 "
		      "ORDER BY seq LIMIT $3",

    [PG_MESSAGE_INSERT] = "INSERT INTO messages (session_id, user_name, "
			  "text, turn, created_ms) "
			  "VALUES ($1, $2, $3, 0, $4) RETURNING id",
    [PG_MESSAGE_PENDING] = "SELECT " STORE_MESSAGE_COLUMNS " "
			   "FROM messages WHERE session_id = $1 AND turn = 0 "
			   "ORDER BY id",
    [PG_MESSAGE_CONSUME] = "UPDATE messages SET turn = $2 "
			   "WHERE id = $1 AND turn = 0",
    [PG_MESSAGE_EXISTS] = "SELECT 1 FROM messages WHERE id = $1",

    [PG_ARTIFACT_ADD] = "INSERT INTO artifacts (session_id, name, path, "
			"media_type, size, created_ms) "
			"VALUES ($1, $2, $3, $4, $5, $6)",
    [PG_ARTIFACT_LIST] = "SELECT " STORE_ARTIFACT_COLUMNS " "
			 "FROM artifacts WHERE session_id = $1 ORDER BY name",

    /* a worker that starts again under its id runs again */
    [PG_WORKER_REGISTER] =
	"INSERT INTO workers (id, host, started_ms, heartbeat_ms, "
	"max_sandboxes, stopped_ms) VALUES ($1, $2, $3, $3, $4, NULL) "
	"ON CONFLICT (id) DO UPDATE SET host = excluded.host, "
	"started_ms = excluded.started_ms, heartbeat_ms = "
	"excluded.heartbeat_ms, max_sandboxes = excluded.max_sandboxes, "
	"stopped_ms = NULL",
    /* the worker's row first, then its sessions' (as lease_renew) */
    [PG_WORKER_STOP] = "UPDATE workers SET stopped_ms = "
		       "COALESCE(stopped_ms, $2) WHERE id = $1",
    [PG_WORKER_EXPIRE] = "UPDATE sessions SET lease_expires_ms = "
			 "$2::bigint - 1 WHERE worker_id = $1 AND "
			 "lease_expires_ms >= $2::bigint",
    [PG_WORKER_LIST] = "SELECT " STORE_WORKER_COLUMNS " FROM workers "
		       "ORDER BY started_ms, id",
    /* shared: claims of one worker do not wait on each other, its stop
     * and its renewals (which update the row) wait for them */
    [PG_WORKER_GET] = "SELECT stopped_ms FROM workers WHERE id = $1 "
		      "FOR SHARE",
    [PG_WORKER_HEARTBEAT] = "UPDATE workers SET heartbeat_ms = $2 "
			    "WHERE id = $1 RETURNING stopped_ms",
    /* the queue's oldest that no live lease holds, skipping the rows
     * another transaction has locked (another claimer's, a transition's):
     * concurrent claimers take disjoint sets and never wait on each
     * other. A row another claimer took and committed since this
     * statement began is read again under its lock and no longer
     * matches. */
    [PG_CLAIM_QUEUED] =
	"WITH picked AS (SELECT id FROM sessions WHERE state = 'queued' "
	"  AND (worker_id IS NULL OR lease_expires_ms < $2::bigint) "
	"  ORDER BY created_ms, id LIMIT $4 FOR UPDATE SKIP LOCKED), "
	"taken AS (UPDATE sessions s SET worker_id = $1, "
	"  lease_epoch = s.lease_epoch + 1, lease_expires_ms = $3 "
	"  FROM picked WHERE s.id = picked.id "
	"  RETURNING s.id, s.worker_id, s.lease_epoch, s.state, "
	"  s.created_ms) "
	"SELECT " STORE_CLAIM_COLUMNS " FROM taken ORDER BY created_ms, id",
    /* one session, waiting for its row's lock */
    [PG_CLAIM_ONE] = "SELECT state, worker_id, lease_expires_ms "
		     "FROM sessions WHERE id = $1 FOR UPDATE",
    /* $4: 1 for a new lease, 0 to extend the holder's */
    [PG_LEASE_TAKE] = "UPDATE sessions SET worker_id = $2, "
		      "lease_expires_ms = $3, lease_epoch = lease_epoch + $4 "
		      "WHERE id = $1 RETURNING " STORE_CLAIM_COLUMNS,
    [PG_LEASE_RENEW] =
	"WITH renewed AS (UPDATE sessions SET lease_expires_ms = $3 "
	"  WHERE worker_id = $1 AND lease_expires_ms >= $2::bigint "
	"  RETURNING " STORE_CLAIM_COLUMNS ") "
	"SELECT " STORE_CLAIM_COLUMNS " FROM renewed ORDER BY id",
    /* two reapers at once skip each other's rows */
    [PG_LEASE_EXPIRED] =
	"SELECT " STORE_CLAIM_COLUMNS " FROM sessions "
	"WHERE worker_id IS NOT NULL AND lease_expires_ms < $1 "
	"AND state NOT IN " STORE_TERMINAL_STATES " "
	"ORDER BY lease_expires_ms, id LIMIT $2 FOR UPDATE SKIP LOCKED",
    /* $2: 1 for a reap (the epoch advances), 0 at a terminal state */
    [PG_LEASE_END] = "UPDATE sessions SET worker_id = NULL, "
		     "lease_expires_ms = NULL, lease_epoch = lease_epoch + $2 "
		     "WHERE id = $1 RETURNING lease_epoch",

    [PG_SLACK_POST_INSERT] =
	"INSERT INTO slack_posts (session_id, kind, channel, thread_ts, "
	"response_url, slack_user, text, created_ms) "
	"VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
    /* an outcome is due when its session rests in a state not posted
     * yet, and no reply about the session written before it (the
     * "started" answer) is still to be posted */
    [PG_SLACK_POST_DUE] =
	"SELECT " STORE_SLACK_POST_COLUMNS " FROM slack_posts "
	"WHERE done_ms = 0 AND next_ms <= $1 AND (kind <> 'outcome' OR ("
	"EXISTS (SELECT 1 FROM sessions WHERE sessions.id = "
	"slack_posts.session_id AND sessions.state IN " STORE_RESTING_STATES
	" AND (slack_posts.posted_state IS NULL OR "
	"slack_posts.posted_state <> sessions.state)) "
	"AND NOT EXISTS (SELECT 1 FROM slack_posts AS earlier WHERE "
	"earlier.session_id = slack_posts.session_id AND "
	"earlier.kind <> 'outcome' AND earlier.id < slack_posts.id AND "
	"earlier.done_ms = 0))) "
	"ORDER BY id LIMIT $2",
    /* NULL parameters keep the column; '' clears last_error */
    [PG_SLACK_POST_UPDATE] =
	"UPDATE slack_posts SET "
	"posted_state = COALESCE($2::text, posted_state), "
	"attempts = COALESCE($3::integer, attempts), "
	"next_ms = COALESCE($4::bigint, next_ms), "
	"done_ms = COALESCE($5::bigint, done_ms), "
	"last_error = CASE WHEN $6::text IS NULL THEN last_error "
	"  ELSE NULLIF($6::text, '') END "
	"WHERE id = $1",
    [PG_SLACK_POST_LIST] =
	"SELECT " STORE_SLACK_POST_COLUMNS " FROM slack_posts "
	"WHERE session_id = $1 ORDER BY id",
    [PG_SLACK_EVENT_PRUNE] = "DELETE FROM slack_events WHERE received_ms < $1",
    [PG_SLACK_EVENT_INSERT] = "INSERT INTO slack_events (event_id, "
			      "received_ms) VALUES ($1, $2)",
    [PG_SLACK_EVENT_DELETE] = "DELETE FROM slack_events WHERE event_id = $1",
    /* a new name only while the table has room (tombstones count) */
    [PG_SECRET_PUT] =
	"INSERT INTO secrets (name, file, repos, updated_ms, deleted_ms) "
	"SELECT $1::text, $2::text, $3::text, $4::bigint, NULL::bigint "
	"WHERE EXISTS (SELECT 1 FROM secrets WHERE name = $1::text) OR "
	"(SELECT COUNT(*) FROM secrets) < "
	STORE_STRINGIFY(STORE_SECRETS_MAX) " ON CONFLICT (name) DO UPDATE "
	"SET file = excluded.file, repos = excluded.repos, "
	"updated_ms = excluded.updated_ms, deleted_ms = NULL",
    [PG_SECRET_DELETE] = "UPDATE secrets SET file = '', repos = NULL, "
			 "updated_ms = $2::bigint, deleted_ms = $2::bigint "
			 "WHERE name = $1 AND deleted_ms IS NULL",
    [PG_SECRET_LIST] = "SELECT name, file, repos, updated_ms, "
		       "COALESCE(deleted_ms, 0) FROM secrets ORDER BY name",
};

const char *pg_stmt_sql(enum pg_stmt id)
{
	if ((int)id < 0 || id >= PG_STMT_MAX)
		return NULL;
	return stmt_sql[id];
}
