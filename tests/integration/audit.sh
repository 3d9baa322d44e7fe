#!/bin/bash
# The audit log end to end: a real server's sessions (a command agent that
# runs the project's tests, a follow-up, an approval that pushes, a cancel)
# leave a hash-chained log per session, in the store, that `warren audit
# verify` accepts and lists (state changes with who caused them, the
# agent's command with its exit status, the decision and the push); `warren
# audit export` is JSON Lines; a record edited, deleted or reordered in the
# store's table (sqlite3), and in an older server's log file, a one-byte
# edit, a deleted line, two swapped lines and a cut tail (against an
# anchored head) make verify fail and name the line; an older server's log
# file is imported into the store at start, and the chain goes on from it.
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

DB="$D/warren.db"
# the records of session $1 as the store holds them, in the chain's order
records() { sqlite3 "${2:-$DB}" "SELECT record FROM audit_records WHERE session_id = '$1' ORDER BY seq"; }
n="$(sqlite3 "$DB" "SELECT COUNT(*) FROM audit_records WHERE session_id = '$S1'")"
[ "$n" -ge 10 ] 2>/dev/null && [ ! -e "$D/audit/$S1.jsonl" ] &&
	pass "the session's chain is in the store (audit_records), no log file" ||
	fail "the session's chain is in the store (audit_records), no log file" "n=$n $(ls -la "$D/audit" 2>&1 | head -3)"

out="$(audit verify "$S1" --data "$D" 2>&1)"
rc=$?
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
[ "$(echo "$EX" | jq -c . 2>/dev/null | wc -l)" = "$n" ] && cmp -s <(echo "$EX") <(records "$S1") &&
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

# --- tampering in the store: on a copy of it -------------------------------------
T="$TEST_TMP/tamper-store"
mkdir -p "$T"
TDB="$T/warren.db"
fresh_db() { rm -f "$TDB"; sqlite3 "$DB" ".backup '$TDB'"; }
tsql() { sqlite3 "$TDB" "$1"; }
HEAD="$(audit verify "$S1" --data "$D" --quiet | sed -n 's/^head: //p')"

fresh_db
ln="$(tsql "SELECT MIN(seq) FROM audit_records WHERE session_id = '$S1' AND record LIKE '%\"kind\":\"exec\"%'")"
tsql "UPDATE audit_records SET record = replace(record, '\"exit_code\":0', '\"exit_code\":1') WHERE session_id = '$S1' AND seq = $ln"
out="$(audit verify "$S1" --data "$T" 2>&1)"
rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "^BROKEN: line $ln: hash mismatch (edited?)" &&
	pass "store: a record's text edited (exit_code 0 -> 1, UPDATE): verify exits 1 naming the record" ||
	fail "store: a record's text edited (exit_code 0 -> 1, UPDATE): verify exits 1 naming the record" "rc=$rc line $ln: $(echo "$out" | tail -2)"

fresh_db
tsql "DELETE FROM audit_records WHERE session_id = '$S1' AND seq = 4"
out="$(audit verify "$S1" --data "$T" --quiet 2>&1)"
rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "^BROKEN: line 4: seq 5 follows 3 (deleted or reordered?)" &&
	pass "store: a record in the middle deleted: verify exits 1 naming it" ||
	fail "store: a record in the middle deleted: verify exits 1 naming it" "rc=$rc $(echo "$out" | tail -2)"

fresh_db
tsql "UPDATE audit_records SET seq = -2 WHERE session_id = '$S1' AND seq = 2;
	UPDATE audit_records SET seq = 2 WHERE session_id = '$S1' AND seq = 3;
	UPDATE audit_records SET seq = 3 WHERE session_id = '$S1' AND seq = -2"
out="$(audit verify "$S1" --data "$T" --quiet 2>&1)"
rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "^BROKEN: line 2: seq 3 follows 1" &&
	pass "store: two records reordered: verify exits 1 naming the record" ||
	fail "store: two records reordered: verify exits 1 naming the record" "rc=$rc $(echo "$out" | tail -2)"

fresh_db
tsql "UPDATE audit_records SET record = (SELECT record FROM audit_records WHERE session_id = '$S2' AND seq = 3) WHERE session_id = '$S1' AND seq = 3"
out="$(audit verify "$S1" --data "$T" --quiet 2>&1)"
rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "^BROKEN: line 3: session .* (moved from another log?)" &&
	pass "store: a record of another session's chain moved in: verify exits 1 naming it" ||
	fail "store: a record of another session's chain moved in: verify exits 1 naming it" "rc=$rc $(echo "$out" | tail -2)"

