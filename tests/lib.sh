# tests/lib.sh - helpers for Warren's shell tests (sourced by each test file).
#
# A test file is a bash script under tests/integration or tests/security. It
# calls `pass NAME`, `fail NAME WHY`, or the checks below; each result is one
# line "PASS name" / "FAIL name: why" appended to $WARREN_RESULTS, which
# tests/run.sh counts. A test must be able to fail: every check compares what
# happened with what must happen.

set -u
: "${BUILD:=build}"
ROOT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WARREN="${WARREN:-$ROOT_DIR/$BUILD/warren}"
PROBE="${PROBE:-$ROOT_DIR/$BUILD/tests/probe}"
: "${WARREN_RESULTS:=/dev/stdout}"
# under WARREN_SANDBOX_BACKEND=gvisor (tests/run.sh's second pass of the
# escape probes) every `warren sandbox` of the file runs under gVisor
TEST_FILE="$(basename "$0" .sh)${WARREN_SANDBOX_BACKEND:+[$WARREN_SANDBOX_BACKEND]}"

pass() { echo "PASS $TEST_FILE: $1" >>"$WARREN_RESULTS"; }
fail() { echo "FAIL $TEST_FILE: $1: ${2:-}" >>"$WARREN_RESULTS"; }

# expect_status NAME WANT CMD... : run CMD, compare its exit status.
expect_status() {
	local name="$1" want="$2"
	shift 2
	local out
	out="$("$@" 2>&1)"
	local got=$?
	if [ "$got" = "$want" ]; then
		pass "$name"
	else
		fail "$name" "exit $got, want $want; output: $(echo "$out" | tail -3 | tr '\n' ' ')"
	fi
}

# expect_output NAME REGEX CMD... : run CMD (status ignored), grep its output.
expect_output() {
	local name="$1" re="$2"
	shift 2
	local out
	out="$("$@" 2>&1)"
	if echo "$out" | grep -Eq -- "$re"; then
		pass "$name"
	else
		fail "$name" "output did not match /$re/: $(echo "$out" | tail -3 | tr '\n' ' ')"
	fi
}

# expect_no_output NAME REGEX CMD... : CMD's output must not match REGEX.
expect_no_output() {
	local name="$1" re="$2"
	shift 2
	local out
	out="$("$@" 2>&1)"
	if echo "$out" | grep -Eq -- "$re"; then
		fail "$name" "output matched /$re/: $(echo "$out" | grep -E -- "$re" | head -2 | tr '\n' ' ')"
	else
		pass "$name"
	fi
}

# run a command inside a fresh sandbox: sb [warren options] -- CMD...
sb() { "$WARREN" sandbox run "$@"; }

# A scratch directory removed when the test file exits.
TEST_TMP="$(mktemp -d /tmp/warren-test.XXXXXX)"
trap 'rm -rf "$TEST_TMP"' EXIT

# What Warren leaves on the host: cgroups, sandbox records, processes.
warren_cgroups() {
	find /sys/fs/cgroup -mindepth 2 -maxdepth 3 -path '*/warren/*' -type d 2>/dev/null
}
warren_records() {
	find /run/warren/sandboxes /dev/shm/warren/sandboxes ${WARREN_RUNTIME_DIR:+"$WARREN_RUNTIME_DIR/sandboxes"} \
		-mindepth 1 -maxdepth 1 2>/dev/null
}
warren_processes() {
	pgrep -a -f 'warren-init' 2>/dev/null
}
