#!/bin/bash
# Two servers on one PostgreSQL store (a server of the test's own,
# tests/pg_server.sh): A runs sessions (--role all), B is an API server
# alone (--role api, its own data directory). A session submitted to B is
# run by A; B's event stream shows A's events as they are committed (the
# store's watch: LISTEN/NOTIFY), not at its stream's one-second look;
# B's sessions list has it; a cancel taken by B stops the sandbox A runs;
# --role api over SQLite, and a role that does not exist, are refused.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"
. "$(dirname "$0")/../pg_server.sh"
B_PID=""
b_stop() { [ -n "$B_PID" ] && kill "$B_PID" 2>/dev/null && wait "$B_PID" 2>/dev/null; B_PID=""; }
trap 'b_stop; server_stop; pg_server_stop; rm -rf "$TEST_TMP"' EXIT

if ! pg_server_bin >/dev/null; then
	echo "SKIP $TEST_FILE: no PostgreSQL server binaries (install postgresql-15)" >&2
	exit 0
fi
if ! pg_server_start; then
	fail "a PostgreSQL server of the test's own" "$PG_SERVER_WHY"
	exit 0
fi
"$PG_SERVER_BIN/psql" -q "$PG_SERVER_URL" -c "CREATE DATABASE warren" || fail "create the database" "psql failed"
STORE="postgresql://warren@/warren?host=$PG_SERVER_DIR&port=5432"

R="$TEST_TMP/proj"
mkdir -p "$R"
printf '{}\n' >"$R/warren.json"
git -C "$R" init -q -b main
git -C "$R" -c user.email=t@warren -c user.name=test add -A
git -C "$R" -c user.email=t@warren -c user.name=test commit -q -m initial

# A: sessions' runners and the API
printf '{"store": "%s", "repositories": [{"name": "proj", "url": "%s"}]}\n' "$STORE" "$R" >"$TEST_TMP/a.json"
server_start "$TEST_TMP/a" "$TEST_TMP/a.json"
A_URL="$URL"
# B: the API alone, its own data directory, the same store
B_PORT="$(free_port)"
B_URL="http://127.0.0.1:$B_PORT"
"$WARREN" serve --data "$TEST_TMP/b" --listen "127.0.0.1:$B_PORT" --store "$STORE" --role api >"$TEST_TMP/b.log" 2>&1 &
B_PID=$!
for _ in $(seq 1 100); do curl -s -o /dev/null "$B_URL/api/v1/healthz" && break; sleep 0.1; done
grep -q "role api" "$TEST_TMP/b.log" && [ -n "$TOKEN" ] &&
	pass "an API server on A's store (--role api)" || fail "an API server on A's store (--role api)" "$(tail -5 "$TEST_TMP/b.log")"
b() { # METHOD PATH [BODY]: B's API with A's token (one store, one set of tokens)
	URL="$B_URL" api "$@"
}

# a session submitted to B, its agent printing a line every 50 ms
agent='["sh", "-c", "for i in $(seq 1 40); do echo line-$i; sleep 0.05; done"]'
b POST /api/v1/sessions "{\"repo\": \"proj\", \"prompt\": \"count\", \"agent\": $agent}"
S="$(jget .id)"
[ "$CODE" = 201 ] && [ -n "$S" ] && pass "B takes the session" || fail "B takes the session" "$CODE $BODY"

# B's stream, each event with the time it arrived
python3 - "$B_URL/api/v1/sessions/$S/events" "$TOKEN" >"$TEST_TMP/arrivals" 2>"$TEST_TMP/stream.err" <<'PY' &
import json, sys, time, urllib.request
req = urllib.request.Request(sys.argv[1], headers={"Authorization": "Bearer " + sys.argv[2],
                                                   "Accept": "text/event-stream"})
deadline = time.time() + 120
with urllib.request.urlopen(req, timeout=130) as r:
    for raw in r:
        line = raw.decode().rstrip("\n")
        if line.startswith("data: "):
            e = json.loads(line[6:])
            print(e["kind"], e["seq"], e["time_ms"], int(time.time() * 1000), flush=True)
            if e["kind"] == "state" and (e.get("data") or {}).get("state") in ("review", "failed", "cancelled"):
                break
        if time.time() > deadline:
            break
