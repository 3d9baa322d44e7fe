#!/bin/bash
# The control plane end to end over HTTP (curl): warren serve, sessions from
# a real repository's snapshot, output as events, follow-ups in the same
# workspace, cancel, a killed sandbox re-provisioned on the same workspace,
# a server killed with -9 and one stopped with SIGTERM resuming their
# sessions with nothing lost, lifetime expiry with a checkpoint, idle
# sandboxes giving their slot back, the per-user share of the slots, and
# nothing left behind.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"

# --- a repository: a tiny project with a test script -----------------------
R="$TEST_TMP/proj"
mkdir -p "$R"
cat >"$R/warren.json" <<'EOF'
{"customizations": {"warren": {"verify": ["sh", "test.sh"]}}}
EOF
printf 'hello\n' >"$R/greeting.txt"
printf '#!/bin/sh\ngrep -q hello greeting.txt\n' >"$R/test.sh"
git -C "$R" init -q -b main
git -C "$R" -c user.email=t@warren -c user.name=test add -A
git -C "$R" -c user.email=t@warren -c user.name=test commit -q -m initial

D="$TEST_TMP/data"
server_start "$D"

# --- start, token, authentication -------------------------------------------
[ -f "$D/admin.token" ] && [ "$(stat -c %a "$D/admin.token")" = 600 ] &&
	pass "first start writes admin.token, mode 0600" ||
	fail "first start writes admin.token, mode 0600" "$(ls -l "$D" 2>&1)"
code="$(curl -s -o /dev/null -w '%{http_code}' "$URL/api/v1/sessions")"
[ "$code" = 401 ] && pass "no token: 401" || fail "no token: 401" "got $code"
code="$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer wr_nope' "$URL/api/v1/sessions")"
[ "$code" = 401 ] && pass "unknown token: 401" || fail "unknown token: 401" "got $code"
api GET /api/v1/healthz
[ "$CODE" = 200 ] && pass "healthz" || fail "healthz" "$CODE $BODY"
api GET /api/v1/metrics
echo "$BODY" | grep -q '^warren_sessions{state="queued"}' && echo "$BODY" | grep -q 'warren_start_latency_ms_bucket{phase="restore"' &&
	pass "metrics in Prometheus text format" || fail "metrics in Prometheus text format" "$(echo "$BODY" | head -5)"

# --- repository and its first snapshot --------------------------------------
api POST /api/v1/repositories "{\"url\": \"$R\", \"name\": \"proj\"}"
[ "$CODE" = 201 ] && pass "register a repository: 201" || fail "register a repository: 201" "$CODE $BODY"
api POST /api/v1/repositories "{\"url\": \"$R\", \"name\": \"proj\"}"
[ "$CODE" = 409 ] && pass "the same name again: 409" || fail "the same name again: 409" "$CODE $BODY"
for _ in $(seq 1 100); do
	api GET /api/v1/snapshots
	[ "$(jget '.snapshots | length')" -ge 1 ] 2>/dev/null && break
	sleep 0.2
done
[ "$(jget '.snapshots[0].commit')" = "$(git -C "$R" rev-parse HEAD)" ] &&
	pass "the repository's snapshot is built in the background" ||
	fail "the repository's snapshot is built in the background" "$BODY"

# --- a session: output lines become events, prompt in env and file --------
AGENT='echo "agent says: $WARREN_PROMPT"; cat "$WARREN_PROMPT_FILE"; echo note-$WARREN_TURN >>/workspace/notes.txt; sh test.sh && echo tests-passed; echo to-stderr >&2'
S1="$(submit proj "make it better" "$AGENT")"
[ -n "$S1" ] && pass "POST /sessions: 201 with an id" || fail "POST /sessions: 201 with an id" "$CODE $BODY"
wait_state "$S1" review 60
[ "$STATE" = review ] && pass "the session runs to review" || fail "the session runs to review" "state $STATE: $(session_log "$S1" | tail -5)"
log="$(session_log "$S1")"
echo "$log" | grep -q 'stdout agent says: make it better' && pass "agent output lines are events (prompt in \$WARREN_PROMPT)" ||
	fail "agent output lines are events (prompt in \$WARREN_PROMPT)" "$log"
