#!/bin/bash
# warren eval end to end on the sample suite (eval/sample): --oracle
# applies every solution.patch and every task resolves; a no-op agent
# resolves none; the hidden tests are nowhere in the agent's sandbox but
# are at $WARREN_TASK_TESTS of the check's; the report (text, --json,
# --compare); a run resumed after an attempt is lost; a bad task.json is
# refused with its file and key named.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"

"$ROOT_DIR/eval/repos.sh" "$TEST_TMP/repos" >/dev/null
cat >"$TEST_TMP/config.json" <<EOF2
{"repositories": [{"name": "c-hello", "url": "$TEST_TMP/repos/c-hello"},
                  {"name": "cmake-hello", "url": "$TEST_TMP/repos/cmake-hello"}]}
EOF2
server_start "$TEST_TMP/data" "$TEST_TMP/config.json"
RUNS="$TEST_TMP/runs"
ev() { "$WARREN" eval "$@" --dir "$RUNS" --server "$URL" --token "$TOKEN"; }
SUITE="$ROOT_DIR/eval/sample"
ntasks="$(find "$SUITE" -name task.json | wc -l)"
[ "$ntasks" -ge 10 ] && pass "the sample suite has at least ten tasks" || fail "the sample suite has at least ten tasks" "$ntasks"

# --- the oracle: every task resolves ------------------------------------------
out="$(ev run "$SUITE" --oracle --repeat 1 --parallel 4 --wait --json 2>"$TEST_TMP/oracle.err")"
rc=$?
ORACLE="$(echo "$out" | jq -r .id)"
[ $rc = 0 ] && [ "$(echo "$out" | jq .runs)" = "$ntasks" ] && [ "$(echo "$out" | jq .resolved)" = "$ntasks" ] &&
	[ "$(echo "$out" | jq ".resolve_rate == 1")" = true ] &&
	pass "--oracle: every task of the suite resolves" ||
	fail "--oracle: every task of the suite resolves" "rc=$rc $(echo "$out" | jq -c '[.tasks[] | select(.resolved == 0) | .name]') $(tail -5 "$TEST_TMP/oracle.err")"
echo "$out" | jq -e '.tasks | length == '"$ntasks"' and all(.runs == 1 and .resolved == 1) and all(has("name"))' >/dev/null &&
	echo "$out" | jq -e 'has("cost") and (.verification | has("agreement"))' >/dev/null &&
	pass "the report's JSON: runs, resolved, resolve_rate, cost, tasks[].name/runs/resolved" ||
	fail "the report's JSON: runs, resolved, resolve_rate, cost, tasks[].name/runs/resolved" "$(echo "$out" | head -c 600)"
a="$(ls "$RUNS/$ORACLE/attempts" | head -1)"
jq -e '.state == "done" and .resolved == true and (.session | startswith("s-")) and .check.passed == true and
	(.check.results | map(.kind) | index("fail_to_pass") != null) and .diff.changed == true and has("tokens") and has("wall_ms") and
	(.sandbox_seconds | type == "number" and . > 0 and . < 600)' \
	"$RUNS/$ORACLE/attempts/$a" >/dev/null &&
	pass "each attempt is a file: session, check results, diff, tokens, time, sandbox seconds" || fail "each attempt is a file: session, check results, diff, tokens, time" "$(head -c 600 "$RUNS/$ORACLE/attempts/$a")"
s="$(jq -r .session "$RUNS/$ORACLE/attempts/$a")"
api GET "/api/v1/sessions/$s"
[ "$(jget .state)" = rejected ] && pass "a checked session is rejected (its sandbox freed)" || fail "a checked session is rejected (its sandbox freed)" "$(jget .state)"
[ -z "$(ls "$TEST_TMP/data/sessions/$s/evidence" | grep -E 'check-(tests|upper)')" ] &&
	pass "the hidden tests and the check's upper are gone after the check" || fail "the hidden tests and the check's upper are gone after the check" "$(ls "$TEST_TMP/data/sessions/$s/evidence")"

