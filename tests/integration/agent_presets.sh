#!/bin/bash
# The agent presets with the real CLIs: opencode, codex and claude code,
# installed by the server into their agents layers from a registry on
# loopback (tests/tools/npm_registry.py --tarballs, serving the pinned
# tarballs scripts/fetch-agent-packages.sh fetched before the tests), run
# in sessions through the model gateway against tests/tools/model_server.py
# (one per wire format, each playing the CLI's recording of
# tests/fixtures/agents/ and wanting the real key). Each session edits
# tests/fixtures/agents-app, passes its verification (make check) and
# waits in review; then a follow-up continues the same conversation.
# Checked for each: the layer built once and reused; the real key is
# nowhere in the sandbox (every process's environment and command line,
# its files, the layer); the stand-in saw the real key on every call; the
# usage recorded equals what the stand-in reported; warren stats counts
# it; then, with a budget of one model call, the CLI's next call is
# refused with the reason, which the CLI prints.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"

PKGS="${AGENT_PACKAGES:-/var/cache/warren-test/agents}"
if ! ls "$PKGS"/opencode-ai-*.tgz "$PKGS"/openai-codex-*.tgz "$PKGS"/anthropic-ai-claude-code-*.tgz >/dev/null 2>&1; then
	echo "SKIP agent_presets: no agent tarballs in $PKGS (scripts/fetch-agent-packages.sh $PKGS)"
	exit 0
fi
TOOLS="$ROOT_DIR/tests/tools"
REAL_KEY="sk-real-preset-key-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
ALL_PRESETS="opencode codex claude-code"
PRESETS="${PRESETS:-$ALL_PRESETS}" # the sessions (all three unless told)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	[ -n "${AGENT_PRESETS_KEEP:-}" ] && cp -r "$TEST_TMP" "$AGENT_PRESETS_KEEP"
	server_stop
	rm -rf "$TEST_TMP"
}
trap cleanup EXIT

# --- the registry, and one stand-in per wire format ---------------------------
python3 "$TOOLS/npm_registry.py" --tarballs "$PKGS" --port 0 --log "$TEST_TMP/registry.log" \
	--public-host registry.warren.test \
	>"$TEST_TMP/registry.port" 2>"$TEST_TMP/registry.err" &
pids+=($!)
start_model() { # PRESET: its stand-in, port in $TEST_TMP/PRESET.port
	python3 "$TOOLS/model_server.py" --port 0 --recording "$ROOT_DIR/tests/fixtures/agents/$1.json" \
		--log "$TEST_TMP/$1.jsonl" --require-key "$REAL_KEY" --var WORKSPACE=/workspace \
		>"$TEST_TMP/$1.port" 2>"$TEST_TMP/$1.err" &
	pids+=($!)
	MODEL_PIDS+=($!)
}
MODEL_PIDS=()
for p in $ALL_PRESETS; do start_model "$p"; done
for f in registry $ALL_PRESETS; do
	for _ in $(seq 1 600); do [ -s "$TEST_TMP/$f.port" ] && break; sleep 0.1; done
done
RP="$(head -1 "$TEST_TMP/registry.port")"
OP="$(head -1 "$TEST_TMP/opencode.port")"
CP="$(head -1 "$TEST_TMP/codex.port")"
AP="$(head -1 "$TEST_TMP/claude-code.port")"
[ -n "$RP" ] && [ -n "$OP" ] && [ -n "$CP" ] && [ -n "$AP" ] ||
	{ fail "the stand-ins start" "$(cat "$TEST_TMP"/*.err)"; exit 0; }

