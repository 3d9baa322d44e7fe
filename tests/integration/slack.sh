#!/bin/bash
# Slack end to end (docs/slack.md): a signed slash command starts a session
# as the mapped Warren user; unsigned, wrongly signed, stale or altered
# requests get 401 and start nothing; an unmapped user is refused; the
# outcome (summary, verify result, diff stats, link) is posted back to the
# command's response_url; an app mention starts a session answered in its
# thread through chat.postMessage, and Slack's retry of the same event
# starts nothing more; a failed post is retried; the decision after review
# follows in the thread; posts wait in the store while Slack is unreachable
# and across a server restart. Slack itself is
# tests/tools/slack_server.py, a recorded-response stand-in on loopback.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"

SLACK_TOOL="$ROOT_DIR/tests/tools/slack_server.py"
REC="$ROOT_DIR/tests/fixtures/replay/fix-after-verify.json"
BASE="https://warren.example"

# --- a project whose remote is a bare repository (as agent_review.sh) --------
greeter_remote

# --- Slack's stand-in: the first chat.postMessage fails (503, to be retried),
# the first chat.postEphemeral is refused (not_in_channel: given up) ---------
SECRET="slack-signing-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
BOT="xoxb-test-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
printf '%s\n' "$SECRET" >"$TEST_TMP/signing.secret"
printf '%s\n' "$BOT" >"$TEST_TMP/bot.token"
chmod 600 "$TEST_TMP/signing.secret" "$TEST_TMP/bot.token"
cat >"$TEST_TMP/slack.json" <<'EOF'
{"routes": {"POST /api/chat.postMessage": [{"status": 503}],
            "POST /api/chat.postEphemeral": [{"body": {"ok": false, "error": "not_in_channel"}}]}}
EOF
SLOG="$TEST_TMP/slack.log"
python3 "$SLACK_TOOL" --port 0 --recording "$TEST_TMP/slack.json" --log "$SLOG" --require-token "$BOT" \
	>"$TEST_TMP/slack.port" 2>"$TEST_TMP/slack.err" &
SLACK_PID=$!
for _ in $(seq 1 50); do [ -s "$TEST_TMP/slack.port" ] && break; sleep 0.1; done
SPORT="$(head -1 "$TEST_TMP/slack.port")"
SLACK_URL="http://127.0.0.1:$SPORT"
touch "$SLOG"
trap 'server_stop; kill "$SLACK_PID" 2>/dev/null; [ -n "${KEEP_TMP:-}" ] || rm -rf "$TEST_TMP"' EXIT

D="$TEST_TMP/data"
cat >"$TEST_TMP/config.json" <<EOF
{"model": {"provider": "replay", "replay": "$REC"},
 "verify": {"retries": 2},
 "repositories": [{"name": "greeter", "url": "$REMOTE"}],
 "slack": {"signing_secret_file": "$TEST_TMP/signing.secret",
           "bot_token_file": "$TEST_TMP/bot.token",
           "api_url": "$SLACK_URL/api",
           "base_url": "$BASE/",
           "retry_backoff": "300ms", "retries": 10,
           "users": {"UALICE": {"user": "alice", "role": "submitter"},
                     "UBOB": {"user": "bob", "role": "reviewer"}}}}
EOF
server_start "$D" "$TEST_TMP/config.json"
[ -n "$TOKEN" ] && grep -q "Slack at http://" "$SERVER_LOG" && pass "warren serve starts with a slack configuration" ||
	fail "warren serve starts with a slack configuration" "$(tail -3 "$SERVER_LOG")"

