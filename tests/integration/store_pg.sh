#!/bin/bash
# warren serve on PostgreSQL (docs/operations.md "The store"): a server of
# the test's own (tests/pg_server.sh), its URL as the configuration file's
# "store"; a session from a real repository's snapshot to review, its
# events numbered 1..N without a gap; the start's log naming the store; a
# restart with --store finding everything (tokens, repository, session);
# the database holding it all and the data directory no warren.db; a bad
# URL, a server that does not answer and a database in another encoding
# stopping the start with the URL named and never its password.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"
. "$(dirname "$0")/../pg_server.sh"
trap 'server_stop; pg_server_stop; rm -rf "$TEST_TMP"' EXIT

if ! pg_server_bin >/dev/null; then
	echo "SKIP $TEST_FILE: no PostgreSQL server binaries (install postgresql-15)" >&2
	exit 0
fi
if ! pg_server_start; then
	fail "a PostgreSQL server of the test's own" "$PG_SERVER_WHY"
	exit 0
fi
pass "a PostgreSQL server of the test's own"
PSQL="$PG_SERVER_BIN/psql"
# the URL of database DB on the test's server
db_url() { echo "postgresql://warren@/$1?host=$PG_SERVER_DIR&port=5432"; }
"$PSQL" -q "$PG_SERVER_URL" -c "CREATE DATABASE warren" &&
	"$PSQL" -q "$PG_SERVER_URL" -c "CREATE DATABASE latin ENCODING 'LATIN1' LOCALE 'C' TEMPLATE template0" ||
	fail "create the databases" "psql failed"
STORE="$(db_url warren)"

# --- a repository: a tiny project -------------------------------------------
R="$TEST_TMP/proj"
mkdir -p "$R"
printf '{}\n' >"$R/warren.json"
printf 'hello\n' >"$R/greeting.txt"
git -C "$R" init -q -b main
git -C "$R" -c user.email=t@warren -c user.name=test add -A
git -C "$R" -c user.email=t@warren -c user.name=test commit -q -m initial

D="$TEST_TMP/data"
mkdir -p "$D"
printf '{"store": "%s"}\n' "$STORE" >"$TEST_TMP/warren.json"
server_start "$D" "$TEST_TMP/warren.json"
[ -n "$TOKEN" ] && pass "server starts on PostgreSQL, admin token" ||
	fail "server starts on PostgreSQL, admin token" "$(tail -5 "$SERVER_LOG")"
grep -qF "store $STORE)" "$SERVER_LOG" && pass "the start's log names the store" ||
	fail "the start's log names the store" "$(grep listening "$SERVER_LOG")"
[ ! -e "$D/warren.db" ] && pass "no warren.db in the data directory" ||
	fail "no warren.db in the data directory" "$(ls "$D")"

api POST /api/v1/repositories "{\"url\": \"$R\", \"name\": \"proj\"}"
[ "$CODE" = 201 ] && pass "register a repository" || fail "register a repository" "$CODE $BODY"
for _ in $(seq 1 150); do
	api GET /api/v1/snapshots
	[ "$(jget '.snapshots | length')" -ge 1 ] 2>/dev/null && break
	sleep 0.2
done
[ "$(jget '.snapshots[0].commit')" = "$(git -C "$R" rev-parse HEAD)" ] &&
	pass "the snapshot is recorded" || fail "the snapshot is recorded" "$BODY"

S1="$(submit proj "count" 'for i in $(seq 1 200); do echo line-$i; echo err-$i >&2; done')"
wait_state "$S1" review 90
[ "$STATE" = review ] && pass "a session runs to review" ||
	fail "a session runs to review" "state $STATE: $(session_log "$S1" | tail -5)"
seqs="$(events_json "$S1" | jq -r '.events[].seq' | tr '\n' ' ')"
n="$(echo "$seqs" | wc -w)"
[ "$n" -gt 400 ] && [ "$seqs" = "$(seq 1 "$n" | tr '\n' ' ')" ] &&
	pass "its $n events are numbered 1..$n" || fail "its events are numbered 1..N" "$seqs"
[ "$(session_log "$S1" | grep -c '^stdout line-')" = 200 ] &&
	pass "every output line is an event" || fail "every output line is an event" "$(session_log "$S1" | tail -3)"
in_db="$("$PSQL" -tA "$STORE" -c "SELECT state || ' ' || last_event_seq FROM sessions WHERE id = '$S1'")"
[ "$in_db" = "review $n" ] && pass "the session is in the database" || fail "the session is in the database" "$in_db"

