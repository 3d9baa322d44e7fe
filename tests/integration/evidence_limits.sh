#!/bin/bash
# The limits of a change say so: a change touching more files than
# review.max_files, or whose new objects are over review.max_objects, is
# refused with the reason, the session fails and nothing can be approved;
# a change within them reaches review; the session's disk limit caps the
# change too; a bad "review" configuration is refused at start, naming the
# key.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"

greeter_remote
D="$TEST_TMP/data"

# a bad configuration: the server does not start, and says which key
echo '{"review": {"max_files": "many"}}' >"$TEST_TMP/bad.json"
out="$("$WARREN" serve --data "$TEST_TMP/bad-data" --listen 127.0.0.1:0 --config "$TEST_TMP/bad.json" 2>&1)"
rc=$?
[ $rc != 0 ] && echo "$out" | grep -q 'review.max_files' &&
	pass "a bad review.max_files is refused at start, naming the key" || fail "a bad review.max_files is refused at start, naming the key" "rc=$rc $out"
echo '{"review": {"max_size": "1M"}}' >"$TEST_TMP/bad.json"
out="$("$WARREN" serve --data "$TEST_TMP/bad-data" --listen 127.0.0.1:0 --config "$TEST_TMP/bad.json" 2>&1)"
echo "$out" | grep -q "unknown key 'max_size'" &&
	pass "an unknown review key is refused, named" || fail "an unknown review key is refused, named" "$out"

cat >"$TEST_TMP/serve.json" <<EOF
{"review": {"max_files": 3, "max_objects": "20K"},
 "repositories": [{"name": "greeter", "url": "$REMOTE"}]}
EOF
server_start "$D" "$TEST_TMP/serve.json"

# finished SESSION: waits until it rests; sets STATE and BODY
finished() {
	wait_state "$1" review 60
	[ "$STATE" = review ] || wait_state "$1" failed 30
	api GET "/api/v1/sessions/$1"
}

S1="$(submit greeter "many files" 'for i in 1 2 3 4 5; do echo $i >f$i.txt; done')"
finished "$S1"
reason="$(jget .reason)"
[ "$STATE" = failed ] && echo "$reason" | grep -q 'more than 3 files' &&
	pass "a change over review.max_files fails, saying so" || fail "a change over review.max_files fails, saying so" "$STATE $reason"
api POST "/api/v1/sessions/$S1/approve"
[ "$CODE" = 409 ] && ! git -C "$REMOTE" rev-parse -q --verify "refs/heads/warren/$S1" >/dev/null &&
	pass "a refused change cannot be approved; nothing is pushed" || fail "a refused change cannot be approved; nothing is pushed" "$CODE"
log="$(events_json "$S1")"
echo "$log" | jq -e '[.events[] | select(.kind == "result") | .data.error] | map(select(. != null)) | length == 1' >/dev/null &&
	pass "the refusal is a result event" || fail "the refusal is a result event" "$(echo "$log" | jq -c '[.events[] | select(.kind == "result")]')"

S2="$(submit greeter "a big blob" 'head -c 200000 /dev/urandom >blob.bin')"
finished "$S2"
reason="$(jget .reason)"
[ "$STATE" = failed ] && echo "$reason" | grep -q 'over the limit of 20480 bytes' &&
	pass "a change over review.max_objects fails, saying so" || fail "a change over review.max_objects fails, saying so" "$STATE $reason"

S3="$(submit greeter "small" 'echo "hello and more" >greeting.txt; echo notes >notes.txt')"
finished "$S3"
[ "$STATE" = review ] && [ "$(jget '[.outcome.result.files[].path] | join(",")')" = "greeting.txt,notes.txt" ] &&
	pass "a change within the limits reaches review" || fail "a change within the limits reaches review" "$STATE $(jget .reason)"
[ "$(jget .outcome.result.object_bytes)" -gt 0 ] 2>/dev/null && [ "$(jget .outcome.result.object_bytes)" -le 20480 ] &&
	pass "object_bytes records the change's size" || fail "object_bytes records the change's size" "$(jget .outcome.result.object_bytes)"
server_stop

# the session's disk limit caps the change: a 4 MiB blob with a 7 MiB
# limit (the workspace's filesystem holds it; with the blob counted, what
# is left of the limit cannot hold its evidence too) is refused
cat >"$TEST_TMP/serve2.json" <<EOF
{"repositories": [{"name": "greeter", "url": "$REMOTE"}]}
EOF
server_start "$TEST_TMP/data2" "$TEST_TMP/serve2.json"
S4="$(submit greeter "a blob near the disk limit" 'head -c 4194304 /dev/urandom >blob.bin' '{"disk": "7M"}')"
finished "$S4"
reason="$(jget .reason)"
[ "$STATE" = failed ] && echo "$reason" | grep -Eq 'over the limit|disk limit' &&
	pass "the session's disk limit caps the change, saying so" || fail "the session's disk limit caps the change, saying so" "$STATE $reason"
server_stop
left_sb="$( { "$WARREN" sandbox ls --data "$D"; "$WARREN" sandbox ls --data "$TEST_TMP/data2"; } 2>/dev/null | grep -c 'w[sv]-s-')"
[ "$left_sb" = 0 ] && pass "no sandbox left" || fail "no sandbox left" "$("$WARREN" sandbox ls --all)"
