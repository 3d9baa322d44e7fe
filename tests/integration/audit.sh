#!/bin/bash
# The audit log end to end: a real server's sessions (a command agent that
# runs the project's tests, a follow-up, an approval that pushes, a cancel)
# leave a hash-chained log per session that `warren audit verify` accepts
# and lists (state changes with who caused them, the agent's command with
# its exit status, the decision and the push); `warren audit export` is
# JSON Lines; a one-byte edit, a deleted line, two swapped lines and a cut
# tail (against an anchored head) make verify fail and name the line; a
# record torn by a crash is cut off and recorded when the server goes on.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"

# --- a repository with a test script ------------------------------------------
R="$TEST_TMP/proj"
mkdir -p "$R"
echo '{"customizations": {"warren": {"verify": ["sh", "test.sh"]}}}' >"$R/warren.json"
printf 'hello\n' >"$R/greeting.txt"
printf '#!/bin/sh\ngrep -q hello greeting.txt && echo tests-ok\n' >"$R/test.sh"
git -C "$R" init -q -b main
git -C "$R" -c user.email=t@warren -c user.name=test add -A
git -C "$R" -c user.email=t@warren -c user.name=test commit -q -m initial

D="$TEST_TMP/data"
server_start "$D"
api POST /api/v1/repositories "{\"url\": \"$R\", \"name\": \"proj\"}"
[ "$CODE" = 201 ] || fail "register the repository" "$CODE $BODY"
for _ in $(seq 1 150); do
	api GET /api/v1/snapshots
	[ "$(jget '.snapshots | length')" -ge 1 ] 2>/dev/null && break
	sleep 0.2
done

audit() { "$WARREN" audit "$@"; }

# --- a session to review, a follow-up, approval and push -------------------------
S1="$(submit proj "say hi" 'echo hi; echo change >>greeting.txt; sh test.sh')"
wait_state "$S1" review 90 || fail "session 1 reaches review" "$STATE $(session_log "$S1" | tail -5)"
api POST "/api/v1/sessions/$S1/messages" '{"text": "and once more"}'
[ "$CODE" = 202 ] || fail "a follow-up is accepted" "$CODE $BODY"
wait_turns "$S1" 2 60
wait_state "$S1" review 90
api POST "/api/v1/sessions/$S1/approve"
[ "$(jget .state)" = pushed ] || fail "session 1 is approved and pushed" "$CODE $BODY"

LOG="$D/audit/$S1.jsonl"
[ -f "$LOG" ] && [ "$(stat -c %a "$LOG")" = 600 ] && [ "$(stat -c %a "$D/audit")" = 700 ] &&
	pass "one log per session, DATA/audit/<id>.jsonl, 0600 in a 0700 directory" ||
	fail "one log per session, DATA/audit/<id>.jsonl, 0600 in a 0700 directory" "$(ls -la "$D/audit" 2>&1 | head -5)"

out="$(audit verify "$S1" --data "$D" 2>&1)"
rc=$?
n="$(wc -l <"$LOG")"
[ $rc = 0 ] && echo "$out" | grep -q "^ok: $n record(s), chain intact" && echo "$out" | grep -Eq '^head: [0-9a-f]{64}$' &&
	pass "warren audit verify: exit 0, the chain intact, the head hash printed" ||
	fail "warren audit verify: exit 0, the chain intact, the head hash printed" "rc=$rc $(echo "$out" | tail -3)"
for st in provisioning running verifying review approved pushed; do
	echo "$out" | grep -q "state .*\"state\":\"$st\"" || { fail "verify lists every state change" "no $st: $(echo "$out" | grep ' state ' | head -20)"; st=x; break; }
done
[ "$st" != x ] && pass "verify lists every state change (provisioning ... pushed)"
echo "$out" | grep -E ' agent +exec ' | grep -F 'echo hi; echo change >>greeting.txt; sh test.sh' | grep -q '"exit_code":0' &&
	pass "the agent's command is recorded with its exit status (actor agent, kind exec)" ||
	fail "the agent's command is recorded with its exit status (actor agent, kind exec)" "$(echo "$out" | grep exec)"

EX="$(audit export "$S1" --data "$D")"
[ "$(echo "$EX" | jq -c . 2>/dev/null | wc -l)" = "$n" ] && cmp -s <(echo "$EX") "$LOG" &&
	pass "warren audit export: the log verbatim, one JSON object per line" ||
	fail "warren audit export: the log verbatim, one JSON object per line" "$(echo "$EX" | head -2)"