echo "$log" | grep -q 'stdout make it better' && pass "the prompt is also a file" || fail "the prompt is also a file" "$log"
echo "$log" | grep -q 'stdout tests-passed' && pass "the agent runs the project's tests in the sandbox" || fail "the agent runs the project's tests in the sandbox" "$log"
echo "$log" | grep -q 'stderr to-stderr' && pass "stderr lines are events too" || fail "stderr lines are events too" "$log"
api GET "/api/v1/sessions/$S1"
[ "$(jget .exit_code)" = 0 ] && [ "$(jget .turns)" = 1 ] && [ -n "$(jget .outcome.start_ms.total)" ] &&
	pass "the session records exit code, turns and the start breakdown" ||
	fail "the session records exit code, turns and the start breakdown" "$BODY"

# a CLI agent's command template: {prompt} in an argument is the prompt
api POST /api/v1/sessions '{"repo": "proj", "prompt": "templated words", "agent": ["sh", "-c", "echo \"template: $1\"", "agent", "--message={prompt}"]}'
ST="$(jget .id)"
wait_state "$ST" review 60
session_log "$ST" | grep -q 'stdout template: --message=templated words' && pass "a command template gets the prompt in place of {prompt}" || fail "a command template gets the prompt in place of {prompt}" "$(session_log "$ST" | tail -3)"

# --- a follow-up: a new turn in the same workspace --------------------------
api POST "/api/v1/sessions/$S1/messages" '{"text": "and now the docs"}'
[ "$CODE" = 202 ] && pass "follow-up accepted: 202" || fail "follow-up accepted: 202" "$CODE $BODY"
wait_turns "$S1" 2 60
wait_state "$S1" review 60
log="$(session_log "$S1")"
echo "$log" | grep -q 'stdout agent says: and now the docs' && pass "the follow-up runs as turn 2" || fail "the follow-up runs as turn 2" "$log"
out="$(sandbox_exec_in "$S1" cat /workspace/notes.txt)"
[ "$out" = "$(printf 'note-1\nnote-2')" ] && pass "turn 2 sees turn 1's files (same workspace)" || fail "turn 2 sees turn 1's files (same workspace)" "$out"

api POST "/api/v1/sessions/$S1/cancel"
[ "$CODE" = 200 ] && [ "$(jget .state)" = cancelled ] && pass "cancel of a session in review drops it" || fail "cancel of a session in review drops it" "$CODE $BODY"
"$WARREN" sandbox ls --all 2>/dev/null | grep -q "ws-$S1" && fail "cancel in review stops the resting sandbox" "still there" || pass "cancel in review stops the resting sandbox"

# --- cancel --------------------------------------------------------------------
S2="$(submit proj "wait" 'echo waiting; sleep 600')"
wait_output "$S2" waiting 60
api POST "/api/v1/sessions/$S2/cancel"
[ "$CODE" = 200 ] && [ "$(jget .state)" = cancelled ] && pass "cancel: 200, state cancelled" || fail "cancel: 200, state cancelled" "$CODE $BODY"
"$WARREN" sandbox ls --all 2>/dev/null | grep -q "ws-$S2" && fail "cancel stops the sandbox" "ws-$S2 still listed" || pass "cancel stops the sandbox"
api POST "/api/v1/sessions/$S2/cancel"
[ "$CODE" = 409 ] || [ "$CODE" = 400 ] && pass "cancel of a finished session: 4xx" || fail "cancel of a finished session: 4xx" "$CODE $BODY"

# --- a sandbox killed under a session: interrupted, re-provisioned -----------
RETRY_AGENT='if [ -f /workspace/.attempt ]; then echo second-attempt; else touch /workspace/.attempt; echo first-attempt; sleep 600; fi'
S3="$(submit proj "retry me" "$RETRY_AGENT")"
wait_output "$S3" first-attempt 60
pid="$(sandbox_init_pid "ws-$S3")"
[ -n "$pid" ] && kill -9 "$pid"
wait_state "$S3" review 60
log="$(session_log "$S3")"
echo "$log" | grep -q 'state interrupted.*sandbox died' && pass "a killed init: interrupted, the log says why" || fail "a killed init: interrupted, the log says why" "$log"
echo "$log" | grep -q 'stdout second-attempt' && pass "re-provisioned on the same workspace, the turn re-runs" || fail "re-provisioned on the same workspace, the turn re-runs" "$log"