# slack_req PATH CONTENT-TYPE BODY [signed|unsigned|wrong|stale|altered]: a
# request as Slack sends it; sets CODE and BODY
slack_req() {
	local path="$1" type="$2" body="$3" mode="${4:-signed}" ts sig key="$SECRET" sent="$3" out
	ts="$(date +%s)"
	[ "$mode" = stale ] && ts=$((ts - 600))
	[ "$mode" = wrong ] && key="not-the-secret"
	[ "$mode" = altered ] && sent="$body&user_id=UBOB"
	sig="$(printf '%s' "$body" | python3 "$SLACK_TOOL" sign "$key" "$ts")"
	local hdrs=(-H "Content-Type: $type")
	[ "$mode" != unsigned ] && hdrs+=(-H "X-Slack-Request-Timestamp: $ts" -H "X-Slack-Signature: $sig")
	out="$(curl -s -w '\n%{http_code}' -X POST "${hdrs[@]}" --data-binary "$sent" "$URL$path")"
	CODE="${out##*$'\n'}"
	BODY="${out%$'\n'*}"
}
uri() { jq -rn --arg t "$1" '$t | @uri'; }
# slash USER TEXT [MODE]: the slash command /warren TEXT from USER
slash() {
	slack_req /slack/commands application/x-www-form-urlencoded \
		"token=legacy&team_id=T1&team_domain=acme&channel_id=C42&channel_name=dev&user_id=$1&user_name=someone&command=%2Fwarren&text=$(uri "$2")&api_app_id=A1&response_url=$(uri "$SLACK_URL/commands/T1/1/abc")&trigger_id=1.2.3" "${3:-signed}"
}
# mention EVENT-ID USER TEXT TS [MODE]: an app_mention delivery
mention() {
	slack_req /slack/events application/json \
		"$(jq -cn --arg id "$1" --arg u "$2" --arg t "<@U0BOT> $3" --arg ts "$4" \
			'{token: "legacy", team_id: "T1", api_app_id: "A1", type: "event_callback", event_id: $id, event_time: 1,
			  event: {type: "app_mention", user: $u, text: $t, ts: $ts, channel: "C9", event_ts: $ts}}')" "${5:-signed}"
}
sessions_of() {
	api GET "/api/v1/sessions${1:+?user=$1}"
	echo "$BODY" | jq '.sessions | length'
}
# posts JQ-FILTER: the stand-in's recorded requests that match, one JSON a line
posts() { jq -c "select($1)" "$SLOG" 2>/dev/null; }
# wait_post JQ-FILTER TIMEOUT-S [COUNT]: until COUNT (1) requests match
wait_post() {
	local i
	for i in $(seq 1 $(($2 * 10))); do
		[ "$(posts "$1" | wc -l)" -ge "${3:-1}" ] && return 0
		sleep 0.1
	done
	return 1
}
# thread JQ-FILTER: the first word of each post that matches, repeats
# merged ("Started *Ready")
thread() { jq -r "select($1) | .body.text | split(\" \")[0]" "$SLOG" | uniq | paste -sd' '; }

# --- the URL check, and what is refused --------------------------------------
slack_req /slack/events application/json '{"token": "legacy", "challenge": "ch-4711", "type": "url_verification"}'
[ "$CODE" = 200 ] && [ "$(jget .challenge)" = ch-4711 ] && pass "events: url_verification answers the challenge" ||
	fail "events: url_verification answers the challenge" "$CODE $BODY"
for mode in unsigned wrong stale altered; do
	slash UALICE "greeter make the greeting friendlier" "$mode"
	[ "$CODE" = 401 ] && [ "$(jget .error.code)" = unauthorized ] && pass "command, $mode: 401" || fail "command, $mode: 401" "$CODE $BODY"
	mention "EvBAD$mode" UALICE "greeter make the greeting friendlier" 1700000000.000001 "$mode"
	[ "$CODE" = 401 ] && pass "mention, $mode: 401" || fail "mention, $mode: 401" "$CODE $BODY"
done
[ "$(sessions_of)" = 0 ] && pass "refused requests start nothing" || fail "refused requests start nothing" "$(sessions_of) sessions"
slash USTRANGER "greeter make the greeting friendlier"
[ "$CODE" = 200 ] && [ "$(jget .response_type)" = ephemeral ] && jget .text | grep -q "is not linked to a Warren user" &&
	[ "$(sessions_of)" = 0 ] && pass "an unmapped Slack user is told so, and nothing starts" ||
	fail "an unmapped Slack user is told so, and nothing starts" "$CODE $BODY"