echo "$EX" | jq -e -s 'all(.[]; (.actor | test("^(system|agent|user:.+)$")) and (.kind | type == "string")
	and (.prev | test("^[0-9a-f]{64}$")) and (.hash | test("^[0-9a-f]{64}$")) and (.details | type == "object"))
	and ([.[].seq] == [range(1; length + 1)])' >/dev/null &&
	pass "every record: actor, kind, details, seq 1..N, prev and hash" ||
	fail "every record: actor, kind, details, seq 1..N, prev and hash" "$(echo "$EX" | head -2)"
kinds="$(echo "$EX" | jq -r '"\(.actor) \(.kind)"' | sort -u | tr '\n' ',')"
for want in "user:admin submit" "user:admin message" "user:admin decision" "system push" "system verify" "system result" "agent exec" "system turn"; do
	case ",$kinds" in *",$want,"*) ;; *) fail "the log covers submit, follow-up, turns, execs, verify, result, decision, push" "no '$want' in $kinds"; want=x; break ;; esac
done
[ "$want" != x ] && pass "the log covers submit, follow-up, turns, execs, verify, result, decision, push"
echo "$EX" | jq -e -s '[.[] | select(.kind == "state" and .details.state == "approved")][0].actor == "user:admin"' >/dev/null &&
	echo "$EX" | jq -e -s '[.[] | select(.kind == "push")][0].details | (.ref | startswith("refs/heads/warren/")) and (.commit | length == 40)' >/dev/null &&
	pass "approval is the user's state change; the push names the ref and commit" ||
	fail "approval is the user's state change; the push names the ref and commit" "$(echo "$EX" | jq -c 'select(.kind == "push" or .details.state == "approved")')"
[ "$(echo "$EX" | jq -s '[.[] | select(.kind == "exec")] | length')" = 2 ] &&
	echo "$EX" | jq -e -s '[.[] | select(.kind == "exec")] | all(.details.output_lines >= 2)' >/dev/null &&
	pass "one exec record per agent run (two turns), output lines counted, not recorded" ||
	fail "one exec record per agent run (two turns), output lines counted, not recorded" "$(echo "$EX" | jq -c 'select(.kind == "exec") | .details')"
! echo "$EX" | grep -q '"kind":"output"' && pass "no record per output line" || fail "no record per output line" "output records found"

# --- a cancel ----------------------------------------------------------------------
S2="$(submit proj "wait" 'echo waiting; sleep 60')"
wait_output "$S2" waiting 60
api POST "/api/v1/sessions/$S2/cancel"
wait_state "$S2" cancelled 30
out="$(audit verify "$S2" --data "$D" 2>&1)"
rc=$?
[ $rc = 0 ] && echo "$out" | grep -E ' user:admin +cancel ' | grep -q '"state":"running"' &&
	echo "$out" | grep -E ' agent +exec ' | grep -q 'sleep 60' &&
	echo "$out" | grep -q ' state .*"state":"cancelled"' &&
	pass "a cancel: the user's request, the stopped agent's exec and the cancelled state, chain intact" ||
	fail "a cancel: the user's request, the stopped agent's exec and the cancelled state, chain intact" "rc=$rc $(echo "$out" | tail -6)"

# --- tampering: on a copy of the log -------------------------------------------------
T="$TEST_TMP/tamper"
mkdir -p "$T/audit"
fresh() { cp "$LOG" "$T/audit/$S1.jsonl"; }
HEAD="$(audit verify "$S1" --data "$D" --quiet | sed -n 's/^head: //p')"

fresh
ln="$(grep -n '"kind":"exec"' "$T/audit/$S1.jsonl" | head -1 | cut -d: -f1)"
sed -i "${ln}s/\"exit_code\":0/\"exit_code\":1/" "$T/audit/$S1.jsonl"
out="$(audit verify "$S1" --data "$T" 2>&1)"
rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "^BROKEN: line $ln: hash mismatch (edited?)" &&
	pass "a one-byte edit (exit_code 0 -> 1): verify exits 1 naming the line" ||
	fail "a one-byte edit (exit_code 0 -> 1): verify exits 1 naming the line" "rc=$rc line $ln: $(echo "$out" | tail -2)"

fresh
sed -i '4d' "$T/audit/$S1.jsonl"
out="$(audit verify "$S1" --data "$T" --quiet 2>&1)"
rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "^BROKEN: line 4: seq 5 follows 3 (deleted or reordered?)" &&
	pass "a deleted line: verify exits 1 naming the line" ||
	fail "a deleted line: verify exits 1 naming the line" "rc=$rc $(echo "$out" | tail -2)"

