#!/bin/bash
# bench/egress.sh - what the egress proxy adds (docs/benchmarks.md, "Egress").
#
# A warren serve whose configuration lets the loopback origin through
# (allow_addresses, a static name bench.test), a repository whose spec
# allows bench.test:PORT, and one session resting in review with its
# sandbox: its proxy socket is live. Then, with bench/egress.py:
#
#  1. added latency per request: a new connection each, alternating one
#     direct loopback request to the origin and one through warren-relay
#     (run on the host here, on the session's socket) and the proxy, the
#     same script and the same origin; 13-byte and 1 MiB bodies; medians
#     (targets: <= 1 ms added, <= 1.2x for 1 MiB);
#  2. the same path from inside the session's sandbox (its own relay on
#     127.0.0.1:3128, the client run with `warren sandbox exec`);
#  3. connection setup rate: CONNECT tunnels per second (CONNECT, the 200,
#     close), against plain TCP connections to the origin.
#
#   N=2000 RATE_SECONDS=5 PROCS=4 bench/egress.sh
set -eu
BUILD="${BUILD:-build}"
N="${N:-2000}"
SECONDS_RATE="${RATE_SECONDS:-5}"
PROCS="${PROCS:-4}"
cd "$(dirname "$0")/.."
ROOT="$PWD"
W="$ROOT/$BUILD/warren"
RELAY="$ROOT/$BUILD/warren-relay"
PY="$ROOT/bench/egress.py"

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

work="$(mktemp -d /tmp/warren-bench-egress.XXXXXX)"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	[ -n "${SERVER:-}" ] && kill -TERM "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

OP="$(free_port)"
python3 "$PY" serve "$OP" &
pids+=($!)

D="$work/data"
cat >"$work/serve.json" <<EOF
{"egress": {"allow_addresses": ["127.0.0.1/32"], "hosts": {"bench.test": "127.0.0.1"},
            "connect_ports": [$OP]}}
EOF
AP="$(free_port)"
URL="http://127.0.0.1:$AP"
"$W" serve --data "$D" --listen "127.0.0.1:$AP" --config "$work/serve.json" >"$work/serve.log" 2>&1 &
SERVER=$!
for _ in $(seq 1 100); do
	[ -s "$D/admin.token" ] && curl -s -o /dev/null "$URL/api/v1/healthz" && break
	sleep 0.1
done
TOKEN="$(cat "$D/admin.token")"
api() {
	curl -s -X "$1" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
		${3:+--data-binary "$3"} "$URL$2"
}

R="$work/proj"
mkdir -p "$R"
echo "{\"customizations\": {\"warren\": {\"egress\": [\"bench.test:$OP\"]}}}" >"$R/warren.json"
cp "$PY" "$R/egress.py"
git -C "$R" init -q -b main
git -C "$R" -c user.email=b@warren -c user.name=bench add -A
git -C "$R" -c user.email=b@warren -c user.name=bench commit -q -m bench
api POST /api/v1/repositories "{\"url\": \"$R\", \"name\": \"bench\"}" >/dev/null
S="$(api POST /api/v1/sessions '{"repo": "bench", "prompt": "bench", "agent": ["true"]}' | jq -r .id)"
for _ in $(seq 1 600); do
	[ "$(api GET "/api/v1/sessions/$S" | jq -r .state)" = review ] && break
	sleep 0.2
done
SOCK="$D/sessions/$S.egress/proxy.sock"
[ -S "$SOCK" ] || { echo "bench: no proxy socket for $S" >&2; tail -5 "$work/serve.log" >&2; exit 1; }

RP="$(free_port)"
"$RELAY" --foreground --listen "127.0.0.1:$RP" "$SOCK" &
pids+=($!)
sleep 0.2

echo "kernel: $(uname -r)   cpus: $(nproc)   python: $(python3 -c 'import sys; print(sys.version.split()[0])')"
echo
echo "== 1. added latency per request (new connection each, alternating; N=$N)"
python3 "$PY" latency "$RP" "$OP" "$N"
echo
echo "== 2. through the sandbox's own relay (client inside the sandbox)"
"$W" sandbox exec "ws-$S" -- python3 /workspace/egress.py through 3128 "$OP" "$N"
echo
echo "== 3. connection setup: CONNECT tunnels per second (${SECONDS_RATE}s, $PROCS processes)"
python3 "$PY" rate "$RP" "$OP" "$SECONDS_RATE" "$PROCS"
echo
echo "egress events recorded: $(api GET "/api/v1/sessions/$S/events?format=json" | jq '[.events[] | select(.kind == "egress")] | length')"