# --- export: a registered repository's URL from the server -------------------
"$WARREN" eval export "$SUITE" --harbor "$TEST_TMP/harbor" --server "$URL" --token "$TOKEN" >"$TEST_TMP/export.out" 2>&1
rc=$?
python3 - "$TEST_TMP/harbor/c-help/task.toml" "$TEST_TMP/repos/c-hello" <<'PY' && [ $rc = 0 ] && [ -s "$TEST_TMP/harbor/c-help/environment/repo.tar" ] &&
import sys, tomllib
assert tomllib.load(open(sys.argv[1], "rb"))["metadata"]["repository"] == sys.argv[2]
PY
	pass "eval export asks the server where a registered repository is" ||
	fail "eval export asks the server where a registered repository is" "rc=$rc $(cat "$TEST_TMP/export.out")"

# --- a no-op agent: none resolves ----------------------------------------------
out="$(ev run "$SUITE" --agent true --repeat 1 --parallel 4 --wait --json 2>"$TEST_TMP/noop.err")"
NOOP="$(echo "$out" | jq -r .id)"
[ "$(echo "$out" | jq .runs)" = "$ntasks" ] && [ "$(echo "$out" | jq .resolved)" = 0 ] &&
	pass "a no-op agent resolves no task" || fail "a no-op agent resolves no task" "$(echo "$out" | jq -c '{runs, resolved}') $(tail -3 "$TEST_TMP/noop.err")"
# Warren's own verification passes unchanged code where the spec verifies
# (cmake-hello's ctest): it disagrees with the hidden tests there
echo "$out" | jq -e '.verification.verified > 0 and .verification.agreement < 1' >/dev/null &&
	pass "the report measures verification's agreement with the hidden tests" || fail "the report measures verification's agreement with the hidden tests" "$(echo "$out" | jq -c .verification)"

# --- the report: text and --compare ---------------------------------------------
txt="$(ev report "$ORACLE" 2>&1)"
echo "$txt" | grep -q "resolved *$ntasks of $ntasks runs" && echo "$txt" | grep -q '^c-version ' &&
	pass "eval report: the totals and one row per task" || fail "eval report: the totals and one row per task" "$(echo "$txt" | head -8)"
cmp="$(ev report "$ORACLE" --compare "$NOOP" --json)"
[ "$(echo "$cmp" | jq ".difference.resolve_rate == -1")" = true ] && [ "$(echo "$cmp" | jq .difference.exceeds_spread)" = true ] &&
	pass "eval report --compare: the difference and whether it exceeds the spread" || fail "eval report --compare: the difference and whether it exceeds the spread" "$(echo "$cmp" | jq -c .difference)"
txt="$(ev report "$ORACLE" --compare "$NOOP")"
echo "$txt" | grep -q 'exceeds the spread' && pass "eval report --compare, side by side as text" || fail "eval report --compare, side by side as text" "$(echo "$txt" | head -12)"

# --- resume: an attempt lost is run again, the others are kept -------------------
lost="$(ls "$RUNS/$NOOP/attempts" | head -1)"
keep="$(ls "$RUNS/$NOOP/attempts" | tail -1)"
before="$(jq -r .session "$RUNS/$NOOP/attempts/$keep")"
rm "$RUNS/$NOOP/attempts/$lost"
jq '.state = "running"' "$RUNS/$NOOP/run.json" >"$TEST_TMP/r.json" && mv "$TEST_TMP/r.json" "$RUNS/$NOOP/run.json"
out="$(ev run --resume "$NOOP" --wait --json 2>/dev/null)"
[ "$(echo "$out" | jq .runs)" = "$ntasks" ] && [ -s "$RUNS/$NOOP/attempts/$lost" ] &&
	[ "$(jq -r .session "$RUNS/$NOOP/attempts/$keep")" = "$before" ] && [ "$(jq -r .state "$RUNS/$NOOP/run.json")" = finished ] &&
	pass "eval run --resume: runs what is missing, keeps what is done" || fail "eval run --resume: runs what is missing, keeps what is done" "$(echo "$out" | jq -c '{runs, pending}')"