# the agent's processes killed (not the init): also a death, also retried
S4="$(submit proj "retry me too" "$RETRY_AGENT")"
wait_output "$S4" first-attempt 60
pkill -9 -f "^sleep 600" 2>/dev/null
wait_state "$S4" review 60
session_log "$S4" | grep -q 'stdout second-attempt' && pass "killed agent processes: retried" || fail "killed agent processes: retried" "$(session_log "$S4" | tail -4)"

# --- lifetime: checkpoint, then expired ----------------------------------------
S5="$(submit proj "long" 'echo precious >/workspace/work.txt; echo wrote; sleep 600' '{"lifetime": "2s"}')"
wait_state "$S5" expired 60
log="$(session_log "$S5")"
[ "$STATE" = expired ] && pass "lifetime reached: expired" || fail "lifetime reached: expired" "$STATE $log"
echo "$log" | grep -q 'checkpoint' && pass "expiry checkpoints the workspace first" || fail "expiry checkpoints the workspace first" "$log"
[ "$(workspace_cat "$D" "$S5" /workspace/work.txt)" = precious ] &&
	pass "no work lost at the hard timeout (workspace kept)" || fail "no work lost at the hard timeout (workspace kept)" "$(ls -la "$D/sessions/$S5" 2>&1 | head)"

# --- idle: a resting sandbox gives its slot back; a follow-up brings it back --
S6="$(submit proj "idle" 'echo quick' '{"idle": "1s"}')"
wait_state "$S6" review 60
for _ in $(seq 1 50); do
	"$WARREN" sandbox ls --all 2>/dev/null | grep -q "ws-$S6" || break
	sleep 0.2
done
"$WARREN" sandbox ls --all 2>/dev/null | grep -q "ws-$S6" && fail "an idle sandbox is stopped" "still there" || pass "an idle sandbox is stopped"
api POST "/api/v1/sessions/$S6/messages" '{"text": "again"}'
wait_turns "$S6" 2 60
wait_state "$S6" review 60
[ "$STATE" = review ] && pass "a follow-up after idle re-provisions the session" || fail "a follow-up after idle re-provisions the session" "$STATE"
# a background process keeps the sandbox busy: not idle
S7="$(submit proj "busy" 'nohup sh -c "sleep 30" >/dev/null 2>&1 & echo started-bg' '{"idle": "1s"}')"
wait_state "$S7" review 60
sleep 3
"$WARREN" sandbox ls --data "$D" 2>/dev/null | grep -q "ws-$S7" && pass "a process still running in the sandbox: not idle" || fail "a process still running in the sandbox: not idle" "stopped"

# --- kill -9 of the server mid-run: reconcile, resume, nothing lost -------------
S8="$(submit proj "survive" "$RETRY_AGENT")"
wait_output "$S8" first-attempt 60
before="$(events_json "$S8")"
kill -9 "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null
server_start "$D"
wait_state "$S8" review 60
[ "$STATE" = review ] && pass "kill -9 of the server: the session resumes and finishes" || fail "kill -9 of the server: the session resumes and finishes" "$STATE $(session_log "$S8" | tail -4)"
after="$(events_json "$S8")"
python3 - "$before" "$after" <<'EOF' && pass "no event lost or duplicated across the crash" || fail "no event lost or duplicated across the crash" "$after"
import json, sys
b = json.loads(sys.argv[1])["events"]; a = json.loads(sys.argv[2])["events"]
seqs = [e["seq"] for e in a]
assert seqs == list(range(1, len(a) + 1)), seqs
assert [json.dumps(e, sort_keys=True) for e in a[:len(b)]] == [json.dumps(e, sort_keys=True) for e in b]
assert any(e["kind"] == "state" and e["data"].get("state") == "interrupted" and "server" in (e["data"].get("reason") or "") for e in a)
EOF
"$WARREN" sandbox ls --all 2>/dev/null | grep -q "ws-$S7" && fail "sandboxes of the old server are stopped" "ws-$S7 left" || pass "sandboxes of the old server are stopped"

