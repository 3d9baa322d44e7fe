#!/bin/bash
# bench/agent_turn.sh - the built-in agent's harness overhead per turn,
# excluding the model: a replay provider (answers at once) drives sessions
# through `warren serve`; each turn's usage event reports its wall time
# split into model_ms, tool_ms and harness_ms (the rest: transcript
# records, events, the loop). Baseline in the same script: one
# `warren sandbox exec -- /bin/true` into a running sandbox.
#   RUNS=30 bench/agent_turn.sh
set -u
BUILD="${BUILD:-build}"
RUNS="${RUNS:-30}"
cd "$(dirname "$0")/.."
W="$PWD/$BUILD/warren"
T="$(mktemp -d /tmp/warren-agentturn.XXXXXX)"
SERVER=""
cleanup() {
	[ -n "$SERVER" ] && kill -TERM "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
	"$W" sandbox rm "agentturn-$$" >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT

mkdir -p "$T/proj"
echo '{}' >"$T/proj/warren.json"
git -C "$T/proj" init -q -b main
git -C "$T/proj" -c user.email=b@warren -c user.name=bench add -A
git -C "$T/proj" -c user.email=b@warren -c user.name=bench commit -q -m init

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
run_case() { # RECORDING -> prints "median p90 of harness_ms; median tool_ms"
	local rec="$1" data="$T/data-$(basename "$1" .json)"
	echo "{\"model\": {\"provider\": \"replay\", \"replay\": \"$rec\"}, \"limits\": {\"max_sandboxes\": 4, \"default\": {\"idle\": \"1s\"}}}" >"$T/cfg.json"
	"$W" serve --data "$data" --listen "127.0.0.1:$port" --config "$T/cfg.json" >"$T/serve.log" 2>&1 &
	SERVER=$!
	for _ in $(seq 1 100); do [ -s "$data/admin.token" ] && curl -s -o /dev/null "http://127.0.0.1:$port/api/v1/healthz" && break; sleep 0.1; done
	local tok
	tok="$(cat "$data/admin.token")"
	local A="Authorization: Bearer $tok" U="http://127.0.0.1:$port/api/v1"
	curl -s -H "$A" -H 'Content-Type: application/json' -d "{\"url\": \"$T/proj\", \"name\": \"proj\"}" "$U/repositories" >/dev/null
	for _ in $(seq 1 100); do curl -s -H "$A" "$U/snapshots" | grep -q commit && break; sleep 0.1; done
	local ids=()
	for i in $(seq 1 "$RUNS"); do
		id="$(curl -s -H "$A" -H 'Content-Type: application/json' -d '{"repo": "proj", "prompt": "bench"}' "$U/sessions" | jq -r .id)"
		for _ in $(seq 1 200); do
			st="$(curl -s -H "$A" "$U/sessions/$id" | jq -r .state)"
			case "$st" in review | failed) break ;; esac
			sleep 0.05
		done
		ids+=("$id")
	done
	for id in "${ids[@]}"; do
		curl -s -H "$A" "$U/sessions/$id/events?format=json" | jq -c '.events[] | select(.kind == "usage") | .data'
	done >"$T/usage.jsonl"
	kill -TERM "$SERVER"; wait "$SERVER" 2>/dev/null; SERVER=""
	python3 - "$T/usage.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
h = sorted(r["harness_ms"] for r in rows); t = sorted(r["tool_ms"] for r in rows)
calls = rows[0]["tool_calls"] if rows else 0
p90 = h[int(len(h) * 0.9) - 1] if h else 0
print(f"{statistics.median(h):.2f} {p90:.2f} {statistics.median(t):.2f} {len(rows)} {calls}")
PY
}

echo "== built-in agent: harness overhead per turn, excluding the model (target <= 5 ms)"
read -r h50 h90 tool n calls < <(run_case "$PWD/tests/fixtures/replay/finish-only.json")
echo "finish only:        harness median $h50 ms, p90 $h90 ms   ($n turns)"
read -r r50 r90 rtool rn rcalls < <(run_case "$PWD/tests/fixtures/replay/read-five.json")
echo "5 x read_file:      harness median $r50 ms, p90 $r90 ms; tools $rtool ms for $rcalls calls ($rn turns)"
# the baseline: one exec into a running sandbox, from the shell
"$W" sandbox create --name "agentturn-$$" >/dev/null
python3 - "$W" "agentturn-$$" <<'PY'
import statistics, subprocess, sys, time
w, name = sys.argv[1], sys.argv[2]
ts = []
for _ in range(100):
    t0 = time.perf_counter(); subprocess.run([w, "sandbox", "exec", name, "--", "/bin/true"], check=True); ts.append((time.perf_counter() - t0) * 1000)
print(f"baseline: one 'warren sandbox exec -- /bin/true' median {statistics.median(ts):.2f} ms")
PY
