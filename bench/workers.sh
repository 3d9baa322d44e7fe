#!/bin/bash
# bench/workers.sh - many workers on one store: sessions per second through
# 1 worker and through 3 (2 slots each, a `sleep 1` agent, sessions of three
# users: one user is held to its fair share), the start of a
# session on a worker with a cold layer cache (the snapshot pulled from the
# registry) against a warm one, and the failover time from kill -9 of a
# worker to its session running again elsewhere (lease 3 s, renewed every
# second). A private PostgreSQL (tests/pg_server.sh), Debian's
# docker-registry (tests/registry_server.sh), an API server (--role api)
# and the workers (--role worker), each with its data and runtime
# directories, on this machine. docs/benchmarks.md, "Workers", has results.
#
#   N (default 30) sessions per throughput run
set -euo pipefail
BUILD="${BUILD:-build}"
N="${N:-30}"
cd "$(dirname "$0")/.."
ROOT="$PWD"
WARREN="$ROOT/$BUILD/warren"
TEST_TMP="$(mktemp -d /tmp/warren-bench-workers.XXXXXX)"
RT="/run/warren-bench-$$"
. tests/pg_server.sh
. tests/registry_server.sh
. tests/workers_lib.sh
SERVER_PID=""
cleanup() {
	set +e # every step runs, whatever one before it returned
	local w
	for w in w1 w2 w3; do w_stop "$w" KILL; w_sandboxes_rm "$w"; done
	[ -n "$SERVER_PID" ] && { kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null; } || true
	registry_stop_all
	pg_server_stop
	rm -rf "$TEST_TMP" "$RT-w1" "$RT-w2" "$RT-w3"
}
trap cleanup EXIT
if [ -z "$REGISTRY_BIN" ] || ! command -v htpasswd >/dev/null; then
	echo "bench/workers: SKIP: docker-registry or htpasswd is not installed" >&2
	exit 0
fi
if ! workers_store; then
	echo "bench/workers: SKIP: $WORKERS_WHY" >&2
	exit 0
fi
start_registry_htpasswd reg warren bench-pw >/dev/null
printf 'bench-pw\n' >"$TEST_TMP/pw"
chmod 600 "$TEST_TMP/pw"

R="$TEST_TMP/proj"
mkdir -p "$R"
printf '{}\n' >"$R/warren.json"
git -C "$R" init -q -b main
git -C "$R" -c user.email=b@warren -c user.name=bench add -A
git -C "$R" -c user.email=b@warren -c user.name=bench commit -q -m initial

api_serve api "$(printf '{"store": "%s", "repositories": [{"name": "proj", "url": "%s"}]}' "$STORE" "$R")"
api() { curl -s -X "$1" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' ${3:+-d "$3"} "$URL$2"; }

w_start() {
	worker_serve "$1" "$(printf '{"store": "%s", "limits": {"max_sandboxes": 2}, "worker": {"id": "%s", "lease": "3s", "renew": "1s"},
 "blobs": {"registry": "%s", "repository": "warren/bench", "username": "warren", "password_file": "%s"}}' \
		"$STORE" "$1" "$REG_reg" "$TEST_TMP/pw")"
}
submit() { # AGENT (no quotes or backslashes in it) [TOKEN]: a session's id
	TOKEN="${2:-$TOKEN}" api POST /api/v1/sessions "{\"repo\": \"proj\", \"prompt\": \"bench\", \"agent\": [\"sh\", \"-c\", \"$1\"]}" |
		jq -r .id
}
state() { api GET "/api/v1/sessions/$1" | jq -r .state; }
wait_all() { # IDS...: until every one rests (review or failed); fails after 300 s
	# one list request a poll (the harness's own CPU is the workers' too)
	local t0 want
	t0=$(date +%s)
	want="$(printf '%s\n' "$@" | jq -R . | jq -sc .)"
	while :; do
		[ "$(api GET "/api/v1/sessions?limit=500" | jq --argjson w "$want" \
			'[.sessions[] | select(.id as $i | $w | index($i)) | select(.state == "review" or .state == "failed" or .state == "cancelled")] | length')" \
			-ge "$#" ] 2>/dev/null && return 0
		[ $(($(date +%s) - t0)) -lt 300 ] || { echo "bench/workers: timeout waiting for $*" >&2; return 1; }
		sleep 0.1
	done
}
reject_all() { local s; for s in "$@"; do api POST "/api/v1/sessions/$s/reject" '{"reason": "bench"}' >/dev/null; done; }
failed_of() { # IDS...: how many did not reach review (their reasons on stderr)
	local s n=0
	for s in "$@"; do
		[ "$(state "$s")" = review ] && continue
		n=$((n + 1))
		echo "bench/workers: $s: $(api GET "/api/v1/sessions/$s" | jq -r '"\(.state): \(.reason)"')" >&2
	done
	echo $n
}
cpu_ticks() { awk '/^cpu / {print $2+$3+$4+$7+$8, $5+$6}' /proc/stat; }
through() { # LABEL: N sessions of `sleep 1`, submitted at once; sessions/s
	local ids=() i t0 t1 c0 c1
	c0="$(cpu_ticks)"
	t0=$(date +%s%N)
	# from three users: one user's fair share is half of all the slots
	# plus one (admission), which would cap a single user at 4 of 6
	for i in $(seq 1 "$N"); do ids+=("$(submit 'sleep 1; echo ok >out.txt' "${USER_TOKENS[$((i % 3))]}")"); done
	wait_all "${ids[@]}"
	t1=$(date +%s%N)
	c1="$(cpu_ticks)"
	python3 -c "import sys; b0,i0,b1,i1=map(int,sys.argv[1:5]); print(f'bench/workers: {sys.argv[5]}: the machine was busy {100*(b1-b0)/max(1,(b1-b0)+(i1-i0)):.0f}% of its CPU time', file=sys.stderr)" $c0 $c1 "$1"
	local bad
	bad="$(failed_of "${ids[@]}")"
	reject_all "${ids[@]}"
	python3 -c "import sys; n=int(sys.argv[1]); ms=(int(sys.argv[3])-int(sys.argv[2]))/1e6; print(f'{n/(ms/1000):.3f}')" "$N" "$t0" "$t1"
	[ "$bad" = 0 ] || echo "bench/workers: $1: $bad sessions did not reach review" >&2
}
start_total() { # ID: restore + pull of its start, ms
	api GET "/api/v1/sessions/$1" | jq -r '(.outcome.start_ms.restore // 0) + (.outcome.start_ms.pull // 0)'
}

