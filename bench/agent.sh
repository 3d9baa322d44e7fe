#!/bin/bash
# bench/agent.sh - the built-in agent's per-tool-call overhead: the median
# of RUNS (default 200) `read_file` round trips through the tools' exec
# path (tools_call -> `warren sandbox exec` -> head in the sandbox -> the
# numbered reply), target <= 2 ms, against two baselines measured in the
# same process, alternating: the raw exec (`warren sandbox exec NAME --
# cat FILE`) and a plain `cat FILE` on the host. The driver is
# bench/agent_tools.c, built here into $BUILD/bench/agent-tools.
#
# Everything (a sandbox with a small C file in its /workspace, a temp
# directory) is removed at exit.
set -eu
BUILD="${BUILD:-build}"
RUNS="${RUNS:-200}"
CC="${CC:-cc}"
cd "$(dirname "$0")/.."
W="$PWD/$BUILD/warren"
D="$PWD/$BUILD/bench/agent-tools"

[ -x "$W" ] || { echo "bench: $W not found (run make)" >&2; exit 1; }
mkdir -p "$(dirname "$D")"
"$CC" -std=c17 -D_GNU_SOURCE -Isrc -O2 -Wall -Wextra -o "$D" bench/agent_tools.c \
	src/agent/tools.c src/agent/tools_fs.c src/agent/tools_run.c \
	src/agent/exec_sandbox.c src/sched/proc.c src/util/proc.c src/util/spawn.c \
	src/sandbox/request.c src/sandbox/backend_name.c src/util/alloc.c \
	src/util/error.c src/util/fs.c -ljansson -lpthread

work="$(mktemp -d /tmp/warren-agentbench.XXXXXX)"
name="agentbench-$$"
cleanup() {
	"$W" sandbox rm "$name" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A 200-line source file, in the workspace and on the host.
for i in $(seq 1 200); do
	printf 'static int f%d(int x) { return x * %d + 1; } /* line %d */\n' "$i" "$i" "$i"
done >"$work/main.c"
"$W" sandbox create --name "$name" --upper "$work/ws" >/dev/null
"$W" sandbox exec "$name" -- sh -c 'mkdir -p /workspace/src && cat > /workspace/src/main.c' <"$work/main.c"

echo "== agent tools: read_file round trip ($(wc -c <"$work/main.c") bytes, 200 lines; kernel $(uname -r), $(nproc) cpus)"
"$D" -n "$RUNS" "$W" "$name" src/main.c "$work/main.c"
