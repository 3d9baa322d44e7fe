#!/bin/bash
# bench/run.sh - `make bench`: Warren's sandbox cost against bubblewrap's,
# measured in one run on this machine (docs/benchmarks.md has results).
#
#  1. one-off sandbox: `warren sandbox run -- /bin/true` over a one-layer
#     snapshot, with cgroup limits, seccomp and net none, against
#     `bwrap --unshare-all --ro-bind /usr /usr ... /bin/true`; alternating
#     runs, medians, ratio (target <= 1.0).
#  2. long-lived sandbox: create -> exec -> rm, against the same bwrap run.
#  3. idle cost: resident memory of an idle sandbox's init.
#  4. the gvisor backend: the same one-off run and create -> exec -> rm
#     under gVisor (runsc), against native and bubblewrap in the same run
#     (GV_RUNS runs each, default 40: a gVisor start is ~100x native's).
set -eu
BUILD="${BUILD:-build}"
RUNS="${RUNS:-300}"
cd "$(dirname "$0")/.."
W="$PWD/$BUILD/warren"
B="$PWD/$BUILD/bench/sandbox"

if ! command -v bwrap >/dev/null; then
	if [ "$(id -u)" = 0 ]; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap >/dev/null
	else
		echo "bench: bubblewrap is not installed (apt-get install bubblewrap)" >&2
		exit 1
	fi
fi
echo "bwrap: $(bwrap --version)   kernel: $(uname -r)   cpus: $(nproc)"

