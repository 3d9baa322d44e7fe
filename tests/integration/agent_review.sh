#!/bin/bash
# The built-in agent end to end: a recorded model transcript (replay
# provider, then the same recording through the production HTTP client and
# a local chat-completions server) edits a real project, Warren's own
# verification fails once and the agent fixes it, the change waits in
# review with its diff and evidence; approval pushes warren/<id> to a bare
# remote and nothing else; rejection pushes nothing; the model's key never
# reaches the sandbox.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"

REC="$ROOT_DIR/tests/fixtures/replay/fix-after-verify.json"

# --- a project whose remote is a bare repository ------------------------------
greeter_remote
main_before="$(git -C "$REMOTE" rev-parse main)"

D="$TEST_TMP/data"
# a stand-in for GitHub's REST API: approval opens a pull request there
FTOKEN="ghp_test_$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')"
echo "$FTOKEN" >"$TEST_TMP/forge.token"
chmod 600 "$TEST_TMP/forge.token"
cat >"$TEST_TMP/forge.json" <<'EOF'
{"routes": {"POST /repos/octo/greeter/pulls": [{"status": 201, "repeat": true,
  "body": {"number": 7, "html_url": "https://github.example/octo/greeter/pull/7",
           "url": "http://127.0.0.1/repos/octo/greeter/pulls/7", "state": "open"}}]}}
EOF
python3 "$ROOT_DIR/tests/tools/forge_server.py" --port 0 --recording "$TEST_TMP/forge.json" --log "$TEST_TMP/forge.log" --require-token "$FTOKEN" >"$TEST_TMP/forge.port" 2>"$TEST_TMP/forge.err" &
FORGE_PID=$!
for _ in $(seq 1 50); do [ -s "$TEST_TMP/forge.port" ] && break; sleep 0.1; done
FORGE_PORT="$(head -1 "$TEST_TMP/forge.port")"
cat >"$TEST_TMP/replay.json" <<EOF
{"model": {"provider": "replay", "replay": "$REC", "prices": {"prompt": 1.0, "completion": 2.0}},
 "verify": {"retries": 2},
 "repositories": [{"name": "greeter", "url": "$REMOTE",
                   "forge": {"kind": "github", "api_url": "http://127.0.0.1:$FORGE_PORT",
                             "repo": "octo/greeter", "token_file": "$TEST_TMP/forge.token"}}]}
EOF
server_start "$D" "$TEST_TMP/replay.json"
api GET /api/v1/repositories
[ "$(echo "$BODY" | jq -r '.repositories[] | select(.name == "greeter") | .url')" = "$REMOTE" ] &&
	pass "a bare repository from the configuration is the remote" || fail "a bare repository from the configuration is the remote" "$CODE $BODY"

# --- replay: edit, verify fails, fix, verify passes, review -------------------
S1="$(submit_builtin greeter "make the greeting friendlier")"
wait_state "$S1" review 90
[ "$STATE" = review ] && pass "built-in agent (replay): the session reaches review" || fail "built-in agent (replay): the session reaches review" "$STATE $(session_log "$S1" | tail -5)"
api GET "/api/v1/sessions/$S1"
[ "$(jget .outcome.verify.passed)" = true ] && [ "$(jraw .outcome.verify.first_attempt_passed)" = false ] && [ "$(jget .outcome.verify.attempts)" = 2 ] &&
	pass "verify failed once, the agent fixed it, verify passed" || fail "verify failed once, the agent fixed it, verify passed" "$(jget .outcome.verify)"
[ "$(jget .outcome.result.branch)" = "warren/$S1" ] && [ "$(jget '.outcome.result.files[0].path')" = greeting.txt ] &&
	pass "the result: branch warren/<id>, the changed file listed" || fail "the result: branch warren/<id>, the changed file listed" "$(jget .outcome.result)"
[ "$(jget .outcome.usage.prompt_tokens)" = 7000 ] && [ "$(jget .outcome.usage.model_calls)" = 7 ] &&
	pass "usage recorded (tokens, model calls)" || fail "usage recorded (tokens, model calls)" "$(jget .outcome.usage)"
