#!/bin/bash
# Snapshot builds of different repositories run at once (builds.parallel,
# default 2): one repository's hung build does not hold another's; a build
# queued or running when the server stops is queued again at its next
# start.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"

HUNG="$TEST_TMP/hung"
mkdir -p "$HUNG"
SECS=$((4000 + $$ % 1000))
MARK="sleep $SECS"
echo "{\"onCreateCommand\": \"$MARK\"}" >"$HUNG/warren.json"
g -C "$HUNG" init -q -b main
g -C "$HUNG" add -A
g -C "$HUNG" commit -q -m initial
greeter_remote

cat >"$TEST_TMP/serve.json" <<EOF
{"repositories": [{"name": "hung", "url": "$HUNG"}]}
EOF
D="$TEST_TMP/data"
server_start "$D" "$TEST_TMP/serve.json"
for _ in $(seq 1 100); do
	pgrep -f "$MARK" >/dev/null && break
	sleep 0.1
done
pgrep -f "$MARK" >/dev/null && pass "set up: the hung build runs" || fail "set up: the hung build runs" "$(tail -5 "$SERVER_LOG")"
"$WARREN" repo add "$REMOTE" --name greeter --server "$URL" --token "$TOKEN" >/dev/null
state=""
for _ in $(seq 1 300); do
	api GET /api/v1/repositories
	state="$(echo "$BODY" | jq -r '.repositories[] | select(.name == "greeter") | .build.state')"
	[ "$state" = ready ] && break
	sleep 0.1
done
hung_state="$(echo "$BODY" | jq -r '.repositories[] | select(.name == "hung") | .build.state')"
[ "$state" = ready ] && [ "$hung_state" = building ] &&
	pass "another repository's build finishes while one hangs (greeter $state, hung $hung_state)" ||
	fail "another repository's build finishes while one hangs" "greeter $state, hung $hung_state"

# the server stops in the middle of the hung build: at its next start the
# build is queued again (and runs: its hook is back)
server_stop
for _ in $(seq 1 100); do pgrep -f "$MARK" >/dev/null || break; sleep 0.1; done
echo '{}' >"$TEST_TMP/none.json"
server_start "$D" "$TEST_TMP/none.json"
back=0
for _ in $(seq 1 150); do
	pgrep -f "$MARK" >/dev/null && { back=1; break; }
	sleep 0.1
done
[ "$back" = 1 ] && pass "a build running at the server's stop is queued again at its start" ||
	fail "a build running at the server's stop is queued again at its start" "$(tail -5 "$SERVER_LOG")"
server_stop
for _ in $(seq 1 100); do pgrep -f "$MARK" >/dev/null || break; sleep 0.1; done

echo '{"builds": {"parallel": 0}}' >"$TEST_TMP/bad.json"
out="$("$WARREN" serve --data "$TEST_TMP/bad-data" --config "$TEST_TMP/bad.json" 2>&1)"
[ "$?" = 2 ] && echo "$out" | grep -q 'builds.parallel' &&
	pass "builds.parallel 0 is refused, naming the key" || fail "builds.parallel 0 is refused, naming the key" "$out"
