#!/bin/bash
# A build never outlives the server: stopping `warren serve` (SIGTERM) in the
# middle of a hung snapshot build leaves nothing behind - no hook process,
# no sandbox (record, init, cgroup), no builder.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"

HUNG="$TEST_TMP/hung"
mkdir -p "$HUNG"
# a hook that hangs: a sleep of a length no other process here has
SECS=$((3000 + $$ % 1000))
MARK="sleep $SECS"
echo "{\"onCreateCommand\": \"$MARK\"}" >"$HUNG/warren.json"
g -C "$HUNG" init -q -b main
g -C "$HUNG" add -A
g -C "$HUNG" commit -q -m initial
echo "{\"repositories\": [{\"name\": \"hung\", \"url\": \"$HUNG\"}]}" >"$TEST_TMP/serve.json"
server_start "$TEST_TMP/data" "$TEST_TMP/serve.json"
for _ in $(seq 1 100); do
	pgrep -f "$MARK" >/dev/null && break
	sleep 0.1
done
pgrep -f "$MARK" >/dev/null && pass "the hung build's hook runs" || fail "the hung build's hook runs" "$(tail -5 "$SERVER_LOG")"
# a session waits for that build: it says so, and a cancel ends it at once
S="$(submit hung "x" 'true')"
for _ in $(seq 1 50); do
	api GET "/api/v1/sessions/$S"
	jget .reason | grep -q 'waiting for the snapshot build of hung' && break
	sleep 0.1
done
jget .reason | grep -q 'waiting for the snapshot build of hung, started [0-9]* s ago' &&
	events_json "$S" | jq -e '[.events[] | select(.kind == "snapshot" and .data.waiting)] | length == 1' >/dev/null &&
	pass "a session waiting for the build says so (reason and event)" || fail "a session waiting for the build says so (reason and event)" "$(jget .state) $(jget .reason)"
t0="$(date +%s%N)"
"$WARREN" cancel "$S" --server "$URL" --token "$TOKEN" >/dev/null 2>&1
wait_state "$S" cancelled 10
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$STATE" = cancelled ] && [ "$ms" -lt 5000 ] && pass "cancel of a session waiting for a build ends it at once (${ms} ms)" ||
	fail "cancel of a session waiting for a build ends it at once" "$STATE after $ms ms"
# a session whose own runner runs the build (the registration's build
# was cancelled: nobody else builds): its cancel ends it at once and
# stops that build, which nobody else waits for
"$WARREN" repo cancel-build hung --server "$URL" --token "$TOKEN" >/dev/null 2>&1
for _ in $(seq 1 100); do pgrep -f "$MARK" >/dev/null || break; sleep 0.1; done
S2="$(submit hung "y" 'true')"
for _ in $(seq 1 100); do pgrep -f "$MARK" >/dev/null && break; sleep 0.1; done
pgrep -f "$MARK" >/dev/null && pass "the session's runner builds the snapshot itself" ||
	fail "the session's runner builds the snapshot itself" "$(tail -5 "$SERVER_LOG")"
t0="$(date +%s%N)"
"$WARREN" cancel "$S2" --server "$URL" --token "$TOKEN" >/dev/null 2>&1
wait_state "$S2" cancelled 10
ms=$((($(date +%s%N) - t0) / 1000000))
for _ in $(seq 1 100); do pgrep -f "$MARK" >/dev/null || break; sleep 0.1; done
api GET /api/v1/repositories
berr="$(echo "$BODY" | jq -r '.repositories[] | select(.name == "hung") | .build.state + ": " + (.build.error // "")')"
[ "$STATE" = cancelled ] && [ "$ms" -lt 5000 ] && ! pgrep -f "$MARK" >/dev/null && echo "$berr" | grep -q "^failed: cancelled by" &&
	pass "cancel of a session building its own snapshot ends it and its build at once (${ms} ms)" ||
	fail "cancel of a session building its own snapshot ends it and its build at once" "$STATE after $ms ms; hook: $(pgrep -af "$MARK"); build: $berr"
before_sb="$(warren_records | wc -l)"
server_stop
gone=0
for _ in $(seq 1 100); do
	if ! pgrep -f "$MARK" >/dev/null && [ -z "$(pgrep -f 'warren snapshot refresh')" ] &&
		[ -z "$(warren_records)" ]; then
		gone=1
		break
	fi
	sleep 0.1
done
[ "$gone" = 1 ] && pass "after the server's stop: no hook, no builder, no sandbox record (of $before_sb)" ||
	fail "after the server's stop: no hook, no builder, no sandbox record" "hook: $(pgrep -af "$MARK") builder: $(pgrep -af 'snapshot refresh') records: $(warren_records)"
"$WARREN" sandbox ls >/dev/null 2>&1
live=""
for p in $(pgrep -f warren-init); do
	[ "$(awk '/^State:/ {print $2}' "/proc/$p/status" 2>/dev/null)" != Z ] && live="$live $p"
done
[ -z "$live" ] && [ -z "$(warren_cgroups)" ] && pass "no sandbox init or cgroup left" || fail "no sandbox init or cgroup left" "$live $(warren_cgroups)"

# a hook that prints nothing for builds.hung_after is stopped as hung, and
# says so where the repository is; the build leaves nothing either
start="$(date +%s)"
out="$(WARREN_HOME="$TEST_TMP/cli" "$WARREN" snapshot build --hung-after 2s "$HUNG" 2>&1)"
rc=$?
took=$(($(date +%s) - start))
[ "$rc" != 0 ] && [ "$took" -lt 20 ] && echo "$out" | grep -q "hook onCreateCommand printed nothing for 2 s: stopped as hung" &&
	pass "snapshot build --hung-after: a silent hook is stopped as hung, and says so (${took}s)" || fail "snapshot build --hung-after: a silent hook is stopped as hung, and says so" "rc=$rc ${took}s $(echo "$out" | tail -3)"
! pgrep -f "$MARK" >/dev/null && [ -z "$(warren_records)" ] && pass "the stopped build leaves no hook or sandbox" || fail "the stopped build leaves no hook or sandbox" "$(pgrep -af "$MARK") $(warren_records)"
echo "{\"builds\": {\"hung_after\": \"2s\"}, \"repositories\": [{\"name\": \"hung\", \"url\": \"$HUNG\"}]}" >"$TEST_TMP/serve2.json"
server_start "$TEST_TMP/data2" "$TEST_TMP/serve2.json"
state=""
for _ in $(seq 1 150); do
	api GET /api/v1/repositories
	state="$(echo "$BODY" | jq -r '.repositories[0].build.state // empty')"
	[ "$state" = failed ] && break
	sleep 0.2
done
echo "$BODY" | jq -r '.repositories[0].build.error' | grep -q 'stopped as hung' &&
	pass "builds.hung_after: the server's build is stopped as hung, seen on the repository" || fail "builds.hung_after: the server's build is stopped as hung, seen on the repository" "$state $BODY"
server_stop