work="$(mktemp -d /tmp/warren-bench.XXXXXX)"
cleanup() {
	"$W" sandbox rm "bench-$$" >/dev/null 2>&1 || true
	"$W" sandbox rm "bench-gv-$$" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

# A one-layer snapshot, built the way snapshot builds will: a sandbox's
# writable layer, kept.
"$W" sandbox run --upper "$work/snap" -- sh -c 'mkdir -p /workspace/src && echo "int main(void){return 0;}" > /workspace/src/main.c' >/dev/null

BWRAP=(bwrap --unshare-all --die-with-parent --ro-bind /usr /usr
	--symlink usr/lib64 /lib64 --symlink usr/lib /lib --symlink usr/bin /bin
	--symlink usr/sbin /sbin --proc /proc --dev /dev --tmpfs /tmp /bin/true)

echo
echo "== 1. one-off sandbox: run /bin/true ($RUNS runs each, alternating)"
"$B" -n "$RUNS" -- "$W" sandbox run --layer "$work/snap" --memory 1G --cpus 1 --pids 512 --net none -- /bin/true :: "${BWRAP[@]}"

echo
echo "== 1b. the same after an idle moment (50 ms pause before each run)"
echo "   (cgroup v1 attach can wait for an RCU grace period; see docs/operations.md)"
"$B" -n $((RUNS / 5)) -s 50 -- "$W" sandbox run --layer "$work/snap" --memory 1G --cpus 1 --pids 512 --net none -- /bin/true :: "${BWRAP[@]}"

echo
echo "== 2. long-lived sandbox: create, exec /bin/true, rm"
cat >"$work/cer.sh" <<EOS
#!/bin/sh
set -e
# a failed exec must not leave the sandbox behind
trap '"$W" sandbox rm bench-\$\$ >/dev/null 2>&1 || true' EXIT
"$W" sandbox create --name bench-\$\$ --layer "$work/snap" --memory 1G --pids 512 >/dev/null
"$W" sandbox exec bench-\$\$ -- /bin/true
"$W" sandbox rm bench-\$\$
EOS
chmod +x "$work/cer.sh"
"$B" -n $((RUNS / 3)) -- "$work/cer.sh" :: "${BWRAP[@]}"
echo "(exec alone into a running sandbox:)"
"$W" sandbox create --name "bench-$$" --layer "$work/snap" >/dev/null
"$B" -n "$RUNS" -- "$W" sandbox exec "bench-$$" -- /bin/true :: "${BWRAP[@]}"

echo
echo "== 3. idle sandbox memory"
pid="$("$W" sandbox ls | awk -v n="bench-$$" '$1==n {print $3}')"
echo "init RSS: $(awk '/VmRSS/ {print $2, $3}' /proc/$pid/status)   (target <= 1 MiB)"
echo "init PSS: $(awk '/^Pss:/ {s+=$2} END {print s, "kB"}' /proc/$pid/smaps_rollup 2>/dev/null)"

if command -v runsc >/dev/null 2>&1; then
	GV_RUNS="${GV_RUNS:-40}"
	echo
	echo "== 4. gvisor backend ($(runsc --version | head -1)): run /bin/true, $GV_RUNS runs each"
	echo "(gvisor against native)"
	"$B" -n "$GV_RUNS" -- "$W" sandbox run --backend gvisor --layer "$work/snap" --memory 1G --cpus 1 --pids 512 -- /bin/true :: \
		"$W" sandbox run --layer "$work/snap" --memory 1G --cpus 1 --pids 512 -- /bin/true
	echo "(gvisor against bwrap)"
	"$B" -n "$GV_RUNS" -- "$W" sandbox run --backend gvisor --layer "$work/snap" --memory 1G --cpus 1 --pids 512 -- /bin/true :: "${BWRAP[@]}"
	echo "(gvisor: create, exec /bin/true, rm, against native's)"
	sed 's/sandbox create /sandbox create --backend gvisor /' "$work/cer.sh" >"$work/cer-gv.sh"
	chmod +x "$work/cer-gv.sh"
	"$B" -n "$GV_RUNS" -- "$work/cer-gv.sh" :: "$work/cer.sh"
	echo "(gvisor: exec alone into a running sandbox, against native's)"
	"$W" sandbox create --backend gvisor --name "bench-gv-$$" --layer "$work/snap" >/dev/null
	"$B" -n "$RUNS" -- "$W" sandbox exec "bench-gv-$$" -- /bin/true :: "$W" sandbox exec "bench-$$" -- /bin/true
	gvpids="$(pgrep -f "runsc-(sandbox|gofer) .*sandboxes/bench-gv-$$/bundle" | tr '\n' ' ')"
	echo "idle gvisor sandbox: Sentry + gofer RSS $(for p in $gvpids; do awk '/VmRSS/ {print $2}' /proc/$p/status; done | awk '{s+=$1} END {print s, "kB"}')"
	"$W" sandbox rm "bench-gv-$$" >/dev/null
fi

echo
echo "== start-up breakdown (--json of 20 runs, medians in ms)"
for i in $(seq 20); do "$W" sandbox run --json --layer "$work/snap" --memory 1G --cpus 1 --pids 512 -- /bin/true | tail -1; done |
	python3 -c '
import json,sys,statistics
rows=[json.loads(l)["timings_ms"] for l in sys.stdin if l.startswith("{")]
for k in rows[0]:
    print(f"  {k:12s} {statistics.median(r[k] for r in rows):7.3f}")
' 2>/dev/null || echo "  (python3 not available for the breakdown)"
echo; echo "== 4. snapshots (bench/snapshot.sh)"; BUILD="$BUILD" bench/snapshot.sh
echo; echo "== 5. control plane (bench/control.sh)"; BUILD="$BUILD" bench/control.sh
echo; echo "== 6. agent tools (bench/agent.sh)"; BUILD="$BUILD" bench/agent.sh
echo; echo "== 7. agent harness per turn (bench/agent_turn.sh)"; BUILD="$BUILD" bench/agent_turn.sh
echo; echo "== 8. egress proxy (bench/egress.sh)"; BUILD="$BUILD" bench/egress.sh
echo; echo "== 9. verification on the committed change (bench/verify.sh)"; BUILD="$BUILD" bench/verify.sh
echo; echo "== 10. model gateway (bench/gateway.sh)"; BUILD="$BUILD" bench/gateway.sh
echo; echo "== 11. claim latency, PostgreSQL against SQLite (bench/claim.sh)"; BUILD="$BUILD" bench/claim.sh
echo; echo "== 12. workers on one store (bench/workers.sh)"; BUILD="$BUILD" bench/workers.sh
