#!/bin/bash
# bench/gateway.sh - what the model gateway adds to a model call
# (docs/benchmarks.md, "Model gateway"; target <= 1 ms median).
#
# The stand-in model API (tests/tools/model_server.py, --require-key with a
# key of the real shape) plays one small answer that repeats, so it never
# runs out; a warren serve whose "gateway" serves Chat Completions and
# Responses from it; a repository and one session whose command agent holds
# its turn open while the host measures (a turn's token is valid only while
# the turn runs):
#
#  1. added latency per call, from the host: the agent writes its token to
#     /tmp in its sandbox (read with `warren sandbox exec`) and waits;
#     bench/gateway.py then alternates, per iteration, one call straight to
#     the stand-in on loopback (with the real key) and one through
#     warren-relay run on the host on the session's gateway socket (with
#     the turn's token): the same client, the same loopback, the same kind
#     of relay and fd hand-over as the sandbox's own, so the difference is
#     the relay and the gateway and nothing else. The direct leg cannot be
#     measured from inside the sandbox: it has no network but its own
#     loopback, and the stand-in's port is on the host's. Chat Completions
#     and Responses; a new connection per call and one kept alive; not
#     streamed (time to the answer's last byte) and streamed (time to the
#     first byte of the body); medians, p90, added = gateway - direct,
#     PASS/MISS against 1 ms. The gateway keeps its connection to the
#     stand-in between calls (libcurl's shared cache), also when the
#     agent's connection is new; the direct leg's new connection pays the
#     stand-in's set-up (a Python thread per connection). So a new-
#     connection "added" is the relay's and the gateway's connection set-up
#     against the stand-in's; the keep-alive rows are the gateway's own
#     work per call, the cleaner figure;
#  2. then the agent itself runs the gateway path from inside its sandbox
#     (its own relay on 127.0.0.1:17077), Chat Completions, the same four
#     modes; its lines come back as the session's output events.
#
#   N=500 bench/gateway.sh
set -eu
BUILD="${BUILD:-build}"
N="${N:-500}"
cd "$(dirname "$0")/.."
ROOT="$PWD"
W="$ROOT/$BUILD/warren"
RELAY="$ROOT/$BUILD/warren-relay"
PY="$ROOT/bench/gateway.py"
MODEL_SERVER="$ROOT/tests/tools/model_server.py"

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