USER_TOKENS=()
for u in alice bob carol; do
	USER_TOKENS+=("$(api POST /api/v1/tokens "{\"user\": \"$u\", \"role\": \"submitter\"}" | jq -r .token)")
done
echo "postgresql: $("$PG_SERVER_BIN/postgres" --version | cut -d' ' -f3)   cpus: $(nproc)   sessions per run: $N from 3 users (sleep 1, 2 slots per worker)"
w_start w1
# the first session builds the snapshot (pushed to the registry)
first="$(submit 'true')"
wait_all "$first"
reject_all "$first"
one="$(through "1 worker")"
echo "1 worker:  $one sessions/s"
w_start w2
w_start w3
# cold: the first session on each new worker pulls the snapshot (enough
# sessions of a second that w1, which has it, cannot take them all within
# the moment a worker without it leaves them to one with it)
cold=()
for i in $(seq 1 12); do cold+=("$(submit 'sleep 1')"); done
wait_all "${cold[@]}"
cold_ms=() warm_ms=()
for s in "${cold[@]}"; do
	p="$(api GET "/api/v1/sessions/$s" | jq -r '.outcome.start_ms.pull // empty')"
	if [ -n "$p" ]; then cold_ms+=("$(start_total "$s")"); else warm_ms+=("$(start_total "$s")"); fi
done
reject_all "${cold[@]}"
three="$(through "3 workers")"
echo "3 workers: $three sessions/s"
python3 -c "import sys; print(f'ratio 3 workers / 1 worker: {float(sys.argv[2])/float(sys.argv[1]):.2f} (target >= 2.5)')" "$one" "$three"
med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "-"}'; }
echo "start (restore + pull), cold layer cache: $(med "${cold_ms[@]}") ms median of ${#cold_ms[@]};  warm: $(med "${warm_ms[@]}") ms median of ${#warm_ms[@]}"

# failover: kill -9 of the worker running a session
K="$(submit 'echo started; sleep 30')"
for _ in $(seq 1 200); do [ "$(state "$K")" = running ] && break; sleep 0.05; done
victim="$(api GET "/api/v1/sessions/$K/events?format=json" | jq -r '[.events[] | select(.kind == "state" and .data.state == "provisioning") | .data.worker] | last')"
t_kill=$(($(date +%s%N) / 1000000))
w_stop "$victim" KILL
back=0
for _ in $(seq 1 400); do
	back="$(api GET "/api/v1/sessions/$K/events?format=json" | jq -r --arg v "$victim" '[.events[] | select(.kind == "state" and .data.state == "running" and .time_ms > '"$t_kill"')] | first | .time_ms // 0')"
	[ "$back" != 0 ] && break
	sleep 0.05
done
echo "failover: kill -9 of $victim to the session running again elsewhere: $((back - t_kill)) ms (lease 3000 ms, renew 1000 ms)"
api POST "/api/v1/sessions/$K/cancel" '{}' >/dev/null
sleep 1