fresh_db
tsql "DELETE FROM audit_records WHERE session_id = '$S1' AND seq = (SELECT MAX(seq) FROM audit_records WHERE session_id = '$S1')"
audit verify "$S1" --data "$T" --quiet >/dev/null 2>&1
rc1=$?
out="$(audit verify "$S1" --data "$T" --quiet --anchor "$HEAD" 2>&1)"
rc2=$?
[ $rc1 = 0 ] && [ $rc2 = 1 ] && echo "$out" | grep -q "anchored hash .* is not in the chain" &&
	pass "store: the last record cut off: the chain holds, the anchored head does not (exit 1)" ||
	fail "store: the last record cut off: the chain holds, the anchored head does not (exit 1)" "rc=$rc1/$rc2 $out"

fresh_db
j="$(audit verify "$S1" --store "$TDB" --data "$TEST_TMP/nowhere" --json)"
[ "$(echo "$j" | jq -r .ok)" = true ] && [ "$(echo "$j" | jq -r .source)" = store ] && [ "$(echo "$j" | jq -r .records)" = "$n" ] &&
	pass "verify --store names the store; --json says the source" || fail "verify --store names the store; --json says the source" "$j"
echo "{\"store\": \"$TDB\"}" >"$T/serve.json"
expect_output "verify --config: the configuration's store" "^ok: $n record" "$WARREN" audit verify "$S1" --config "$T/serve.json" --data "$TEST_TMP/nowhere" --quiet

# --- an older server's log file: read while the store has none of it --------------
T="$TEST_TMP/tamper"
mkdir -p "$T/audit"
LOG="$TEST_TMP/s1.jsonl"
audit export "$S1" --data "$D" >"$LOG"
fresh() { cp "$LOG" "$T/audit/$S1.jsonl"; }

fresh
out="$(audit verify "$S1" --data "$T" --quiet 2>&1)"
[ $? = 0 ] && echo "$out" | grep -q "^ok: $n record(s)" && echo "$out" | grep -q "^head: $HEAD" &&
	pass "a log file (no store in its data directory): verify reads it, the same head" ||
	fail "a log file (no store in its data directory): verify reads it, the same head" "$out"

fresh
ln="$(grep -n '"kind":"exec"' "$T/audit/$S1.jsonl" | head -1 | cut -d: -f1)"
sed -i "${ln}s/\"exit_code\":0/\"exit_code\":1/" "$T/audit/$S1.jsonl"
out="$(audit verify "$S1" --data "$T" 2>&1)"
rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "^BROKEN: line $ln: hash mismatch (edited?)" &&
	pass "file: a one-byte edit (exit_code 0 -> 1): verify exits 1 naming the line" ||
	fail "file: a one-byte edit (exit_code 0 -> 1): verify exits 1 naming the line" "rc=$rc line $ln: $(echo "$out" | tail -2)"

fresh
sed -i '4d' "$T/audit/$S1.jsonl"
out="$(audit verify "$S1" --data "$T" --quiet 2>&1)"
rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "^BROKEN: line 4: seq 5 follows 3 (deleted or reordered?)" &&
	pass "file: a deleted line: verify exits 1 naming the line" ||
	fail "file: a deleted line: verify exits 1 naming the line" "rc=$rc $(echo "$out" | tail -2)"

fresh
sed -i -n '1p; 2{h; d}; 3{p; x; p; d}; 4,$p' "$T/audit/$S1.jsonl"
out="$(audit verify "$S1" --data "$T" --quiet 2>&1)"
rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "^BROKEN: line 2: seq 3 follows 1" &&
	pass "file: two lines swapped: verify exits 1 naming the line" ||
	fail "file: two lines swapped: verify exits 1 naming the line" "rc=$rc $(echo "$out" | tail -2)"

fresh
sed -i '$d' "$T/audit/$S1.jsonl"
audit verify "$S1" --data "$T" --quiet >/dev/null 2>&1
rc1=$?
out="$(audit verify "$S1" --data "$T" --quiet --anchor "$HEAD" 2>&1)"
rc2=$?
ok_anchor="$(audit verify "$S1" --data "$D" --quiet --anchor "$HEAD" 2>&1)"
rc3=$?
[ $rc1 = 0 ] && [ $rc2 = 1 ] && echo "$out" | grep -q "anchored hash .* is not in the chain" && [ $rc3 = 0 ] &&
	pass "file: the last line cut off: the chain holds, the anchored head does not (exit 1)" ||
	fail "file: the last line cut off: the chain holds, the anchored head does not (exit 1)" "rc=$rc1/$rc2/$rc3 $out $ok_anchor"

