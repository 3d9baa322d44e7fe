#!/bin/bash
# The model gateway end to end: a server whose "gateway" serves the three
# wire formats from tests/tools/model_server.py (a stand-in for the paid
# APIs that wants the real key), and a command agent that calls it from
# inside its sandbox with the variables Warren sets: Chat Completions (not
# streamed), Responses (streamed), Anthropic Messages (streamed, with
# ANTHROPIC_AUTH_TOKEN), then a call past the session's budget. Checked:
# the variables are there and the token is not the key; the real key is
# nowhere in the sandbox (environment of every process, files); the
# stand-in saw the real key on every call it got and nothing past the
# budget; the usage the session records equals what the stand-in reported,
# priced; each call is a model_call event and an audit record, the
# refusal a budget event; warren stats counts the cost; the turn's token
# is refused once the session rests, and the gateway's socket goes with
# the session.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"

MODEL_SERVER="$ROOT_DIR/tests/tools/model_server.py"
REAL_KEY="sk-real-gateway-key-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"

# --- the stand-in upstream ----------------------------------------------------
cat >"$TEST_TMP/rec.json" <<'EOF'
{"responses": [
  {"text": "chat answer", "usage": {"prompt_tokens": 1000, "completion_tokens": 100}},
  {"text": "responses answer", "usage": {"prompt_tokens": 2000, "completion_tokens": 200, "cached_tokens": 500}},
  {"text": "messages answer", "usage": {"prompt_tokens": 3000, "completion_tokens": 300}},
  {"text": "past the budget: never played", "usage": {"prompt_tokens": 1, "completion_tokens": 1}}
]}
EOF
python3 "$MODEL_SERVER" --port 0 --recording "$TEST_TMP/rec.json" --log "$TEST_TMP/upstream.jsonl" \
	--require-key "$REAL_KEY" >"$TEST_TMP/ms.port" 2>"$TEST_TMP/ms.err" &
MS_PID=$!
trap 'kill $MS_PID 2>/dev/null; server_stop; rm -rf "$TEST_TMP"' EXIT
for _ in $(seq 1 50); do [ -s "$TEST_TMP/ms.port" ] && break; sleep 0.1; done
MP="$(head -1 "$TEST_TMP/ms.port")"
[ -n "$MP" ] || { fail "the stand-in model server starts" "$(cat "$TEST_TMP/ms.err")"; exit 0; }

# --- the server ---------------------------------------------------------------
D="$TEST_TMP/data"
CONF="$TEST_TMP/serve.json"
cat >"$CONF" <<EOF
{"gateway": {"upstreams": {
   "chat_completions": {"base_url": "http://127.0.0.1:$MP/v1", "api_key_env": "WR_TEST_GW_KEY"},
   "responses": {"base_url": "http://127.0.0.1:$MP/v1", "api_key_env": "WR_TEST_GW_KEY"},
   "messages": {"base_url": "http://127.0.0.1:$MP", "api_key_env": "WR_TEST_GW_KEY"}},
  "prices": {"*": {"prompt": 2, "completion": 10, "cached": 1}},
  "budget": {"model_calls": 3}}}
EOF
WR_TEST_GW_KEY="$REAL_KEY" server_start "$D" "$CONF"
api GET /api/v1/healthz
[ "$CODE" = 200 ] && pass "a server with a gateway starts" ||
	{ fail "a server with a gateway starts" "$(tail -3 "$SERVER_LOG")"; exit 0; }

# a bad gateway configuration is refused at start, naming the key
echo '{"gateway": {"upstreams": {"messages": {"base_url": "http://x", "api_key_env": "WR_TEST_NOT_SET"}}}}' >"$TEST_TMP/bad.json"
out="$("$WARREN" serve --data "$TEST_TMP/bad-data" --listen 127.0.0.1:1 --config "$TEST_TMP/bad.json" 2>&1)"
echo "$out" | grep -q 'gateway.upstreams.messages.api_key_env' && pass "a bad gateway configuration names the key" ||
	fail "a bad gateway configuration names the key" "$out"

# --- the repository -------------------------------------------------------------
R="$TEST_TMP/proj"
mkdir -p "$R"
echo '{}' >"$R/warren.json"
echo one >"$R/file.txt"
g -C "$R" init -q -b main
g -C "$R" add -A
g -C "$R" commit -q -m initial
api POST /api/v1/repositories "{\"url\": \"$R\", \"name\": \"proj\"}"
[ "$CODE" = 201 ] || fail "register the repository" "$CODE $BODY"

