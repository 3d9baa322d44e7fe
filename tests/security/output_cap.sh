#!/bin/bash
# An agent cannot fill the store with output: a session keeps at most
# limits.max_output bytes of its agent's output across all its turns, says
# so once with a marker line, and the rest is dropped; follow-ups do not
# reset it (also across a server restart); other sessions keep theirs.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../integration/control_lib.sh"

greeter_remote
echo "{\"limits\": {\"max_output\": \"64K\"}, \"repositories\": [{\"name\": \"greeter\", \"url\": \"$REMOTE\"}]}" >"$TEST_TMP/serve.json"
server_start "$TEST_TMP/data" "$TEST_TMP/serve.json"

# 2,000 lines of 100 bytes: 200 KB, over the 64 KiB cap
S="$(submit greeter "print a lot" 'i=0; while [ $i -lt 2000 ]; do printf "%0100d\n" $i; i=$((i+1)); done')"
wait_state "$S" review 60
stored() { events_json "$1" | jq '[.events[] | select(.kind == "output" and (.data.truncated | not)) | .data.line | length] | add // 0'; }
markers() { events_json "$1" | jq '[.events[] | select(.kind == "output" and .data.truncated)] | length'; }
n="$(stored "$S")"
[ "$n" -le 65536 ] && [ "$n" -gt 60000 ] && pass "a session keeps at most limits.max_output of output ($n bytes)" || fail "a session keeps at most limits.max_output of output" "$n"
[ "$(markers "$S")" = 1 ] && events_json "$S" | jq -e '[.events[] | select(.data.truncated)][0].data.line | test("limits.max_output")' >/dev/null &&
	pass "the cap is said once, with a marker line" || fail "the cap is said once, with a marker line" "$(markers "$S")"
api POST "/api/v1/sessions/$S/messages" '{"text": "more"}'
wait_turns "$S" 2 60
wait_state "$S" review 60
[ "$(stored "$S")" = "$n" ] && [ "$(markers "$S")" = 1 ] && pass "a follow-up does not reset the cap" || fail "a follow-up does not reset the cap" "$(stored "$S") $(markers "$S")"
server_stop
server_start "$TEST_TMP/data" "$TEST_TMP/serve.json"
api POST "/api/v1/sessions/$S/messages" '{"text": "again"}'
wait_turns "$S" 3 60
wait_state "$S" review 60
[ "$(stored "$S")" = "$n" ] && pass "nor does a server restart" || fail "nor does a server restart" "$(stored "$S")"
S2="$(submit greeter "a little" 'echo small; echo output')"
wait_state "$S2" review 60
[ "$(stored "$S2")" = 11 ] && [ "$(markers "$S2")" = 0 ] && pass "another session keeps its own output" || fail "another session keeps its own output" "$(stored "$S2")"
server_stop