slash UALICE "nosuch do it"
jget .text | grep -q "No repository named \`nosuch\`. Registered: \`greeter\`." &&
	pass "an unknown repository is named, with the registered ones" || fail "an unknown repository is named, with the registered ones" "$BODY"

# --- a slash command: the session, and its outcome at the response_url -----------
slash UALICE "greeter make the greeting friendlier"
S1="$(jget .text | grep -o "$BASE/#/sessions/s-[0-9a-z]*" | head -1 | sed 's|.*/||')"
[ "$CODE" = 200 ] && [ "$(jget .response_type)" = in_channel ] && [ -n "$S1" ] && jget .text | grep -q "on \`greeter\` for alice" &&
	pass "a signed slash command starts a session, the answer links to its page" ||
	fail "a signed slash command starts a session, the answer links to its page" "$CODE $BODY"
api GET "/api/v1/sessions/$S1"
[ "$(jget .user)" = alice ] && [ "$(jget .prompt)" = "make the greeting friendlier" ] && [ "$(jget .repo)" = greeter ] &&
	pass "the session is the mapped user's (alice), with the prompt" || fail "the session is the mapped user's (alice), with the prompt" "$BODY"
wait_state "$S1" review 120
[ "$STATE" = review ] && pass "the slash command's session reaches review" || fail "the slash command's session reaches review" "$STATE $(session_log "$S1" | tail -3)"
wait_post '.path == "/commands/T1/1/abc"' 15
out="$(posts '.path == "/commands/T1/1/abc"' | head -1)"
text="$(echo "$out" | jq -r '.body.text')"
echo "$text" | grep -qF "<$BASE/#/sessions/$S1|$S1>" && echo "$text" | grep -qF '*Ready for review:*' &&
	pass "the outcome is posted to the response_url, with the link" || fail "the outcome is posted to the response_url, with the link" "$out"
echo "$text" | grep -qF '*Verify:* passed after 2 attempts' && echo "$text" | grep -qF '*Diff:* 1 file changed, +1 -1' &&
	echo "$text" | grep -qF 'Greet with hello and goodbye' &&
	pass "the outcome has the verify result, the diff's stats and the summary" ||
	fail "the outcome has the verify result, the diff's stats and the summary" "$text"
[ "$(echo "$out" | jq -r '.body.response_type')" = in_channel ] && [ "$(echo "$out" | jq -r '.authorization')" = null ] &&
	pass "the response_url gets no token" || fail "the response_url gets no token" "$out"

# --- an app mention: answered in its thread, retries deduplicated ------------------
mention EvMENTION1 UBOB "greeter another friendlier greeting" 1700000000.000200
[ "$CODE" = 200 ] && [ "$(jget .ok)" = true ] && pass "a signed app_mention is accepted" || fail "a signed app_mention is accepted" "$CODE $BODY"
mention EvMENTION1 UBOB "greeter another friendlier greeting" 1700000000.000200
[ "$CODE" = 200 ] && pass "Slack's retry of the event is acknowledged" || fail "Slack's retry of the event is acknowledged" "$CODE $BODY"
[ "$(sessions_of bob)" = 1 ] && pass "a retried event_id does not start a second session" || fail "a retried event_id does not start a second session" "$(sessions_of bob) sessions"
api GET "/api/v1/sessions?user=bob"
S2="$(jget '.sessions[0].id')"
T2='.path == "/api/chat.postMessage" and .body.thread_ts == "1700000000.000200"'
started="$T2 and (.body.text | test(\"^Started session\"))"
wait_post "$started" 15 2
[ "$(posts "$started" | wc -l)" = 2 ] &&
	pass "the first chat.postMessage (503) is retried" || fail "the first chat.postMessage (503) is retried" "$(posts "$started")"