# --- the audit chain is in the database; tampering with a row shows ----------
na="$("$PSQL" -tA "$STORE" -c "SELECT COUNT(*) FROM audit_records WHERE session_id = '$S1'")"
j="$("$WARREN" audit verify "$S1" --data "$D" --config "$TEST_TMP/warren.json" --json)"
[ "$na" -ge 5 ] 2>/dev/null && [ "$(echo "$j" | jq -r .ok)" = true ] && [ "$(echo "$j" | jq -r .source)" = store ] &&
	[ "$(echo "$j" | jq -r .records)" = "$na" ] && [ ! -e "$D/audit" ] &&
	pass "audit: the chain in PostgreSQL ($na records), verify --config reads it" ||
	fail "audit: the chain in PostgreSQL, verify --config reads it" "na=$na $j"
"$PSQL" -q "$STORE" -c "UPDATE audit_records SET record = replace(record, '\"time_ms\":', '\"time_ms\":9') WHERE session_id = '$S1' AND seq = 2"
out="$("$WARREN" audit verify "$S1" --data "$D" --store "$STORE" --quiet 2>&1)"
rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "^BROKEN: line 2: hash mismatch (edited?)" &&
	pass "audit: a record edited with psql (UPDATE): verify exits 1 naming it" ||
	fail "audit: a record edited with psql (UPDATE): verify exits 1 naming it" "rc=$rc $out"
"$PSQL" -q "$STORE" -c "UPDATE audit_records SET record = replace(record, '\"time_ms\":9', '\"time_ms\":') WHERE session_id = '$S1' AND seq = 2"
"$WARREN" audit verify "$S1" --data "$D" --store "$STORE" --quiet >/dev/null 2>&1 &&
	"$PSQL" -q "$STORE" -c "DELETE FROM audit_records WHERE session_id = '$S1' AND seq = 3" &&
	out="$("$WARREN" audit verify "$S1" --data "$D" --store "$STORE" --quiet 2>&1)"
rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "^BROKEN: line 3: seq 4 follows 2 (deleted or reordered?)" &&
	pass "audit: a record deleted with psql: verify exits 1 naming it" ||
	fail "audit: a record deleted with psql: verify exits 1 naming it" "rc=$rc $out"

# --- a restart with --store: everything is there -----------------------------
server_stop
PORT="$(free_port)"
URL="http://127.0.0.1:$PORT"
SERVER_LOG="$TEST_TMP/serve2.log"
"$WARREN" serve --data "$D" --listen "127.0.0.1:$PORT" --store "$STORE" >"$SERVER_LOG" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do
	curl -s -o /dev/null "$URL/api/v1/healthz" && break
	sleep 0.1
done
api GET "/api/v1/sessions/$S1"
[ "$CODE" = 200 ] && [ "$(jget .state)" = review ] &&
	pass "after a restart: the same admin token, the session in review" ||
	fail "after a restart: the same admin token, the session in review" "$CODE $BODY $(tail -3 "$SERVER_LOG")"
api GET /api/v1/repositories
[ "$(jget '.repositories[0].name')" = proj ] && pass "after a restart: the repository" ||
	fail "after a restart: the repository" "$BODY"
[ "$("$PSQL" -tA "$STORE" -c "SELECT COUNT(*) FROM schema_version")" = \
	"$("$PSQL" -tA "$STORE" -c "SELECT MAX(version) FROM schema_version")" ] &&
	pass "each migration applied once" || fail "each migration applied once" \
	"$("$PSQL" -tA "$STORE" -c "SELECT * FROM schema_version")"
server_stop

# --- stores that will not do -------------------------------------------------
D2="$TEST_TMP/data2"
bad_start() { "$WARREN" serve --data "$D2" --listen "127.0.0.1:$(free_port)" --store "$1" 2>&1; }
out="$(bad_start "postgres://bob:s3cret@/warren?host=$TEST_TMP/nothing-here&port=5432")"
rc=$?
[ "$rc" = 1 ] && echo "$out" | grep -qF "open store postgres://bob:***@/warren" &&
	! echo "$out" | grep -q s3cret &&
	pass "a server that does not answer: exit 1, the URL without its password" ||
	fail "a server that does not answer: exit 1, the URL without its password" "exit $rc: $out"
out="$(bad_start "postgresql://bob:p%zz@/warren")"
rc=$?
[ "$rc" = 2 ] && ! echo "$out" | grep -q 'p%zz' &&
	pass "a URL libpq cannot read: exit 2, no password" || fail "a URL libpq cannot read: exit 2, no password" "exit $rc: $out"
out="$(bad_start "$(db_url latin)")"
rc=$?
[ "$rc" = 2 ] && echo "$out" | grep -q "encoding is LATIN1, not UTF8" &&
	pass "a database that is not UTF8: exit 2, saying so" || fail "a database that is not UTF8: exit 2, saying so" "exit $rc: $out"
out="$(bad_start "mysql://db/warren")"
rc=$?
[ "$rc" = 2 ] && echo "$out" | grep -q "unknown kind of store 'mysql'" &&
	pass "another kind of URL: exit 2" || fail "another kind of URL: exit 2" "exit $rc: $out"
