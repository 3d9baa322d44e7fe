#!/bin/bash
# bench/control.sh - the control plane under load: `warren serve` on
# loopback, measured against baselines taken in the same run (the machine
# is shared and noisy). docs/benchmarks.md, "Control plane", has results.
#
#  1. session start: POST -> the agent's first output line as the server
#     records it (outcome.start_ms.total, created -> first line, with the
#     restore/sync/services/agent parts), agent `sh -c 'echo first'`, on a
#     repository whose warren.json is `{}` ("small") and on one whose
#     snapshot holds 200 MiB more ("big": onCreateCommand writes them into
#     the deps layer). SEQ sessions of each one after the other, then
#     ROUNDS rounds of CONC submitted at once. Baseline: bubblewrap
#     starting `/bin/echo first` (the sandbox of bench/run.sh), spawn ->
#     first line, alternating with the sessions. Targets: p50 <= 15 ms;
#     big/small ~ 1.
#  2. GET /api/v1/sessions/{id} with wrk (-t2 -c32 -d5s), against GET
#     /api/v1/healthz the same way; two rounds, alternating. Target
#     >= 20,000 req/s (wrk shares the 2 cores with the server).
#  3. LIVE sessions at once (agent `sleep 30`): the server's memory per
#     session (VmRSS and Pss of warren-serve with them running, minus
#     before, / LIVE), time until all are `running`; then all cancelled
#     and no ws-* sandbox of theirs may remain. Target <= 1 MiB.
#  4. churn: CHURN sessions (agent `true`) through a cap of 8 sandboxes
#     (a second server), idle 1s: sessions per second from the first POST
#     until all are in review and no ws-* sandbox of theirs remains.
#
# Each server has its own data directory and port; everything lives in one
# temp directory, removed at exit with every sandbox this run's sessions
# had (other users' sandboxes on the host are left alone).
set -eu
BUILD="${BUILD:-build}"
SEQ="${SEQ:-50}"
ROUNDS="${ROUNDS:-5}"
CONC="${CONC:-10}"
LIVE="${LIVE:-100}"
CHURN="${CHURN:-100}"
cd "$(dirname "$0")/.."
ROOT="$PWD"
case "$BUILD" in /*) BDIR="$BUILD" ;; *) BDIR="$ROOT/$BUILD" ;; esac
W="$BDIR/warren"
PY=/usr/bin/python3
H="$ROOT/bench/control.py"
export W

[ -x "$W" ] || { echo "bench: $W not found (run make)" >&2; exit 1; }
[ -x "$PY" ] || { echo "bench: $PY is needed" >&2; exit 1; }
for t in curl jq wrk; do
	command -v "$t" >/dev/null || { echo "bench: $t is needed" >&2; exit 1; }
done
if ! command -v bwrap >/dev/null; then
	if [ "$(id -u)" = 0 ]; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap >/dev/null
	else
		echo "bench: bubblewrap is not installed (apt-get install bubblewrap)" >&2
		exit 1
	fi
fi

work="$(mktemp -d /tmp/warren-ctlbench.XXXXXX)"
IDS="$work/ids" # every session this run created, one id a line
RES="$work/results"
: >"$IDS"
: >"$RES"
SERVER_PID=""
PY_PID=""
# py ARGS: the helper, in the background so that a signal reaches the trap
# at once (bash runs traps only between foreground commands)
py() {
	TOKEN="$TOKEN" W="$W" "$PY" "$H" "$@" &
	PY_PID=$!
	wait "$PY_PID"
	PY_PID=""
}
server_stop() {
	[ -n "$SERVER_PID" ] || return 0
	kill -TERM "$SERVER_PID" 2>/dev/null || true
	wait "$SERVER_PID" 2>/dev/null || true
	SERVER_PID=""
}
cleanup() {
	if [ -n "$PY_PID" ]; then
		kill -TERM "$PY_PID" 2>/dev/null || true
		wait "$PY_PID" 2>/dev/null || true
	fi
	server_stop
	# the server's clean stop removes its sandboxes; this is for a server
	# that died
	while read -r id; do
		[ -n "$id" ] && "$W" sandbox rm "ws-$id" >/dev/null 2>&1 || true
	done <"$IDS"
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

put() { echo "$1 $2" >>"$RES"; }

free_port() {
	"$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# server_start NAME CONFIG-JSON: sets SERVER_PID, URL, API, TOKEN, DATA
server_start() {
	DATA="$work/$1"
	mkdir -p "$DATA"
	printf '%s\n' "$2" >"$work/$1.json"
	PORT="$(free_port)"
	URL="http://127.0.0.1:$PORT"
	API="$URL/api/v1"
	"$W" serve --data "$DATA" --listen "127.0.0.1:$PORT" --config "$work/$1.json" \
		>"$work/$1.log" 2>&1 &
	SERVER_PID=$!
	for _ in $(seq 1 100); do
		[ -s "$DATA/admin.token" ] && curl -s -o /dev/null "$API/healthz" && break
		kill -0 "$SERVER_PID" 2>/dev/null || { cat "$work/$1.log" >&2; exit 1; }
		sleep 0.1
	done
	TOKEN="$(cat "$DATA/admin.token")"
	[ "$(readlink "/proc/$SERVER_PID/exe")" = "$(readlink -f "$BDIR/warren-serve")" ] ||
		{ echo "bench: pid $SERVER_PID is not warren-serve" >&2; exit 1; }
}

apicall() { # METHOD PATH [BODY]
	curl -sf -X "$1" -H "Authorization: Bearer $TOKEN" \
		${3:+-H 'Content-Type: application/json' --data-binary "$3"} "$API$2"
}

# make_repo DIR WARREN-JSON
make_repo() {
	mkdir -p "$1"
	printf '%s\n' "$2" >"$1/warren.json"
	git -C "$1" init -q -b main
	git -C "$1" -c user.email=bench@warren -c user.name=bench add -A
	git -C "$1" -c user.email=bench@warren -c user.name=bench commit -q -m initial
}

# add_repo NAME DIR: registers it and waits for its first snapshot; prints
# its id
add_repo() {
	apicall POST /repositories "{\"url\": \"$2\", \"name\": \"$1\"}" >/dev/null
	local snap=""
	for _ in $(seq 1 600); do
		snap="$(apicall GET "/snapshots?repo=$1" | jq -r '.snapshots[0].id // empty')"
		[ -n "$snap" ] && break
		sleep 0.2
	done
	[ -n "$snap" ] || { echo "bench: no snapshot of $1 after 120 s" >&2; cat "$DATA"/logs/*.log >&2; exit 1; }
	echo "$snap"
}

echo "bwrap: $(bwrap --version)   kernel: $(uname -r)   cpus: $(nproc)   commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
put load.start "$(cut -d' ' -f1 /proc/loadavg)"

# ---- repositories ----------------------------------------------------------
make_repo "$work/small" '{}'
# (big.bin is ignored by git, as a project's dependencies are)
mkdir -p "$work/big" && echo big.bin >"$work/big/.gitignore"
make_repo "$work/big" '{"onCreateCommand": "head -c 200M /dev/urandom > big.bin"}'

# ---- server A: no cap in the way -------------------------------------------
CAP=$((LIVE + 2 * CONC + 40))
server_start a "{\"limits\": {\"max_sandboxes\": $CAP, \"max_per_user\": $CAP, \"min_free_memory\": \"64M\", \"default\": {\"idle\": \"1s\"}}}"
A_PID="$SERVER_PID"
echo "server A: pid $A_PID, $URL, max_sandboxes $CAP, idle 1s"
SNAP_SMALL="$(add_repo small "$work/small")"
SNAP_BIG="$(add_repo big "$work/big")"
layer_bytes() { "$W" snapshot show "$1" --data "$DATA" --json | jq '[.layers[].bytes] | add'; }
put snap.small.bytes "$(layer_bytes "$SNAP_SMALL")"
put snap.big.bytes "$(layer_bytes "$SNAP_BIG")"
echo "snapshots: small $(layer_bytes "$SNAP_SMALL") B, big $(layer_bytes "$SNAP_BIG") B (layer bytes)"

BWRAP='["/usr/bin/bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
 "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/lib", "/lib", "--symlink", "usr/bin", "/bin",
 "--symlink", "usr/sbin", "/sbin", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
 "/bin/echo", "first"]'

echo
echo "== 1. session start: $SEQ sequential and $ROUNDS x $CONC concurrent, small and big, against bwrap"
t0=$(date +%s)
py starts "$URL" small big "$BWRAP" "$RES" "$IDS" "$SEQ" "$ROUNDS" "$CONC"
echo "   ($(($(date +%s) - t0)) s)"

echo
echo "== 2. GET throughput: wrk -t2 -c32 -d5s, session against healthz, two rounds"
SID="$(head -1 "$IDS")"
wrk_rate() { # URL: "REQ/S P50" (p50 from --latency) into $work/wrk.res
	wrk -t2 -c32 -d5s --latency -H "Authorization: Bearer $TOKEN" "$1" >"$work/wrk.out"
	if grep -q 'Non-2xx' "$work/wrk.out"; then
		echo "bench: wrk $1: non-2xx answers" >&2
		cat "$work/wrk.out" >&2
		return 1
	fi
	echo "$(awk '/^Requests\/sec/ {print $2}' "$work/wrk.out") $(awk '$1=="50%" {print $2}' "$work/wrk.out")" >"$work/wrk.res"
}
hs=() ss=() hl="" sl=""
for round in 1 2; do
	wrk_rate "$API/healthz"
	read -r rate lat <"$work/wrk.res"
	hs+=("$rate") hl="$lat"
	echo "   round $round: healthz $rate req/s (p50 $lat)"
	wrk_rate "$API/sessions/$SID"
	read -r rate lat <"$work/wrk.res"
	ss+=("$rate") sl="$lat"
	echo "   round $round: session $rate req/s (p50 $lat)"
done
mean() { printf '%s\n' "$@" | awk '{s+=$1} END {printf "%.1f", s/NR}'; }
put wrk.healthz "$(mean "${hs[@]}")"
put wrk.session "$(mean "${ss[@]}")"
put wrk.healthz.lat "$hl"
put wrk.session.lat "$sl"

echo
echo "== 3. $LIVE live sessions (sleep 30), then cancelled"
py live "$URL" small "$LIVE" "$A_PID" "$RES" "$IDS"
server_stop

# ---- server B: a cap of 8 --------------------------------------------------
server_start b '{"limits": {"max_sandboxes": 8, "max_per_user": 8, "min_free_memory": "64M", "default": {"idle": "1s"}}}'
echo
echo "== 4. churn: $CHURN sessions (true) through max_sandboxes 8 (server B: pid $SERVER_PID, $URL)"
add_repo small "$work/small" >/dev/null
py churn "$URL" small "$CHURN" "$RES" "$IDS"
server_stop

put load.end "$(cut -d' ' -f1 /proc/loadavg)"
py report "$RES"
