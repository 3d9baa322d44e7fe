#!/bin/bash
# A repository's build history: GET /repositories/{id}/builds lists its
# builds (newest first), .../builds/{build}/log gives one's log to admins and
# reviewers (403 for a submitter), POST .../builds/cancel stops the running
# build (nothing left behind; 409 with none); `warren repo show|log|
# cancel-build`.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"

HUNG="$TEST_TMP/hung"
mkdir -p "$HUNG"
SECS=$((4000 + $$ % 1000))
MARK="sleep $SECS"
echo "{\"onCreateCommand\": \"echo hook-begins; $MARK\"}" >"$HUNG/warren.json"
g -C "$HUNG" init -q -b main
g -C "$HUNG" add -A
g -C "$HUNG" commit -q -m initial
echo "{\"repositories\": [{\"name\": \"hung\", \"url\": \"$HUNG\"}]}" >"$TEST_TMP/serve.json"
server_start "$TEST_TMP/data" "$TEST_TMP/serve.json"
export WARREN_SERVER="$URL" WARREN_TOKEN="$TOKEN"
for _ in $(seq 1 150); do
	pgrep -f "$MARK" >/dev/null && break
	sleep 0.1
done
pgrep -f "$MARK" >/dev/null && pass "the hung build's hook runs" || fail "the hung build's hook runs" "$(tail -5 "$SERVER_LOG")"
api GET /api/v1/repositories
R="$(jget '.repositories[0].id')"
B1="$(jget '.repositories[0].build.id')"
[[ "$B1" =~ ^b-[0-9]{13}-[0-9a-f]{8}$ ]] && [ "$(jget '.repositories[0].build.state')" = building ] &&
	pass "the repository's build carries its id" || fail "the repository's build carries its id" "$BODY"

api GET "/api/v1/repositories/$R/builds"
[ "$CODE" = 200 ] && [ "$(jget '.builds | length')" = 1 ] && [ "$(jget '.builds[0].id')" = "$B1" ] &&
	[ "$(jget '.builds[0].state')" = building ] && [ -n "$(jget '.builds[0].started_ms')" ] &&
	pass "GET builds: the running build" || fail "GET builds: the running build" "$CODE $BODY"

for _ in $(seq 1 50); do
	api GET "/api/v1/repositories/$R/builds/$B1/log"
	echo "$BODY" | grep -q hook-begins && break
	sleep 0.1
done
[ "$CODE" = 200 ] && echo "$BODY" | grep -q hook-begins && pass "the running build's log, so far" ||
	fail "the running build's log, so far" "$CODE $BODY"
api GET "/api/v1/repositories/$R/builds/b-0000000000000-00000000/log"
[ "$CODE" = 404 ] && pass "an unknown build's log: 404" || fail "an unknown build's log: 404" "$CODE $BODY"
api GET "/api/v1/repositories/$R/builds/nonsense/log"
[ "$CODE" = 404 ] && pass "a malformed build id: 404" || fail "a malformed build id: 404" "$CODE $BODY"

SUB="$("$WARREN" token create --user sam --role submitter 2>/dev/null)"
code="$(curl -s -o "$TEST_TMP/sub.out" -w '%{http_code}' -H "Authorization: Bearer $SUB" "$URL/api/v1/repositories/$R/builds/$B1/log")"
[ "$code" = 403 ] && pass "a submitter may not read a build's log (403)" || fail "a submitter may not read a build's log (403)" "$code $(cat "$TEST_TMP/sub.out")"
code="$(curl -s -o "$TEST_TMP/sub.out" -w '%{http_code}' -H "Authorization: Bearer $SUB" "$URL/api/v1/repositories/$R/builds")"
[ "$code" = 200 ] && jq -e '.builds[0].state == "building"' "$TEST_TMP/sub.out" >/dev/null &&
	pass "a submitter sees the builds' states" || fail "a submitter sees the builds' states" "$code $(cat "$TEST_TMP/sub.out")"
code="$(curl -s -o "$TEST_TMP/sub.out" -w '%{http_code}' -X POST -H "Authorization: Bearer $SUB" "$URL/api/v1/repositories/$R/builds/cancel")"
[ "$code" = 403 ] && pass "a submitter may not cancel a build (403)" || fail "a submitter may not cancel a build (403)" "$code"