PY
READER=$!
for _ in $(seq 1 600); do kill -0 $READER 2>/dev/null || break; sleep 0.2; done
kill $READER 2>/dev/null
wait $READER 2>/dev/null
n_out="$(grep -c '^output ' "$TEST_TMP/arrivals")"
last_state="$(grep '^state ' "$TEST_TMP/arrivals" | tail -1)"
api GET "/api/v1/sessions/$S"
[ "$(jget .state)" = review ] && [ "$n_out" -ge 10 ] &&
	pass "A runs it to review; B streams its events ($n_out output events)" ||
	fail "A runs it to review; B streams its events" "state $(jget .state), $n_out output events; $(tail -3 "$TEST_TMP/arrivals") $(cat "$TEST_TMP/stream.err" | tail -2)"
# the delay from A's commit (the event's time) to B's stream, over the
# output events (streamed as they come): the median well under the
# stream's own one-second look, which is all B would have without the
# watch
read -r median p90 max <<<"$(awk '$1 == "output" { print $4 - $3 }' "$TEST_TMP/arrivals" | sort -n |
	awk '{ v[NR] = $1 } END { if (!NR) { print 9999, 9999, 9999; exit } i = int(NR * 0.9); if (i < 1) i = 1; print v[int((NR + 1) / 2)], v[i], v[NR] }')"
[ "$median" -lt 250 ] &&
	pass "B shows A's events as they are committed (delay median ${median} ms, p90 ${p90} ms, max ${max} ms)" ||
	fail "B shows A's events as they are committed" "median ${median} ms, p90 ${p90} ms, max ${max} ms"
b GET /api/v1/sessions
echo "$BODY" | jq -e --arg s "$S" '.sessions | map(.id) | index($s) != null' >/dev/null &&
	pass "B's sessions list has it" || fail "B's sessions list has it" "$BODY"

# a cancel taken by B ends the sandbox A runs
# (a sleep of its own, 120.PID seconds: pgrep finds this one, no other)
agent="[\"sh\", \"-c\", \"echo started; sleep 120.$$\"]"
b POST /api/v1/sessions "{\"repo\": \"proj\", \"prompt\": \"wait\", \"agent\": $agent}"
S2="$(jget .id)"
for _ in $(seq 1 300); do
	api GET "/api/v1/sessions/$S2/events?format=json"
	echo "$BODY" | grep -q started && break
	sleep 0.1
done
b POST "/api/v1/sessions/$S2/cancel"
c_code="$CODE"
for _ in $(seq 1 150); do "$WARREN" sandbox ls --data "$TEST_TMP/a" | grep -q "$S2" || break; sleep 0.1; done
api GET "/api/v1/sessions/$S2"
[ "$c_code" = 200 ] && [ "$(jget .state)" = cancelled ] &&
	! "$WARREN" sandbox ls --data "$TEST_TMP/a" | grep -q "$S2" && ! pgrep -f "sleep 120.$$" >/dev/null &&
	pass "a cancel taken by B stops the sandbox A runs" ||
	fail "a cancel taken by B stops the sandbox A runs" "cancel $c_code, state $(jget .state); $("$WARREN" sandbox ls --data "$TEST_TMP/a")"

b_stop
out="$("$WARREN" serve --data "$TEST_TMP/c" --listen "127.0.0.1:$(free_port)" --role api 2>&1)"
rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "needs a store other servers share" &&
	pass "--role api over SQLite is refused (exit 2)" || fail "--role api over SQLite is refused (exit 2)" "rc=$rc $out"
out="$("$WARREN" serve --data "$TEST_TMP/c" --role boss 2>&1)"
rc=$?
[ $rc = 2 ] && echo "$out" | grep -q -- "--role 'boss'" &&
	pass "an unknown role is a usage error" || fail "an unknown role is a usage error" "rc=$rc $out"
server_stop
expect_no_output "no sandbox is left" "." sh -c "'$WARREN' sandbox ls --data '$TEST_TMP/a' | tail -n +2"