work="$(mktemp -d /tmp/warren-bench-gateway.XXXXXX)"
pids=()
S=""
cleanup() {
	set +e # every step, whatever the one before did
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	# SIGTERM removes every session sandbox (docs/operations.md); the rm is
	# for a server that died first
	[ -n "${SERVER:-}" ] && kill -TERM "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
	[ -n "$S" ] && "$W" sandbox rm "ws-$S" >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

die() {
	echo "bench: $*" >&2
	[ -f "$work/serve.log" ] && tail -5 "$work/serve.log" >&2
	exit 1
}

# --- the stand-in ---------------------------------------------------------------
KEY="sk-proj-$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')"
cat >"$work/rec.json" <<'EOF'
{"responses": [
  {"text": "All tests pass.", "usage": {"prompt_tokens": 812, "completion_tokens": 41, "cached_tokens": 512},
   "repeat": true}
]}
EOF
python3 "$MODEL_SERVER" --port 0 --recording "$work/rec.json" --require-key "$KEY" \
	>"$work/ms.port" 2>"$work/ms.err" &
pids+=($!)
for _ in $(seq 1 50); do [ -s "$work/ms.port" ] && break; sleep 0.1; done
MP="$(head -1 "$work/ms.port")"
[ -n "$MP" ] || die "the stand-in did not start: $(cat "$work/ms.err")"

# --- the server -----------------------------------------------------------------
D="$work/data"
cat >"$work/serve.json" <<EOF
{"gateway": {"upstreams": {
   "chat_completions": {"base_url": "http://127.0.0.1:$MP/v1", "api_key_env": "WR_BENCH_GW_KEY"},
   "responses": {"base_url": "http://127.0.0.1:$MP/v1", "api_key_env": "WR_BENCH_GW_KEY"}},
  "prices": {"*": {"prompt": 2, "completion": 10, "cached": 1}}}}
EOF
AP="$(free_port)"
URL="http://127.0.0.1:$AP"
WR_BENCH_GW_KEY="$KEY" "$W" serve --data "$D" --listen "127.0.0.1:$AP" --config "$work/serve.json" \
	>"$work/serve.log" 2>&1 &
SERVER=$!
for _ in $(seq 1 100); do
	[ -s "$D/admin.token" ] && curl -s -o /dev/null "$URL/api/v1/healthz" && break
	sleep 0.1
done
[ -s "$D/admin.token" ] || die "the server did not start"
TOKEN="$(cat "$D/admin.token")"
api() {
	curl -s -X "$1" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
		${3:+--data-binary "$3"} "$URL$2"
}

# --- the repository and the session -----------------------------------------------
R="$work/proj"
mkdir -p "$R"
echo '{}' >"$R/warren.json"
cp "$PY" "$R/gateway.py"
git -C "$R" init -q -b main
git -C "$R" -c user.email=b@warren -c user.name=bench add -A
git -C "$R" -c user.email=b@warren -c user.name=bench commit -q -m bench
api POST /api/v1/repositories "{\"url\": \"$R\", \"name\": \"bench\"}" >/dev/null

# The agent: its token where the host can read it, then wait (at most 10
# min) for the host's part to end, then the part inside the sandbox.
AGENT="printf '%s' \"\$OPENAI_API_KEY\" >/tmp/bench-token.part && mv /tmp/bench-token.part /tmp/bench-token
i=0; while [ ! -e /tmp/bench-host-done ] && [ \$i -lt 3000 ]; do sleep 0.2; i=\$((i+1)); done
rm -f /tmp/bench-token
python3 /workspace/gateway.py through \"\$OPENAI_BASE_URL\" $N"
S="$(api POST /api/v1/sessions "$(jq -n --arg a "$AGENT" '{repo: "bench", prompt: "bench", agent: ["sh", "-c", $a]}')" | jq -r .id)"
if [ -z "$S" ] || [ "$S" = null ]; then die "no session"; fi

GW_TOKEN=""
for _ in $(seq 1 600); do
	GW_TOKEN="$("$W" sandbox exec "ws-$S" -- cat /tmp/bench-token 2>/dev/null || true)"
	[ -n "$GW_TOKEN" ] && break
	sleep 0.2
done
[ -n "$GW_TOKEN" ] || die "no turn token from the agent of $S ($(api GET "/api/v1/sessions/$S" | jq -r .state))"
SOCK="$D/sessions/$S.gateway/gateway.sock"
[ -S "$SOCK" ] || die "no gateway socket for $S"

RP="$(free_port)"
"$RELAY" --foreground --listen "127.0.0.1:$RP" "$SOCK" &
pids+=($!)
for _ in $(seq 1 50); do
	python3 -c "import socket; socket.create_connection(('127.0.0.1', $RP)).close()" 2>/dev/null && break
	sleep 0.1
done

echo "kernel: $(uname -r)   cpus: $(nproc)   python: $(python3 -c 'import sys; print(sys.version.split()[0])')   load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "== 1. added latency per call, from the host (alternating direct / through the gateway; N=$N; target <= 1 ms)"
# in the background, so that a signal to this script is acted on at once
BENCH_KEY="$KEY" BENCH_TOKEN="$GW_TOKEN" python3 "$PY" latency "$RP" "$MP" "$N" >"$work/latency.out" &
pids+=($!)
wait $! || { cat "$work/latency.out"; die "the host client failed"; }
grep -v '^SUMMARY ' "$work/latency.out"
"$W" sandbox exec "ws-$S" -- touch /tmp/bench-host-done

echo
echo "== 2. through the sandbox's own relay (the agent's client inside the sandbox)"
state=""
for _ in $(seq 1 1500); do
	state="$(api GET "/api/v1/sessions/$S" | jq -r .state)"
	case "$state" in review | failed | rejected) break ;; esac
	sleep 0.2
done
api GET "/api/v1/sessions/$S/events?format=json" >"$work/events.json"
jq -r '.events[] | select(.kind == "output") | .data.line' "$work/events.json" | grep '^inside the sandbox' ||
	echo "(no figures from inside the sandbox; session $state: $(jq -r '.events[] | select(.kind == "output") | .data.line' "$work/events.json" | tail -3))"
echo
misses="$(grep -c '^SUMMARY .*|MISS$' "$work/latency.out" || true)"
# 8 modes from the host, 4 inside, N + 10 of warm-up each
calls=$((12 * (N + 10)))
echo "model_call events: $(jq -r '[.events[] | select(.kind == "model_call") | .data.decision] | group_by(.) | map("\(.[0]) \(length)") | join(", ")' "$work/events.json") (of $calls gateway calls)   modes over the target: $misses of $(grep -c '^SUMMARY ' "$work/latency.out")"