fresh
sed -i -n '1p; 2{h; d}; 3{p; x; p; d}; 4,$p' "$T/audit/$S1.jsonl"
out="$(audit verify "$S1" --data "$T" --quiet 2>&1)"
rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "^BROKEN: line 2: seq 3 follows 1" &&
	pass "two lines swapped: verify exits 1 naming the line" ||
	fail "two lines swapped: verify exits 1 naming the line" "rc=$rc $(echo "$out" | tail -2)"

fresh
sed -i '$d' "$T/audit/$S1.jsonl"
audit verify "$S1" --data "$T" --quiet >/dev/null 2>&1
rc1=$?
out="$(audit verify "$S1" --data "$T" --quiet --anchor "$HEAD" 2>&1)"
rc2=$?
ok_anchor="$(audit verify "$S1" --data "$D" --quiet --anchor "$HEAD" 2>&1)"
rc3=$?
[ $rc1 = 0 ] && [ $rc2 = 1 ] && echo "$out" | grep -q "anchored hash .* is not in the chain" && [ $rc3 = 0 ] &&
	pass "the last line cut off: the chain holds, the anchored head does not (exit 1)" ||
	fail "the last line cut off: the chain holds, the anchored head does not (exit 1)" "rc=$rc1/$rc2/$rc3 $out $ok_anchor"

fresh
j="$(audit verify "$S1" --data "$T" --json)"
[ "$(echo "$j" | jq -r .ok)" = true ] && [ "$(echo "$j" | jq -r .records)" = "$n" ] && [ "$(echo "$j" | jq -r .head)" = "$HEAD" ] &&
	pass "verify --json: ok, records, head" || fail "verify --json: ok, records, head" "$j"
sed -i "3s/\"kind\":\"/\"kind\":\"x/" "$T/audit/$S1.jsonl"
j="$(audit verify "$S1" --data "$T" --json)"
rc=$?
[ $rc = 1 ] && [ "$(echo "$j" | jq -r .ok)" = false ] && [ "$(echo "$j" | jq -r .broken.line)" = 3 ] &&
	pass "verify --json: the first broken line" || fail "verify --json: the first broken line" "rc=$rc $j"

expect_status "audit: no session id: usage (2)" 2 "$WARREN" audit verify --data "$D"
expect_status "audit: unknown verb: usage (2)" 2 "$WARREN" audit frobnicate "$S1"
expect_status "audit: a path as the id: usage (2)" 2 "$WARREN" audit verify ../etc --data "$D"
expect_status "audit: --anchor not a hash: usage (2)" 2 "$WARREN" audit verify "$S1" --data "$D" --anchor xyz
expect_output "audit: no log for the session: exit 1, says so" "no audit log for the session" "$WARREN" audit verify s-nosuchsession --data "$D"
expect_status "audit: no log for the session: exit 1" 1 "$WARREN" audit verify s-nosuchsession --data "$D"
expect_output "WARREN_HOME is the default data directory" "^ok: " env WARREN_HOME="$D" "$WARREN" audit verify "$S1" --quiet

# --- a crash mid-write: the torn record is cut off and recorded -------------------
S3="$(submit proj "rest" 'echo resting')"
wait_state "$S3" review 90
server_stop
L3="$D/audit/$S3.jsonl"
n3="$(wc -l <"$L3")"
truncate -s -7 "$L3"
out="$(audit verify "$S3" --data "$D" --quiet 2>&1)"
[ $? = 1 ] && echo "$out" | grep -q "line $n3: incomplete" &&
	pass "a torn last record: verify names it" || fail "a torn last record: verify names it" "$out"
server_start "$D"
api POST "/api/v1/sessions/$S3/messages" '{"text": "after the crash"}'
wait_turns "$S3" 2 60
wait_state "$S3" review 90
out="$(audit verify "$S3" --data "$D" 2>&1)"
rc=$?
[ $rc = 0 ] && echo "$out" | grep -E "^ +$n3 .* system +audit_recovered .*\"dropped_bytes\":" >/dev/null &&
	echo "$out" | grep -Eq ' user:admin +message ' &&
	pass "the next append cuts the torn record off, records audit_recovered, the chain holds" ||
	fail "the next append cuts the torn record off, records audit_recovered, the chain holds" "rc=$rc n3=$n3 $(echo "$out" | head -14)"

server_stop
left=""
for s in "$S1" "$S2" "$S3"; do "$WARREN" sandbox ls --all 2>/dev/null | grep -q "ws-$s" && left="$left $s"; done
[ -z "$left" ] && pass "no sandbox left" || fail "no sandbox left" "$left"