cost="$(jget .outcome.usage.cost)"
[ "$(echo "$cost" | cut -c1-5)" = 0.007 ] && pass "cost from the configured prices" || fail "cost from the configured prices" "cost=$cost"
log="$(events_json "$S1")"
echo "$log" | jq -e '[.events[] | select(.kind == "verify")] | length == 2' >/dev/null &&
	pass "each verification is in the event log" || fail "each verification is in the event log" "$(echo "$log" | jq -c '[.events[].kind]')"
echo "$log" | jq -e '[.events[] | select(.kind == "transcript") | .data.message.role] | index("tool") != null' >/dev/null &&
	echo "$log" | jq -e '[.events[] | select(.kind == "transcript" and .data.message.role == "user") | .data.message.content] | map(test("verification")) | any' >/dev/null &&
	pass "the transcript is durable: model messages, tool results, the verify feedback" || fail "the transcript is durable: model messages, tool results, the verify feedback" "$(echo "$log" | jq -c '[.events[] | select(.kind=="transcript") | .data.message.role]')"
diff="$(curl -s -H "Authorization: Bearer $TOKEN" "$URL/api/v1/sessions/$S1/diff")"
echo "$diff" | grep -q '^+hello and goodbye' && echo "$diff" | grep -q '^-hello' &&
	pass "GET /sessions/{id}/diff: the change against the base" || fail "GET /sessions/{id}/diff: the change against the base" "$diff"
out="$("$WARREN" diff "$S1" --server "$URL" --token "$TOKEN" 2>&1)"
echo "$out" | grep -q '^+hello and goodbye' && pass "warren diff ID" || fail "warren diff ID" "$out"
out="$("$WARREN" show "$S1" --server "$URL" --token "$TOKEN" 2>&1)"
echo "$out" | grep -Eq '^agent: +built-in' && pass "warren show names the built-in agent" || fail "warren show names the built-in agent" "$(echo "$out" | grep agent)"
api GET "/api/v1/sessions/$S1/artifacts"
echo "$BODY" | jq -e '[.artifacts[].name] | index("diff.patch") != null' >/dev/null && pass "artifacts list the diff" || fail "artifacts list the diff" "$BODY"
rep="$(curl -s -H "Authorization: Bearer $TOKEN" "$URL/api/v1/sessions/$S1/artifacts/spec-report.txt")"
[ "$rep" = "checked: hello and goodbye" ] && pass "files the spec names as artifacts are collected after verify" || fail "files the spec names as artifacts are collected after verify" "$rep"
# Warren writes the result commit itself, on the host, in the session's
# quarantine repository
api GET "/api/v1/sessions/$S1"
rc1="$(jget .outcome.result.commit)"
commit_msg="$(git --git-dir="$D/sessions/$S1/evidence/result.git" log -1 --format='%an|%cn|%s|%P' "$rc1")"
[ "$commit_msg" = "admin|Warren|Greet with hello and goodbye|$main_before" ] && pass "committed by Warren on the host as the prompting user, with the agent's summary, on the base" || fail "committed by Warren on the host as the prompting user, with the agent's summary, on the base" "$commit_msg"
[ "$(jget .outcome.verify.commit)" = "$rc1" ] && [ "$(jget .outcome.verify.sandbox)" = fresh ] &&
	pass "the verification names the result commit, verified in a fresh sandbox" || fail "the verification names the result commit, verified in a fresh sandbox" "$(jget .outcome.verify)"