reply="$(posts "$started" | tail -1)"
[ "$(echo "$reply" | jq -r .body.channel)" = C9 ] && echo "$reply" | jq -r .body.text | grep -qF "<$BASE/#/sessions/$S2|$S2>" &&
	[ "$(echo "$reply" | jq -r .authorization)" = "Bearer $BOT" ] &&
	pass "the mention is answered in a thread under it, with the bot token" || fail "the mention is answered in a thread under it, with the bot token" "$reply"
wait_state "$S2" review 120
outcome="$T2 and (.body.text | test(\"Ready for review\"))"
wait_post "$outcome" 15
out="$(posts "$outcome")"
[ "$(echo "$out" | wc -l)" = 1 ] && echo "$out" | jq -r .body.text | grep -qF "<$BASE/#/sessions/$S2|$S2>" &&
	echo "$out" | jq -r .body.text | grep -qF '*Verify:* passed' &&
	pass "the outcome is posted once, in the mention's thread (chat.postMessage)" ||
	fail "the outcome is posted once, in the mention's thread (chat.postMessage)" "$out"
[ "$(thread "$T2")" = "Started *Ready" ] &&
	pass "the thread reads in order: the answer, then the outcome" || fail "the thread reads in order: the answer, then the outcome" "$(thread "$T2")"
mention EvHELP UALICE "help" 1700000000.000250
eph='.path == "/api/chat.postEphemeral"'
wait_post "$eph and .body.user == \"UALICE\"" 10
for _ in $(seq 1 30); do grep -q "Slack said not_in_channel (not retried)" "$SERVER_LOG" && break; sleep 0.1; done
[ "$(posts "$eph and .body.user == \"UALICE\"" | wc -l)" = 1 ] && posts "$eph" | jq -r .body.text | grep -qF '`@Warren REPO PROMPT`' &&
	grep -q "post [0-9]* (ephemeral): Slack chat.postEphemeral: Slack said not_in_channel (not retried)" "$SERVER_LOG" &&
	pass "a post Slack refuses (not_in_channel) is given up at once, with a log line" ||
	fail "a post Slack refuses (not_in_channel) is given up at once, with a log line" "$(posts "$eph"; grep slack: "$SERVER_LOG")"
mention EvMENTION2 USTRANGER "greeter do it" 1700000000.000300
wait_post "$eph and .body.user == \"USTRANGER\"" 10 &&
	posts "$eph and .body.user == \"USTRANGER\"" | jq -r .body.text | grep -q "is not linked" &&
	[ "$(sessions_of)" = 2 ] && pass "an unmapped user's mention gets an answer only they see, and nothing starts" ||
	fail "an unmapped user's mention gets an answer only they see, and nothing starts" "$(posts "$eph")"

# --- the reviewer decides from Slack; the decision follows in the thread -----------
slash UALICE "reject $S2 no thanks"
jget .text | grep -q "needs the reviewer or admin role" && pass "a submitter may not reject from Slack" || fail "a submitter may not reject from Slack" "$BODY"
slash UBOB "reject $S2 not what we want"
[ "$(jget .response_type)" = in_channel ] && jget .text | grep -qF '*Rejected:*' &&
	pass "a reviewer rejects from Slack" || fail "a reviewer rejects from Slack" "$BODY"
api GET "/api/v1/sessions/$S2"
[ "$(jget .state)" = rejected ] && [ "$(jget .outcome.decision.by)" = bob ] && pass "the session is rejected by bob" || fail "the session is rejected by bob" "$(jget .state) $(jget .outcome.decision)"
decided="$T2 and (.body.text | test(\"Rejected\"))"
wait_post "$decided" 15 && posts "$decided" | jq -r .body.text | grep -qF 'not what we want' &&
	pass "the decision is posted to the thread after the outcome" || fail "the decision is posted to the thread after the outcome" "$(posts '.path == "/api/chat.postMessage"' | tail -2)"
slash UALICE "status $S1"
[ "$(jget .response_type)" = ephemeral ] && jget .text | grep -qF '*Ready for review:*' && pass "status ID" || fail "status ID" "$BODY"