# --- SIGTERM: sessions checkpointed to interrupted, resumed at the next start --
S9="$(submit proj "graceful" "$RETRY_AGENT")"
wait_output "$S9" first-attempt 60
kill -TERM "$SERVER_PID"
timeout 30 tail --pid="$SERVER_PID" -f /dev/null
wait "$SERVER_PID"
rc=$?
[ $rc = 0 ] && pass "SIGTERM: the server exits cleanly" || fail "SIGTERM: the server exits cleanly" "rc=$rc"
st="$(sqlite3 "$D/warren.db" "select state from sessions where id='$S9'" 2>&1)"
[ "$st" = interrupted ] && pass "SIGTERM: the running session is interrupted, not lost" || fail "SIGTERM: the running session is interrupted, not lost" "$st"
"$WARREN" sandbox ls --all 2>/dev/null | grep -q "ws-$S9" && fail "SIGTERM: no sandbox left running" "$("$WARREN" sandbox ls --all)" || pass "SIGTERM: no sandbox left running"
server_start "$D"
wait_state "$S9" review 60
session_log "$S9" | grep -q 'stdout second-attempt' && pass "the interrupted session resumes at the next start" || fail "the interrupted session resumes at the next start" "$(session_log "$S9" | tail -3)"

# --- refresh: a new commit, a refresh, a new snapshot; sessions take it ----------
echo 'hello again' >"$R/greeting.txt"
git -C "$R" -c user.email=t@warren -c user.name=test commit -q -am "second"
head2="$(git -C "$R" rev-parse HEAD)"
api GET /api/v1/repositories
RID="$(echo "$BODY" | jq -r '.repositories[] | select(.name == "proj") | .id')"
api POST "/api/v1/repositories/$RID/refresh"
[ "$CODE" = 202 ] && pass "refresh queued: 202" || fail "refresh queued: 202" "$CODE $BODY"
for _ in $(seq 1 100); do
	api GET "/api/v1/snapshots?repo=$RID"
	[ "$(jget '.snapshots[0].commit')" = "$head2" ] && break
	sleep 0.2
done
[ "$(jget '.snapshots[0].commit')" = "$head2" ] && pass "the refresh builds a snapshot of the new commit" || fail "the refresh builds a snapshot of the new commit" "$BODY"
SN="$(submit proj "new" 'git rev-parse HEAD')"
wait_state "$SN" review 60
session_log "$SN" | grep -q "stdout $head2" && pass "a new session starts from the newest snapshot" || fail "a new session starts from the newest snapshot" "$(session_log "$SN" | tail -3)"

# --- limits: the request's, else the spec's, else the server's ---------------------
R2="$TEST_TMP/limited"
mkdir -p "$R2"
echo '{"customizations": {"warren": {"limits": {"memory": "300M", "pids": 300}}}}' >"$R2/warren.json"
git -C "$R2" init -q -b main
git -C "$R2" -c user.email=t@warren -c user.name=test add -A
git -C "$R2" -c user.email=t@warren -c user.name=test commit -q -m initial
L1="$(submit "$R2" "limits" 'echo limits-ok' '{"pids": 200}')"
wait_state "$L1" review 60
api GET "/api/v1/sessions/$L1"
[ "$(jget .outcome.limits.memory)" = $((300 << 20)) ] && [ "$(jget .outcome.limits.pids)" = 200 ] &&
	pass "a session gets the spec's limits unless it asks for its own" ||
	fail "a session gets the spec's limits unless it asks for its own" "$(jget .outcome.limits)"