# --- the agent: three calls, one too many, and a look for the key --------------
AGENT="$(
	cat <<EOF
echo "vars \$OPENAI_BASE_URL \$ANTHROPIC_BASE_URL \${OPENAI_API_KEY%%_*} \${#OPENAI_API_KEY} \$([ "\$OPENAI_API_KEY" = "\$ANTHROPIC_AUTH_TOKEN" ] && echo same)"
printf '%s' "\$OPENAI_API_KEY" >/tmp/turn-token
c=\$(curl -s --max-time 20 "\$OPENAI_BASE_URL/chat/completions" -H "Authorization: Bearer \$OPENAI_API_KEY" \
  -H 'Content-Type: application/json' -d '{"model": "m1", "messages": [{"role": "user", "content": "hi"}]}')
echo "chat \$(echo "\$c" | grep -o 'chat answer')"
r=\$(curl -s -N --max-time 20 "\$OPENAI_BASE_URL/responses" -H "Authorization: Bearer \$OPENAI_API_KEY" \
  -H 'Content-Type: application/json' -d '{"model": "m2", "stream": true, "input": "hi"}')
echo "responses \$(echo "\$r" | grep -c 'event: response.completed') \$(echo "\$r" | grep -o 'responses answer' | head -1)"
m=\$(curl -s -N --max-time 20 "\$ANTHROPIC_BASE_URL/v1/messages?beta=true" -H "Authorization: Bearer \$ANTHROPIC_AUTH_TOKEN" \
  -H 'anthropic-version: 2023-06-01' -H 'Content-Type: application/json' \
  -d '{"model": "m3", "max_tokens": 10, "stream": true, "messages": [{"role": "user", "content": "hi"}]}')
echo "messages \$(echo "\$m" | grep -c 'event: message_stop') \$(echo "\$m" | grep -c 'text_delta')"
b=\$(curl -s --max-time 20 -w ' %{http_code}' "\$OPENAI_BASE_URL/chat/completions" -H "Authorization: Bearer \$OPENAI_API_KEY" \
  -H 'Content-Type: application/json' -d '{"model": "m1", "messages": []}')
echo "budget \${b##* } \$(echo "\$b" | grep -o 'model-call budget is spent')"
# the key in two halves: this script's own command line holds both, apart
k1=${REAL_KEY%-*}; k2=${REAL_KEY##*-}
n=0
for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do grep -qa -- "\$k1-\$k2" "\$f" 2>/dev/null && n=\$((n+1)); done
echo "key-in-proc \$n"
echo "key-in-files \$(grep -rlas -- "\$k1-\$k2" /workspace /tmp /run /etc /root /home 2>/dev/null | wc -l)"
echo two >file.txt
EOF
)"
S="$(submit proj "call the model" "$AGENT")"
[ -n "$S" ] || fail "submit the session" "$CODE $BODY"
wait_state "$S" review 120 || fail "the session reaches review" "$STATE $(session_log "$S" | tail -8; tail -5 "$SERVER_LOG")"
LOG="$(session_log "$S")"

echo "$LOG" | grep -q "^stdout vars http://127.0.0.1:17077/v1 http://127.0.0.1:17077 wgw 68 same$" &&
	pass "the agent has the gateway's URLs and a session token, not a key" ||
	fail "the agent has the gateway's URLs and a session token, not a key" "$(echo "$LOG" | grep vars)"
echo "$LOG" | grep -q "^stdout chat chat answer$" && pass "Chat Completions through the gateway" ||
	fail "Chat Completions through the gateway" "$(echo "$LOG" | grep -E 'chat|stderr')"
echo "$LOG" | grep -q "^stdout responses 1 responses answer$" && pass "Responses, streamed, through the gateway" ||
	fail "Responses, streamed, through the gateway" "$(echo "$LOG" | grep responses)"
echo "$LOG" | grep -Eq "^stdout messages 1 [1-9][0-9]*$" && pass "Anthropic Messages, streamed, through the gateway" ||
	fail "Anthropic Messages, streamed, through the gateway" "$(echo "$LOG" | grep messages)"
echo "$LOG" | grep -q "^stdout budget 403 model-call budget is spent$" &&
	pass "a call past the session's budget is refused (403) with the reason" ||
	fail "a call past the session's budget is refused (403) with the reason" "$(echo "$LOG" | grep budget)"
echo "$LOG" | grep -q "^stdout key-in-proc 0$" && echo "$LOG" | grep -q "^stdout key-in-files 0$" &&
	pass "the real key is in no process and no file of the sandbox" ||
	fail "the real key is in no process and no file of the sandbox" "$(echo "$LOG" | grep key-in)"

