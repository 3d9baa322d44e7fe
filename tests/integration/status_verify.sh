#!/bin/bash
# A failed verification does not look like success: the README's quick
# start (its sed is not idempotent, so every retry adds a "!") ends with
# `warren run --follow` exiting 4 and a final line that says verification
# failed after 3 attempts; --follow and `warren logs` show each verification
# (attempt, command, status, the tail of its output) and the result; the
# retry message a command agent gets names the attempt and how to hand the
# change back; a passing session still exits 0; for the built-in agent,
# `warren logs` shows each tool call and its words.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"

cp -a "$ROOT_DIR/tests/fixtures/c-hello" "$TEST_TMP/c-hello"
g -C "$TEST_TMP/c-hello" init -q -b main
g -C "$TEST_TMP/c-hello" add -A
g -C "$TEST_TMP/c-hello" commit -q -m initial
greeter_remote
cat >"$TEST_TMP/serve.json" <<EOF2
{"model": {"provider": "replay", "replay": "$ROOT_DIR/tests/fixtures/replay/fix-after-verify.json"},
 "repositories": [{"name": "c-hello", "url": "$TEST_TMP/c-hello"}, {"name": "greeter", "url": "$REMOTE"}]}
EOF2
server_start "$TEST_TMP/data" "$TEST_TMP/serve.json"
W() { "$WARREN" "$@" --server "$URL" --token "$TOKEN"; }

W run --repo c-hello --follow --agent 'printf "%s\n" "$WARREN_PROMPT" >>/tmp/prompts; sed -i "s/%s, %s!/%s, %s!!/" src/greet.c && make hello && ./hello' \
	"more excitement" >"$TEST_TMP/run.out" 2>"$TEST_TMP/run.err"
rc=$?
S="$(head -1 "$TEST_TMP/run.err" | awk '{print $2}')"
[ "$rc" = 4 ] && pass "run --follow exits 4 when the session rests in review with failed verification" || fail "run --follow exits 4 when the session rests in review with failed verification" "rc=$rc $(tail -2 "$TEST_TMP/run.err")"
tail -1 "$TEST_TMP/run.err" | grep -q "^$S review, verification failed after 3 attempts" &&
	pass "its final line says verification failed after 3 attempts" || fail "its final line says verification failed after 3 attempts" "$(tail -1 "$TEST_TMP/run.err")"
[ "$(grep -c 'verify attempt [123]: failed on commit' "$TEST_TMP/run.err")" = 3 ] && grep -q '\$ make test: failed (exit status 2)' "$TEST_TMP/run.err" &&
	grep -q "| FAIL default greeting: got 'hello, world!!'" "$TEST_TMP/run.err" &&
	pass "--follow shows each verification: attempt, command, status, the tail of its output" || fail "--follow shows each verification: attempt, command, status, the tail of its output" "$(grep -i verif "$TEST_TMP/run.err" | head -5)"
grep -q 'result: commit [0-9a-f]\{12\}, 1 file +1 -1 (.* build outputs left out)' "$TEST_TMP/run.err" &&
	pass "--follow shows the result" || fail "--follow shows the result" "$(grep result "$TEST_TMP/run.err")"
W logs "$S" >"$TEST_TMP/logs.out" 2>&1
[ "$(grep -c '^-- verify attempt' "$TEST_TMP/logs.out")" = 3 ] && grep -q '^-- result: commit' "$TEST_TMP/logs.out" &&
	pass "warren logs shows the verifications and the result" || fail "warren logs shows the verifications and the result" "$(grep '^--' "$TEST_TMP/logs.out" | head)"
prompts="$(sandbox_exec_in "$S" cat /tmp/prompts)"
echo "$prompts" | grep -q 'failed (attempt 1 of 3)' && echo "$prompts" | grep -q 'exit with status 0: Warren verifies again' && ! echo "$prompts" | grep -q 'call finish' &&
	pass "a command agent's retry message names the attempt and how to hand the change back" || fail "a command agent's retry message names the attempt and how to hand the change back" "$(echo "$prompts" | head -3)"

W run --repo c-hello --wait --agent 'echo "# notes" >NOTES.md' "notes" >"$TEST_TMP/ok.out" 2>&1
rc=$?
[ "$rc" = 0 ] && grep -q ' review' "$TEST_TMP/ok.out" && ! grep -q 'verification failed' "$TEST_TMP/ok.out" &&
	pass "a session whose verification passed exits 0" || fail "a session whose verification passed exits 0" "rc=$rc $(cat "$TEST_TMP/ok.out")"

# the built-in agent (a recorded transcript): each tool call and its words
B="$(submit_builtin greeter "make the greeting friendlier")"
wait_state "$B" review 90
W logs "$B" >"$TEST_TMP/b.out" 2>&1
grep -q '^-- tool [a-z_]*: ' "$TEST_TMP/b.out" && grep -q '^--   -> ' "$TEST_TMP/b.out" &&
	pass "warren logs shows the built-in agent's tool calls and their results" || fail "warren logs shows the built-in agent's tool calls and their results" "$(grep '^--' "$TEST_TMP/b.out" | head)"
server_stop