api POST /api/v1/sessions '{"repo": "proj", "prompt": "x", "agent": ["true"], "limits": {"memroy": "1G"}}'
[ "$CODE" = 400 ] && echo "$BODY" | grep -q memroy && pass "an unknown limit is refused, naming it" || fail "an unknown limit is refused, naming it" "$CODE $BODY"
# the disk limit: the workspace is measured while the agent runs
DK="$(submit proj "fill the disk" 'head -c 8M /dev/zero >/workspace/big.bin; echo filled; sleep 60' '{"disk": "2M"}')"
wait_state "$DK" failed 30
api GET "/api/v1/sessions/$DK"
[ "$STATE" = failed ] && jget .reason | grep -q "disk limit exceeded" && pass "crossing the disk limit fails the session with the reason" ||
	fail "crossing the disk limit fails the session with the reason" "$STATE $(jget .reason)"
server_stop

# --- the queue: a global cap and one user's share ----------------------------------
cat >"$TEST_TMP/cap.json" <<'EOF'
{"limits": {"max_sandboxes": 2, "max_per_user": 1}, "retry": {"max": 1, "backoff": "100ms"}}
EOF
server_start "$D" "$TEST_TMP/cap.json"
api POST /api/v1/tokens '{"user": "bob", "role": "submitter"}'
BOB="$(jget .token)"
[ "$CODE" = 201 ] && [ -n "$BOB" ] && pass "admin creates a token for another user" || fail "admin creates a token for another user" "$CODE $BODY"
A1="$(submit proj "a1" 'echo a1; sleep 2')"
A2="$(submit proj "a2" 'echo a2; sleep 2')"
A3="$(submit proj "a3" 'echo a3; sleep 2')"
B1="$(TOKEN="$BOB" submit proj "b1" 'echo b1; sleep 2')"
for s in "$A1" "$A2" "$A3" "$B1"; do wait_state "$s" review 90; done
python3 - "$(events_json "$A1")" "$(events_json "$A2")" "$(events_json "$A3")" "$(events_json "$B1")" <<'EOF' && pass "one user cannot take every slot: bob starts before alice's 2nd" || fail "one user cannot take every slot: bob starts before alice's 2nd" "see events"
import json, sys
def t(doc, state):
    return min(e["time_ms"] for e in json.loads(doc)["events"] if e["kind"] == "state" and e["data"]["state"] == state)
a1, a2, a3, b1 = sys.argv[1:5]
assert t(b1, "provisioning") < t(a2, "provisioning"), "bob waited behind alice"
# alice never ran two at once
assert t(a2, "provisioning") >= t(a1, "review") - 50
assert t(a3, "provisioning") >= t(a2, "review") - 50
EOF
# out of memory: the agent is killed, the session retried, then given up on
OOM="$(submit proj "oom" 'echo eating; x=$(head -c 400M /dev/zero | tr "\\0" a); echo survived' '{"memory": "64M"}')"
wait_state "$OOM" failed 60
api GET "/api/v1/sessions/$OOM"
[ "$STATE" = failed ] && jget .reason | grep -q "gave up after 2 sandbox deaths: agent killed" &&
	pass "OOM: interrupted, retried up to the limit, then failed with the reason" ||
	fail "OOM: interrupted, retried up to the limit, then failed with the reason" "$STATE $(jget .reason)"
[ "$(session_log "$OOM" | grep -c 'state interrupted')" = 2 ] && pass "OOM: each death is in the event log" || fail "OOM: each death is in the event log" "$(session_log "$OOM" | grep state)"
code="$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $BOB" "$URL/api/v1/sessions/$A1")"
[ "$code" = 404 ] && pass "a submitter does not see another user's session" || fail "a submitter does not see another user's session" "got $code"
server_stop

# --- nothing left behind --------------------------------------------------------
left=""
for s in "$ST" "$S1" "$S2" "$S3" "$S4" "$S5" "$S6" "$S7" "$S8" "$S9" "$L1" "$DK" "$SN" "$OOM" "$A1" "$A2" "$A3" "$B1"; do
	"$WARREN" sandbox ls --all 2>/dev/null | grep -q "ws-$s" && left="$left ws-$s"
	pgrep -f "sandbox exec ws-$s" >/dev/null && left="$left exec:$s"
done
[ -z "$left" ] && pass "no session sandbox or exec client left after stop" || fail "no session sandbox or exec client left after stop" "$left"
pgrep -f "serve --data $D" >/dev/null && fail "no server process left" "$(pgrep -af "serve --data $D")" || pass "no server process left"