t0="$(date +%s%N)"
api POST "/api/v1/repositories/$R/builds/cancel"
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$CODE" = 200 ] && [ "$(jget .id)" = "$B1" ] && [ "$(jget .state)" = failed ] && jget .error | grep -q '^cancelled by ' &&
	pass "cancel: the build failed, cancelled by its admin (${ms} ms)" || fail "cancel: the build failed, cancelled by its admin" "$CODE $BODY"
gone=0
for _ in $(seq 1 100); do
	if ! pgrep -f "$MARK" >/dev/null && [ -z "$(pgrep -f "snapshot refresh $HUNG")" ]; then
		gone=1
		break
	fi
	sleep 0.1
done
[ "$gone" = 1 ] && pass "after the cancel: no hook, no builder" ||
	fail "after the cancel: no hook, no builder" "$(pgrep -af "$MARK") $(pgrep -af "snapshot refresh $HUNG")"
api POST "/api/v1/repositories/$R/builds/cancel"
[ "$CODE" = 409 ] && pass "cancel with no build running: 409" || fail "cancel with no build running: 409" "$CODE $BODY"
api GET "/api/v1/repositories/$R/builds"
[ "$(jget '.builds[0].state')" = failed ] && jget '.builds[0].error' | grep -q 'cancelled by' && [ -n "$(jget '.builds[0].finished_ms')" ] &&
	pass "the list says the build was cancelled" || fail "the list says the build was cancelled" "$BODY"
api GET "/api/v1/repositories/$R/builds/$B1/log"
[ "$CODE" = 200 ] && echo "$BODY" | grep -q hook-begins && pass "the ended build's log is kept" || fail "the ended build's log is kept" "$CODE $BODY"

# a second build: a new id, newest first; the CLI's verbs
"$WARREN" repo refresh hung >/dev/null 2>&1
for _ in $(seq 1 150); do
	pgrep -f "$MARK" >/dev/null && break
	sleep 0.1
done
api GET "/api/v1/repositories/$R/builds"
B2="$(jget '.builds[0].id')"
[ "$(jget '.builds | length')" = 2 ] && [ "$B2" != "$B1" ] && [ "$(jget '.builds[1].id')" = "$B1" ] &&
	pass "a refresh is a new build, listed first" || fail "a refresh is a new build, listed first" "$BODY"
out="$("$WARREN" repo show hung 2>&1)"
echo "$out" | grep -q "^build: building" && echo "$out" | grep -q "$B2 *building" && echo "$out" | grep -q "$B1 *failed.*cancelled by" &&
	pass "repo show: the repository and its builds" || fail "repo show: the repository and its builds" "$out"
"$WARREN" repo show hung --json | jq -e --arg b "$B2" '.builds[0].id == $b and .build.id == $b and .name == "hung"' >/dev/null &&
	pass "repo show --json" || fail "repo show --json" "$("$WARREN" repo show hung --json 2>&1)"
"$WARREN" repo log hung "$B1" 2>&1 | grep -q hook-begins && pass "repo log R BUILD" || fail "repo log R BUILD" "$("$WARREN" repo log hung "$B1" 2>&1)"
for _ in $(seq 1 50); do
	"$WARREN" repo log hung 2>/dev/null | grep -q hook-begins && break
	sleep 0.1
done
"$WARREN" repo log hung 2>&1 | grep -q hook-begins && pass "repo log R: the last build's" || fail "repo log R: the last build's" "$("$WARREN" repo log hung 2>&1)"
out="$("$WARREN" repo cancel-build hung 2>&1)"
rc=$?
[ "$rc" = 0 ] && echo "$out" | grep -q "build $B2 of hung: failed (cancelled by" && pass "repo cancel-build" || fail "repo cancel-build" "rc=$rc $out"
out="$("$WARREN" repo cancel-build hung 2>&1)"
rc=$?
[ "$rc" != 0 ] && echo "$out" | grep -q 409 && pass "repo cancel-build with none running: an error (409)" || fail "repo cancel-build with none running: an error (409)" "rc=$rc $out"
! pgrep -f "$MARK" >/dev/null && [ -z "$(pgrep -f "snapshot refresh $HUNG")" ] && pass "nothing left running" || fail "nothing left running" "$(pgrep -af "$MARK") $(pgrep -af "snapshot refresh $HUNG")"
[ -f "$TEST_TMP/data/builds/$R/$B1.json" ] && [ -f "$TEST_TMP/data/builds/$R/$B2.log" ] && pass "each build's record and log on disk" || fail "each build's record and log on disk" "$(ls "$TEST_TMP/data/builds/$R")"
server_stop