# --- approve: the branch goes to the remote, and nothing else ------------------
refs_before="$(git -C "$REMOTE" for-each-ref --format='%(refname)')"
api POST "/api/v1/sessions/$S1/approve"
[ "$CODE" = 200 ] && [ "$(jget .state)" = pushed ] && pass "approve: pushed" || fail "approve: pushed" "$CODE $BODY"
pushed="$(git -C "$REMOTE" rev-parse "refs/heads/warren/$S1" 2>/dev/null)"
[ -n "$pushed" ] && [ "$pushed" = "$(jget .outcome.push.commit)" ] && pass "warren/<id> is on the bare remote" || fail "warren/<id> is on the bare remote" "$pushed vs $(jget .outcome.push)"
[ "$pushed" = "$rc1" ] && pass "the pushed commit is the reviewed and verified one" || fail "the pushed commit is the reviewed and verified one" "$pushed vs $rc1"
[ "$(git -C "$REMOTE" show "refs/heads/warren/$S1:greeting.txt")" = "hello and goodbye" ] && pass "the pushed branch holds the change" || fail "the pushed branch holds the change" "$(git -C "$REMOTE" show "refs/heads/warren/$S1:greeting.txt" 2>&1)"
[ "$(git -C "$REMOTE" rev-parse main)" = "$main_before" ] && pass "main on the remote is untouched" || fail "main on the remote is untouched" "moved"
refs_after="$(git -C "$REMOTE" for-each-ref --format='%(refname)')"
[ "$(comm -13 <(echo "$refs_before" | sort) <(echo "$refs_after" | sort))" = "refs/heads/warren/$S1" ] &&
	pass "approval pushed exactly one ref" || fail "approval pushed exactly one ref" "$refs_after"
[ "$(jget .outcome.pull_request.number)" = 7 ] && [ "$(jget .outcome.pull_request.url)" = "https://github.example/octo/greeter/pull/7" ] &&
	pass "approval opens a pull request on the forge (GitHub REST stand-in)" || fail "approval opens a pull request on the forge (GitHub REST stand-in)" "$(jget .outcome.pull_request)"
python3 - "$TEST_TMP/forge.log" "$S1" <<'PY' && pass "the pull request asks to merge warren/<id> into main" || fail "the pull request asks to merge warren/<id> into main" "$(head -c 400 "$TEST_TMP/forge.log")"
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
posts = [r for r in reqs if r.get("method") == "POST"]
assert len(posts) == 1, reqs
body = posts[0]["body"]
body = json.loads(body) if isinstance(body, str) else body
assert body["head"] == "warren/" + sys.argv[2] and body["base"] == "main", body
PY
grep -rq -- "$FTOKEN" "$D/sessions" "$D/artifacts" "$SERVER_LOG" 2>/dev/null && fail "the forge token is nowhere in workspaces, artifacts or logs" "found" || pass "the forge token is nowhere in workspaces, artifacts or logs"
api POST "/api/v1/sessions/$S1/approve"
[ "$CODE" = 409 ] && pass "approve twice: 409" || fail "approve twice: 409" "$CODE $BODY"

# --- reject: nothing leaves -------------------------------------------------------
S2="$(submit_builtin greeter "another friendlier greeting")"
wait_state "$S2" review 90
api POST "/api/v1/sessions/$S2/reject" '{"reason": "not what we want"}'
[ "$CODE" = 200 ] && [ "$(jget .state)" = rejected ] && [ "$(jget .outcome.decision.reason)" = "not what we want" ] &&
	pass "reject: rejected with the reason" || fail "reject: rejected with the reason" "$CODE $BODY"
git -C "$REMOTE" rev-parse "refs/heads/warren/$S2" >/dev/null 2>&1 && fail "a rejected session pushes nothing" "branch exists" || pass "a rejected session pushes nothing"
api GET /api/v1/stats
[ "$(jget .review.accepted)" = 1 ] && [ "$(jget .review.rejected)" = 1 ] && [ "$(jget .verify.first_attempt_pass_rate)" = 0 ] &&
	pass "stats: outcomes, verify pass rates, review" || fail "stats: outcomes, verify pass rates, review" "$BODY"

# --- a sandbox death mid-turn: the conversation resumes where it was -----------
server_stop
cat >"$TEST_TMP/resume.json" <<EOF
{"model": {"provider": "replay", "replay": "$ROOT_DIR/tests/fixtures/replay/resume.json"}}
EOF
server_start "$D" "$TEST_TMP/resume.json"
S4="$(submit_builtin greeter "survive a death")"
for _ in $(seq 1 300); do
	events_json "$S4" | grep -q 'first-run' && break
	sleep 0.1