# what the stand-in saw: three calls, each with the real key
calls="$(wc -l <"$TEST_TMP/upstream.jsonl")"
keyed="$(jq -r '[.authorization, .x_api_key] | map(select(. != null)) | .[0]' "$TEST_TMP/upstream.jsonl" |
	grep -c -x -e "Bearer $REAL_KEY" -e "$REAL_KEY")"
[ "$calls" = 3 ] && [ "$keyed" = 3 ] && pass "the upstream got three calls, each with the real key, none past the budget" ||
	fail "the upstream got three calls, each with the real key, none past the budget" "calls=$calls keyed=$keyed $(head -c 600 "$TEST_TMP/upstream.jsonl")"

jq -r .path "$TEST_TMP/upstream.jsonl" | grep -qx '/v1/messages?beta=true' &&
	pass "the agent's query string goes upstream (Claude Code's ?beta=true)" ||
	fail "the agent's query string goes upstream (Claude Code's ?beta=true)" "$(jq -r .path "$TEST_TMP/upstream.jsonl")"

# the usage recorded is the stand-in's, priced: prompt 6000 (500 cached),
# completion 600: (5500*2 + 500*1 + 600*10) / 1e6
api GET "/api/v1/sessions/$S"
u="$(jget '.outcome.usage.prompt_tokens') $(jget '.outcome.usage.completion_tokens') $(jget '.outcome.usage.model_calls')"
cost="$(jget '.outcome.usage.cost')"
[ "$u" = "6000 600 3" ] && awk -v c="$cost" 'BEGIN { exit !(c > 0.017499 && c < 0.017501) }' &&
	pass "the session's usage is what the upstream reported, priced (6000 600 3, cost 0.0175)" ||
	fail "the session's usage is what the upstream reported, priced (6000 600 3, cost 0.0175)" "$u cost=$cost"
ev="$(events_json "$S")"
n_calls="$(echo "$ev" | jq '[.events[] | select(.kind == "model_call")] | length')"
n_fwd="$(echo "$ev" | jq '[.events[] | select(.kind == "model_call" and .data.decision == "forwarded" and .data.usage_seen)] | length')"
n_budget="$(echo "$ev" | jq '[.events[] | select(.kind == "budget" and .data.by == "gateway")] | length')"
[ "$n_calls" = 4 ] && [ "$n_fwd" = 3 ] && [ "$n_budget" = 1 ] &&
	pass "each call is a model_call event with its usage; the refusal a budget event" ||
	fail "each call is a model_call event with its usage; the refusal a budget event" "calls=$n_calls forwarded=$n_fwd budget=$n_budget"
audit="$("$WARREN" audit export "$S" --data "$D" 2>/dev/null || true)"
[ "$(echo "$audit" | grep -c 'model_call')" -ge 4 ] && pass "the calls are in the audit log" ||
	fail "the calls are in the audit log" "$(echo "$audit" | tail -3)"
api GET /api/v1/stats
awk -v c="$(jget '.model.cost')" 'BEGIN { exit !(c > 0.0174) }' && pass "warren stats counts the gateway's cost" ||
	fail "warren stats counts the gateway's cost" "$BODY"

# the session rests: the turn's token is dead, from inside its own sandbox
out="$(sandbox_exec_in "$S" sh -c 'curl -s --max-time 10 -w " %{http_code}" http://127.0.0.1:17077/v1/chat/completions -H "Authorization: Bearer $(cat /tmp/turn-token)" -H "Content-Type: application/json" -d "{\"model\": \"m1\", \"messages\": []}"')"
echo "$out" | grep -q 'no longer valid' && [ "${out##* }" = 401 ] &&
	pass "the turn's token is refused once the session rests (401)" ||
	fail "the turn's token is refused once the session rests (401)" "$out"
[ "$(wc -l <"$TEST_TMP/upstream.jsonl")" = 3 ] && pass "a refused token reaches no upstream" ||
	fail "a refused token reaches no upstream" "$(wc -l <"$TEST_TMP/upstream.jsonl")"

# the session ends: its socket goes
api POST "/api/v1/sessions/$S/reject" '{}'
wait_state "$S" rejected 60 || fail "the session is rejected" "$STATE"
for _ in $(seq 1 50); do [ -e "$D/sessions/$S.gateway" ] || break; sleep 0.1; done
[ ! -e "$D/sessions/$S.gateway" ] && pass "the gateway's socket goes with the session" ||
	fail "the gateway's socket goes with the session" "$(ls -la "$D/sessions/$S.gateway" 2>&1)"