# --- the hidden tests are not in the agent's sandbox ------------------------------
P="$TEST_TMP/probe"
mkdir -p "$P/probe/tests"
echo '{"name": "probe"}' >"$P/suite.json"
MARK="hidden-$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')"
echo "$MARK" >"$P/probe/tests/marker.txt"
jq -n --arg m "$MARK" '{repo: "c-hello", base: "165c7a2dd900c89f5c447e39b56283d1bf1b14f4", prompt: "probe",
	fail_to_pass: ["grep -qx \($m) \"$WARREN_TASK_TESTS/marker.txt\""], pass_to_pass: ["test ! -w \"$WARREN_TASK_TESTS\""]}' >"$P/probe/task.json"
probe="test -z \"\${WARREN_TASK_TESTS:-}\" && test ! -e /run/warren-task-tests && ! grep -rqs $MARK /workspace /tmp /run /home /root /etc 2>/dev/null"
out="$(ev run "$P" --agent "$probe" --repeat 1 --wait --json 2>/dev/null)"
id="$(echo "$out" | jq -r .id)"
[ "$(jq -r .session_state "$RUNS/$id/attempts/probe.1.json")" = review ] &&
	pass "probe: the hidden tests are nowhere in the agent's sandbox" || fail "probe: the hidden tests are nowhere in the agent's sandbox" "$(jq -c '{session_state, reason}' "$RUNS/$id/attempts/probe.1.json")"
[ "$(echo "$out" | jq .resolved)" = 1 ] && pass "probe: they are at \$WARREN_TASK_TESTS of the check, read-only" || fail "probe: they are at \$WARREN_TASK_TESTS of the check, read-only" "$(jq -c .check "$RUNS/$id/attempts/probe.1.json")"

# --- a bad suite is refused before anything runs ---------------------------------
jq '.fail_to_pass = "make test"' "$P/probe/task.json" >"$TEST_TMP/t.json" && mv "$TEST_TMP/t.json" "$P/probe/task.json"
n_before="$(ls "$RUNS" | wc -l)"
out="$(ev run "$P" --agent true 2>&1)"
rc=$?
[ $rc = 2 ] && echo "$out" | grep -q 'probe/task.json: "fail_to_pass"' && [ "$(ls "$RUNS" | wc -l)" = "$n_before" ] &&
	pass "a bad task.json: exit 2, the file and the key named, nothing run" || fail "a bad task.json: exit 2, the file and the key named, nothing run" "rc=$rc $out"
out="$(ev run "$P" --agent-preset codex --agent true 2>&1)"
[ $? = 2 ] && echo "$out" | grep -q 'excludes --agent' && pass "--agent-preset and --agent: a usage error" || fail "--agent-preset and --agent: a usage error" "$out"
out="$(ev run "$ROOT_DIR/eval/sample" --oracle --agent true 2>&1)"
[ $? = 2 ] && pass "--oracle and --agent exclude each other" || fail "--oracle and --agent exclude each other" "$out"
server_stop

# --- the server's model: recorded transcripts (eval/sample/replay.json) --------
# three tasks have a script (chosen by their prompt); the others' sessions
# find none and fail: exactly those three resolve
cat >"$TEST_TMP/replay-config.json" <<EOF2
{"repositories": [{"name": "c-hello", "url": "$TEST_TMP/repos/c-hello"},
                  {"name": "cmake-hello", "url": "$TEST_TMP/repos/cmake-hello"}],
 "model": {"provider": "replay", "replay": "$ROOT_DIR/eval/sample/replay.json"}}
EOF2
server_start "$TEST_TMP/data2" "$TEST_TMP/replay-config.json"
out="$(ev run "$SUITE" --repeat 1 --parallel 4 --wait --json 2>"$TEST_TMP/replay.err")"
got="$(echo "$out" | jq -c '[.tasks[] | select(.resolved > 0) | .name] | sort')"
[ "$got" = '["c-help","c-version","cmake-shout"]' ] && [ "$(echo "$out" | jq .runs)" = "$ntasks" ] &&
	[ "$(echo "$out" | jq '.cost >= 0')" = true ] &&
	pass "the built-in agent on recorded transcripts: exactly the recorded tasks resolve" ||
	fail "the built-in agent on recorded transcripts: exactly the recorded tasks resolve" "$got $(cat "$RUNS/$(echo "$out" | jq -r .id)"/attempts/*.json 2>/dev/null | jq -c '{task, session_state, reason}' | head -4 | tr '\n' ' ') $(tail -3 "$TEST_TMP/replay.err")"
server_stop
