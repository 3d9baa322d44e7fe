#!/bin/bash
# bench/verify.sh - what Warren's verification on the committed change
# costs (docs/benchmarks.md, "Evidence"): a session's result is committed
# on the host (review/evidence.c) and verified in a fresh sandbox from the
# session's snapshot with exactly that commit checked out, instead of in
# the agent's live workspace.
#
# RUNS sessions, one after the other, on a repository whose spec verifies
# with `true` and has no session hooks or services (so the verify command
# itself is one exec, the same in both places); the agent appends a line
# to a tracked file. From each session's record, as the server measured
# it:
#   setup_ms + teardown_ms of outcome.verify: the fresh sandbox's create,
#     the checkout of the result commit from its bundle, and its removal:
#     what verifying the commit adds over verifying in place (target
#     <= 20 ms);
#   outcome.verify.results[0].ms: the exec of the verify command, which
#     verifying in place pays as well (the baseline of the same run);
#   outcome.result.ms: the result on the host (the work tree's export,
#     index-pack --strict, judging, Warren's commit, diff, bundle).
# Medians and p90. Everything lives in one temp directory, removed at exit.
set -eu
BUILD="${BUILD:-build}"
RUNS="${RUNS:-30}"
cd "$(dirname "$0")/.."
ROOT="$PWD"
case "$BUILD" in /*) BDIR="$BUILD" ;; *) BDIR="$ROOT/$BUILD" ;; esac
W="$BDIR/warren"
[ -x "$W" ] || { echo "bench: $W not found (run make)" >&2; exit 1; }
for t in curl jq python3; do
	command -v "$t" >/dev/null || { echo "bench: $t is needed" >&2; exit 1; }
done
work="$(mktemp -d /tmp/warren-verifybench.XXXXXX)"
SERVER_PID=""
cleanup() {
	[ -n "$SERVER_PID" ] && kill -TERM "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
g() { git -c user.email=b@warren -c user.name=bench "$@"; }
mkdir -p "$work/repo"
echo '{"customizations": {"warren": {"verify": ["true"]}}}' >"$work/repo/warren.json"
for i in $(seq 1 50); do echo "line $i" >>"$work/repo/notes.txt"; done
g -C "$work/repo" init -q -b main
g -C "$work/repo" add -A
g -C "$work/repo" commit -q -m initial
echo "{\"repositories\": [{\"name\": \"bench\", \"url\": \"$work/repo\"}]}" >"$work/serve.json"
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
URL="http://127.0.0.1:$PORT"
"$W" serve --data "$work/data" --listen "127.0.0.1:$PORT" --config "$work/serve.json" >"$work/serve.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do
	[ -s "$work/data/admin.token" ] && curl -s -o /dev/null "$URL/api/v1/healthz" && break
	sleep 0.1
done
TOKEN="$(cat "$work/data/admin.token")"
api() { curl -s -H "Authorization: Bearer $TOKEN" ${2:+-H 'Content-Type: application/json' --data-binary "$2"} "$URL$1"; }
: >"$work/rows"
for i in $(seq 1 "$RUNS"); do
	id="$(api /api/v1/sessions '{"repo": "bench", "prompt": "append", "agent": ["sh", "-c", "echo more >>notes.txt"]}' | jq -r .id)"
	for _ in $(seq 1 600); do
		st="$(api "/api/v1/sessions/$id" | jq -r .state)"
		case "$st" in review | failed) break ;; esac
		sleep 0.05
	done
	api "/api/v1/sessions/$id" | jq -c '.outcome | {s: .verify.setup_ms, t: .verify.teardown_ms, c: .verify.results[0].ms, r: .result.ms, ok: (.verify.passed and .verify.commit == .result.commit)}' >>"$work/rows"
done
python3 - "$work/rows" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows = [r for r in rows if r.get("s") is not None]
def q(v, p):
    v = sorted(v); return v[min(len(v) - 1, int(p * len(v)))]
added = [r["s"] + r["t"] for r in rows]
cmd = [r["c"] for r in rows]
res = [r["r"] for r in rows]
print(f"sessions: {len(rows)}, verified on the result commit: {sum(1 for r in rows if r['ok'])}")
print(f"fresh sandbox (create + checkout + remove): p50 {statistics.median(added):6.1f} ms  p90 {q(added, .9):6.1f} ms   (target <= 20 ms added)")
print(f"  of which create + checkout:                p50 {statistics.median(r['s'] for r in rows):6.1f} ms")
print(f"  of which remove:                           p50 {statistics.median(r['t'] for r in rows):6.1f} ms")
print(f"verify command exec (paid in place too):     p50 {statistics.median(cmd):6.1f} ms")
print(f"result on the host (export, checks, commit, diff, bundle): p50 {statistics.median(res):6.1f} ms  p90 {q(res, .9):6.1f} ms")
PY