# --- Slack unreachable, then a restart: the posts wait in the store ----------------
kill "$SLACK_PID" 2>/dev/null
wait "$SLACK_PID" 2>/dev/null
mention EvMENTION3 UALICE "greeter a third greeting" 1700000000.000400
api GET "/api/v1/sessions?user=alice"
S3="$(jget '.sessions[0].id')"
[ "$CODE" = 200 ] && [ "$S3" != "$S1" ] && wait_state "$S3" review 120 &&
	pass "a mention while Slack is unreachable still starts its session" || fail "a mention while Slack is unreachable still starts its session" "$S3 $STATE"
server_stop
server_start "$D" "$TEST_TMP/config.json"
python3 "$SLACK_TOOL" --port "$SPORT" --log "$SLOG" --require-token "$BOT" >"$TEST_TMP/slack2.port" 2>"$TEST_TMP/slack2.err" &
SLACK_PID=$!
T3='.path == "/api/chat.postMessage" and .body.thread_ts == "1700000000.000400"'
wait_post "$T3 and (.body.text | test(\"Ready for review\"))" 40
[ "$(posts "$T3" | wc -l)" = 2 ] && [ "$(thread "$T3")" = "Started *Ready" ] &&
	jq -r "select($T3) | .body.text" "$SLOG" | grep -qF "<$BASE/#/sessions/$S3|$S3>" &&
	pass "after the restart, the answer and the outcome are posted once each, in order" ||
	fail "after the restart, the answer and the outcome are posted once each, in order" "$(jq -c "select($T3) | .body.text | .[0:40]" "$SLOG")"

# --- an answer later than Slack waits for goes through the response_url too --------
# (an approval's push can take longer than Slack's three seconds; here the
# bar is 1 ms, which a push, a git process on the host, always takes)
server_stop
jq '.slack.answer_within = "1ms"' "$TEST_TMP/config.json" >"$TEST_TMP/late.json"
server_start "$D" "$TEST_TMP/late.json"
LATE='.path == "/commands/T1/1/abc" and (.body.text | test("Pushed")) and (.body.text | test("'"$S1"'"))'
slash UBOB "approve $S1"
# two posts: the late answer, and the decision the outbox posts after review
[ "$CODE" = 200 ] && jget .text | grep -qF 'Pushed' && wait_post "$LATE" 20 2 &&
	pass "a late answer also goes to the response_url" ||
	fail "a late answer also goes to the response_url" "$CODE $(jget .text | head -2) $(posts '.path == "/commands/T1/1/abc"' | tail -3 | jq -c '.body.text[0:40]')"
echo '{"slack": {"answer_within": "5s"}}' >"$TEST_TMP/bad-late.json"
out="$("$WARREN" serve --data "$TEST_TMP/bad-data" --listen 127.0.0.1:1 --config "$TEST_TMP/bad-late.json" 2>&1)"
echo "$out" | grep -q "slack.answer_within" && pass "answer_within above Slack's 3 s is refused, named" || fail "answer_within above Slack's 3 s is refused, named" "$out"

# --- nothing secret in the log --------------------------------------------------------
grep -qF -- "$SECRET" "$SERVER_LOG" "$TEST_TMP/serve."*.log && fail "the signing secret and the bot token are not logged" "found" ||
	{ grep -qF -- "$BOT" "$SERVER_LOG" "$TEST_TMP/serve."*.log && fail "the signing secret and the bot token are not logged" "token found" ||
		pass "the signing secret and the bot token are not logged"; }
server_stop
kill "$SLACK_PID" 2>/dev/null
wait "$SLACK_PID" 2>/dev/null

left=""
for s in "$S1" "$S2" "$S3"; do "$WARREN" sandbox ls --all 2>/dev/null | grep -q "ws-$s" && left="$left $s"; done
[ -z "$left" ] && pass "no sandbox left" || fail "no sandbox left" "$left"