done
pid="$(sandbox_init_pid "ws-$S4")"
[ -n "$pid" ] && kill -9 "$pid"
wait_state "$S4" review 90
api GET "/api/v1/sessions/$S4"
tr="$(events_json "$S4" | jq -c '[.events[] | select(.kind == "transcript") | .data.message | (.tool_calls[0].id // .role)]')"
[ "$STATE" = review ] && [ "$tr" = '["system","user","call_a","tool","call_b","tool","call_c","tool"]' ] &&
	pass "a sandbox death mid-tool: the turn resumes from the transcript, nothing replayed twice" ||
	fail "a sandbox death mid-tool: the turn resumes from the transcript, nothing replayed twice" "$STATE $tr"
events_json "$S4" | jq -r '.events[] | select(.kind == "transcript" and .data.message.role == "tool") | .data.message.content' | grep -q resumed-after-death &&
	pass "the interrupted tool call re-ran in the new sandbox, same workspace" || fail "the interrupted tool call re-ran in the new sandbox, same workspace" "$(events_json "$S4" | jq -c '[.events[] | select(.kind=="transcript") | .data.message.content]' | head -c 600)"
[ "$(jget .outcome.result.changed)" = true ] && pass "the resumed session commits its change" || fail "the resumed session commits its change" "$(jget .outcome.result)"
server_stop

# --- the same recording through the production HTTP client -----------------------
KEY="sk-test-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
echo "$KEY" >"$TEST_TMP/key"
chmod 600 "$TEST_TMP/key"
python3 "$ROOT_DIR/tests/tools/chat_server.py" --port 0 --recording "$REC" --log "$TEST_TMP/chat.log" --require-key "$KEY" >"$TEST_TMP/chat.port" 2>"$TEST_TMP/chat.err" &
CHAT_PID=$!
for _ in $(seq 1 50); do [ -s "$TEST_TMP/chat.port" ] && break; sleep 0.1; done
CHAT_PORT="$(head -1 "$TEST_TMP/chat.port")"
cat >"$TEST_TMP/openai.json" <<EOF
{"model": {"provider": "openai", "base_url": "http://127.0.0.1:$CHAT_PORT/v1", "model": "recorded-model",
           "api_key_file": "$TEST_TMP/key", "stream": true},
 "verify": {"retries": 2}}
EOF
server_start "$D" "$TEST_TMP/openai.json"
S3="$(submit_builtin greeter "friendlier, over HTTP")"
wait_state "$S3" review 90
api GET "/api/v1/sessions/$S3"
[ "$STATE" = review ] && [ "$(jget .outcome.verify.passed)" = true ] && [ "$(jget .outcome.verify.attempts)" = 2 ] &&
	pass "openai provider (local chat-completions server): the same session to review" || fail "openai provider (local chat-completions server): the same session to review" "$STATE $(session_log "$S3" | tail -4)"
grep -q '"model": *"recorded-model"' "$TEST_TMP/chat.log" && grep -q '"tools"' "$TEST_TMP/chat.log" &&
	pass "the client sent the model and the tool definitions" || fail "the client sent the model and the tool definitions" "$(head -c 300 "$TEST_TMP/chat.log")"
leak="$(grep -rl -- "$KEY" "$D/sessions" "$D/artifacts" 2>/dev/null; events_json "$S3" | grep -c -- "$KEY")"
[ "$leak" = 0 ] && pass "the model's key is nowhere in the workspace, artifacts or events" || fail "the model's key is nowhere in the workspace, artifacts or events" "$leak"
inside="$(sandbox_exec_in "$S3" sh -c "cat /proc/*/environ 2>/dev/null | tr '\0' '\n' | grep -c -- '$KEY'; grep -rs -- '$KEY' /workspace /tmp | wc -l")"
[ "$(echo $inside)" = "0 0" ] && pass "the model's key is not inside the sandbox (environ, files)" || fail "the model's key is not inside the sandbox (environ, files)" "$inside"
server_stop
kill "$CHAT_PID" "$FORGE_PID" 2>/dev/null
wait "$CHAT_PID" 2>/dev/null

left=""
for s in "$S1" "$S2" "$S3" "$S4"; do "$WARREN" sandbox ls --all 2>/dev/null | grep -q "ws-$s" && left="$left $s"; done
[ -z "$left" ] && pass "no sandbox left" || fail "no sandbox left" "$left"