# --- the server ------------------------------------------------------------------
D="$TEST_TMP/data"
write_conf() { # BUDGET-JSON
	cat >"$TEST_TMP/serve.json" <<EOF
{"agents": {"registry": "http://registry.warren.test:$RP/"},
 "egress": {"allow_addresses": ["127.0.0.1/32"], "hosts": {"registry.warren.test": "127.0.0.1"}},
 "gateway": {"upstreams": {
   "chat_completions": {"base_url": "http://127.0.0.1:$OP/v1", "api_key_env": "WR_TEST_PRESET_KEY",
                        "models": ["stand-in"]},
   "responses": {"base_url": "http://127.0.0.1:$CP/v1", "api_key_env": "WR_TEST_PRESET_KEY",
                 "models": ["gpt-5.5"]},
   "messages": {"base_url": "http://127.0.0.1:$AP", "api_key_env": "WR_TEST_PRESET_KEY"}},
  "prices": {"*": {"prompt": 2, "completion": 10, "cached": 0.5}}${1:+, \"budget\": $1}}}
EOF
}
write_conf ""
WR_TEST_PRESET_KEY="$REAL_KEY" server_start "$D" "$TEST_TMP/serve.json"
api GET /api/v1/healthz
[ "$CODE" = 200 ] || { fail "the server starts" "$(tail -3 "$SERVER_LOG")"; exit 0; }

# --- the project -------------------------------------------------------------------
R="$TEST_TMP/app"
cp -r "$ROOT_DIR/tests/fixtures/agents-app" "$R"
echo '{"customizations": {"warren": {"verify": ["make", "check"]}}}' >"$R/warren.json"
g -C "$R" init -q -b main
g -C "$R" add -A
g -C "$R" commit -q -m initial
api POST /api/v1/repositories "{\"url\": \"$R\", \"name\": \"app\"}"
[ "$CODE" = 201 ] || fail "register the repository" "$CODE $BODY"
PROMPT1="make check fails: fix greet.sh so that the greeting ends with an exclamation mark."
PROMPT2="What did you change? Answer in one sentence."

# a preset the server's gateway cannot serve is refused at submission
api POST /api/v1/sessions '{"repo": "app", "prompt": "x", "agent": {"preset": "aider"}}'
[ "$CODE" = 400 ] && echo "$BODY" | grep -q "not one Warren knows" &&
	pass "an unknown preset: 400 naming it" || fail "an unknown preset: 400 naming it" "$CODE $BODY"

# --- one session per preset, all at once ----------------------------------------
declare -A SID
for p in $PRESETS; do
	api POST /api/v1/sessions "$(jq -n --arg p "$PROMPT1" --arg a "$p" '{repo: "app", prompt: $p, agent: {preset: $a}}')"
	SID[$p]="$(jget .id)"
	[ "$CODE" = 201 ] && [ "$(jget .agent.preset)" = "$p" ] ||
		fail "$p: a session with the preset" "$CODE $BODY"
done

# what the stand-in of PRESET reported, summed over the entries it played
played_usage() { # PRESET -> "prompt completion"
	python3 - "$ROOT_DIR/tests/fixtures/agents/$1.json" "$TEST_TMP/$1.jsonl" <<'EOF'
import json, sys
rec = json.load(open(sys.argv[1]))["responses"]
p = c = 0
for line in open(sys.argv[2]):
    x = json.loads(line)
    if x.get("entry") is not None and x.get("status", 200) == 200:
        u = rec[x["entry"]].get("usage", {})
        p += u.get("prompt_tokens", 0); c += u.get("completion_tokens", 0)
print(p, c)
EOF
}

for p in $PRESETS; do
	S="${SID[$p]}"
	if ! wait_state "$S" review 600; then
		fail "$p: the session edits the project and waits in review" \
			"$STATE $(session_log "$S" | tail -6; tail -4 "$SERVER_LOG")"
		continue
	fi
	api GET "/api/v1/sessions/$S"
	[ "$(jget .outcome.verify.passed)" = true ] && pass "$p: edits the project, passes verification, waits in review" ||
		fail "$p: edits the project, passes verification, waits in review" "$(jget .outcome.verify)"
	diff="$(curl -s -H "Authorization: Bearer $TOKEN" "$URL/api/v1/sessions/$S/diff")"
	echo "$diff" | grep -q '^+echo "Hello, ${1:-world}!"' && pass "$p: the change is the CLI's edit" ||
		fail "$p: the change is the CLI's edit" "$(echo "$diff" | head -20)"
	# the usage the session records is the stand-in's
	read -r up uc <<<"$(played_usage "$p")"
	got="$(jget .outcome.usage.prompt_tokens) $(jget .outcome.usage.completion_tokens)"
	[ "$got" = "$up $uc" ] && [ "$up" -gt 0 ] && pass "$p: the usage recorded is what the upstream reported ($got)" ||
		fail "$p: the usage recorded is what the upstream reported" "recorded $got, served $up $uc"
	# every call the stand-in got carried the real key
	n="$(wc -l <"$TEST_TMP/$p.jsonl")"
	k="$(jq -r '[.authorization, .x_api_key] | map(select(. != null)) | .[0]' "$TEST_TMP/$p.jsonl" |
		grep -c -x -e "Bearer $REAL_KEY" -e "$REAL_KEY")"
	[ "$n" -gt 0 ] && [ "$k" = "$n" ] && pass "$p: the upstream saw the real key on every call ($n)" ||
		fail "$p: the upstream saw the real key on every call" "calls=$n keyed=$k"
	# the key is in no process, file or layer the sandbox has
	k1="${REAL_KEY%-*}"
	k2="${REAL_KEY##*-}"
	found="$(sandbox_exec_in "$S" sh -c "n=0; for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do grep -qa -- \"\$1-\$2\" \"\$f\" 2>/dev/null && n=\$((n+1)); done; echo \$n \$(grep -rlas -- \"\$1-\$2\" /workspace /root /tmp /run /etc /opt 2>/dev/null | wc -l)" sh "$k1" "$k2")"
	[ "$found" = "0 0" ] && pass "$p: the real key is nowhere in the sandbox" ||
		fail "$p: the real key is nowhere in the sandbox" "$found"
done

# the layers: one per preset, complete, and reused
n_layers="$(ls -d "$D"/agents/*/ 2>/dev/null | wc -l)"
[ "$n_layers" = "$(echo $PRESETS | wc -w)" ] && pass "one agents layer per preset" || fail "one agents layer per preset" "$(ls "$D/agents" 2>&1)"
api GET /api/v1/stats
awk -v c="$(jget '.model.cost')" 'BEGIN { exit !(c > 0) }' && pass "warren stats counts the presets' cost" ||
	fail "warren stats counts the presets' cost" "$BODY"

# --- a follow-up continues the conversation ---------------------------------------
for p in $PRESETS; do
	S="${SID[$p]}"
	api POST "/api/v1/sessions/$S/messages" "$(jq -n --arg t "$PROMPT2" '{text: $t}')"
	[ "$CODE" = 201 ] || [ "$CODE" = 202 ] || fail "$p: a follow-up" "$CODE $BODY"
done
for p in $PRESETS; do
	S="${SID[$p]}"
	wait_turns "$S" 2 120 && wait_state "$S" review 300 &&
		session_log "$S" | grep -q "I replaced the full stop" &&
		pass "$p: a follow-up continues the same conversation" ||
		fail "$p: a follow-up continues the same conversation" "$STATE $(session_log "$S" | tail -4)"
done
before="$(grep -c 'GET ' "$TEST_TMP/registry.log" 2>/dev/null || echo 0)"

# --- a budget of one model call: the next is refused, and the CLI says why -------
for p in $PRESETS; do
	api POST "/api/v1/sessions/${SID[$p]}/reject" '{}'
done
server_stop
# fresh stand-ins: each recording starts again from its first entry
for pid in "${MODEL_PIDS[@]}"; do kill "$pid" 2>/dev/null; done
for p in $ALL_PRESETS; do rm -f "$TEST_TMP/$p.port"; : >"$TEST_TMP/$p.jsonl"; start_model "$p"; done
for p in $ALL_PRESETS; do
	for _ in $(seq 1 100); do [ -s "$TEST_TMP/$p.port" ] && break; sleep 0.1; done
done
OP="$(head -1 "$TEST_TMP/opencode.port")"
CP="$(head -1 "$TEST_TMP/codex.port")"
AP="$(head -1 "$TEST_TMP/claude-code.port")"
write_conf '{"model_calls": 1}'
WR_TEST_PRESET_KEY="$REAL_KEY" server_start "$D" "$TEST_TMP/serve.json"
for p in $PRESETS; do
	api POST /api/v1/sessions "$(jq -n --arg p "$PROMPT1" --arg a "$p" '{repo: "app", prompt: $p, agent: {preset: $a}}')"
	S="$(jget .id)"
	for _ in $(seq 1 600); do
		api GET "/api/v1/sessions/$S"
		case "$(jget .state)" in review | failed | cancelled | expired) break ;; esac
		sleep 0.5
	done
	ev="$(events_json "$S")"
	refused="$(echo "$ev" | jq '[.events[] | select(.kind == "model_call" and .data.decision == "refused")] | length')"
	said="$(echo "$ev" | jq -r '.events[] | select(.kind == "output") | .data.line' | grep -c 'budget is spent')"
	[ "$refused" -ge 1 ] && [ "$said" -ge 1 ] &&
		pass "$p: past the budget the next call is refused, and the CLI prints why" ||
		fail "$p: past the budget the next call is refused, and the CLI prints why" "refused=$refused said=$said $(echo "$ev" | jq -r '.events[-5:][] | .kind' | tr '\n' ' ')"
	calls="$(wc -l <"$TEST_TMP/$p.jsonl")"
	[ "$calls" = 1 ] && pass "$p: nothing past the budget reached the upstream" ||
		fail "$p: nothing past the budget reached the upstream" "$calls calls"
	api POST "/api/v1/sessions/$S/cancel" '{}'
done
after="$(grep -c 'GET ' "$TEST_TMP/registry.log" 2>/dev/null || echo 0)"
[ "$before" = "$after" ] && pass "a restarted server reuses the layers (no registry request)" ||
	fail "a restarted server reuses the layers (no registry request)" "$before -> $after"