fresh
j="$(audit verify "$S1" --data "$T" --json)"
[ "$(echo "$j" | jq -r .ok)" = true ] && [ "$(echo "$j" | jq -r .records)" = "$n" ] && [ "$(echo "$j" | jq -r .head)" = "$HEAD" ] &&
	[ "$(echo "$j" | jq -r .source)" = file ] &&
	pass "verify --json: ok, records, head" || fail "verify --json: ok, records, head" "$j"
sed -i "3s/\"kind\":\"/\"kind\":\"x/" "$T/audit/$S1.jsonl"
j="$(audit verify "$S1" --data "$T" --json)"
rc=$?
[ $rc = 1 ] && [ "$(echo "$j" | jq -r .ok)" = false ] && [ "$(echo "$j" | jq -r .broken.line)" = 3 ] &&
	pass "verify --json: the first broken line" || fail "verify --json: the first broken line" "rc=$rc $j"
cmp -s <(audit export "$S1" --data "$T") "$T/audit/$S1.jsonl" &&
	pass "export of a log file: the file as it is" || fail "export of a log file: the file as it is" ""

expect_status "audit: no session id: usage (2)" 2 "$WARREN" audit verify --data "$D"
expect_status "audit: unknown verb: usage (2)" 2 "$WARREN" audit frobnicate "$S1"
expect_status "audit: a path as the id: usage (2)" 2 "$WARREN" audit verify ../etc --data "$D"
expect_status "audit: --anchor not a hash: usage (2)" 2 "$WARREN" audit verify "$S1" --data "$D" --anchor xyz
expect_output "audit: no log for the session: exit 1, says so" "no audit log for the session" "$WARREN" audit verify s-nosuchsession --data "$D"
expect_status "audit: no log for the session: exit 1" 1 "$WARREN" audit verify s-nosuchsession --data "$D"
expect_output "WARREN_HOME is the default data directory" "^ok: " env WARREN_HOME="$D" "$WARREN" audit verify "$S1" --quiet

# --- an older server's log file is imported into the store at start ----------------
S3="$(submit proj "rest" 'echo resting')"
wait_state "$S3" review 90
server_stop
n3="$(sqlite3 "$DB" "SELECT COUNT(*) FROM audit_records WHERE session_id = '$S3'")"
H3="$(audit verify "$S3" --data "$D" --quiet | sed -n 's/^head: //p')"
# as an older server left it: the chain in DATA/audit, none in the store
mkdir -p -m 700 "$D/audit"
audit export "$S3" --data "$D" >"$D/audit/$S3.jsonl"
sqlite3 "$DB" "DELETE FROM audit_records WHERE session_id = '$S3'"
out="$(audit verify "$S3" --data "$D" --json)"
[ "$(echo "$out" | jq -r .source)" = file ] && [ "$(echo "$out" | jq -r .head)" = "$H3" ] &&
	pass "the store has none of the session's chain: verify reads the log file" ||
	fail "the store has none of the session's chain: verify reads the log file" "$out"
server_start "$D"
m="$(sqlite3 "$DB" "SELECT COUNT(*) FROM audit_records WHERE session_id = '$S3'")"
[ "$m" = "$n3" ] && [ ! -e "$D/audit/$S3.jsonl" ] && [ -f "$D/audit/$S3.jsonl.imported" ] &&
	grep -q "log(s) of DATA/audit imported into the store" "$SERVER_LOG" &&
	pass "at start the log file is imported into the store (renamed .imported)" ||
	fail "at start the log file is imported into the store (renamed .imported)" "m=$m n3=$n3 $(ls "$D/audit" 2>&1) $(grep audit "$SERVER_LOG")"
api POST "/api/v1/sessions/$S3/messages" '{"text": "after the upgrade"}'
wait_turns "$S3" 2 60
wait_state "$S3" review 90
out="$(audit verify "$S3" --data "$D" --anchor "$H3" 2>&1)"
rc=$?
[ $rc = 0 ] && echo "$out" | grep -Eq ' user:admin +message ' && echo "$out" | grep -q "^anchor: found at seq $n3" &&
	pass "the chain goes on from the imported records (the old head in it), intact" ||
	fail "the chain goes on from the imported records (the old head in it), intact" "rc=$rc n3=$n3 $(echo "$out" | tail -4)"

server_stop
left=""
for s in "$S1" "$S2" "$S3"; do "$WARREN" sandbox ls --all 2>/dev/null | grep -q "ws-$s" && left="$left $s"; done
[ -z "$left" ] && pass "no sandbox left" || fail "no sandbox left" "$left"
