#!/bin/bash
# tests/run.sh - run every test and print one summary line "N passed, N failed".
#
#   unit tests       build/tests/test_*   (cmocka; each test case counts),
#                    the store's again on PostgreSQL (a server of their own)
#   shell tests      tests/integration/*.sh, tests/security/*.sh
#   leftover check   last: nothing of ours may remain on the host
#
# tests/run.sh --unit (make unit): the unit tests alone, as any user; the
# few cases that need root skip themselves without it.
set -u
BUILD="${BUILD:-build}"
UNIT_ONLY=0
[ "${1:-}" = --unit ] && UNIT_ONLY=1
cd "$(dirname "$0")/.."
export BUILD
RESULTS="$(mktemp /tmp/warren-results.XXXXXX)"
export WARREN_RESULTS="$RESULTS"
LOG_DIR="$BUILD/test-logs"
mkdir -p "$LOG_DIR"

if [ "$(id -u)" != 0 ] && [ $UNIT_ONLY = 0 ]; then
	echo "tests need root (namespaces, mounts, cgroups)" >&2
fi

# run_unit BIN NAME [LOG]: one cmocka binary, one result line per test
# case, its output in $LOG_DIR/LOG.log (LOG: NAME).
run_unit() {
	local t="$1" name="$2"
	local out="$LOG_DIR/${3:-$2}.log"
	CMOCKA_MESSAGE_OUTPUT=stdout "$t" >"$out" 2>&1
	# one result line per cmocka test case
	grep -E '^\[       OK \]' "$out" | sed -E "s/^\[       OK \] (.*)/PASS unit $name: \1/" >>"$RESULTS"
	# cmocka names a failed case twice (inline and in the summary)
	grep -E '^\[  FAILED  \] [a-z_0-9]+$' "$out" | sort -u | sed -E "s#^\[  FAILED  \] (.*)#FAIL unit $name: \1: see $out#" >>"$RESULTS"
	# a group's setup or teardown that failed: its cases never ran
	if grep -qE '^\[  ERROR   \]' "$out"; then
		echo "FAIL unit $name: a group setup or teardown failed, see $out" >>"$RESULTS"
	fi
	if ! grep -qE '^\[  PASSED  \]|^\[  FAILED  \]' "$out"; then
		echo "FAIL unit $name: crashed, see $out" >>"$RESULTS"
	fi
}

for t in "$BUILD"/tests/test_*; do
	[ -x "$t" ] || continue
	run_unit "$t" "$(basename "$t")"
done

# The store's tests again on its second backend, PostgreSQL: a server of
# their own (tests/pg_server.sh: initdb in a temporary directory, a unix
# socket there only), stopped and removed on every way out. Each test
# binary here takes its store from WARREN_TEST_STORE (tests/unit/
# teststore.h). Without PostgreSQL's binaries this pass is skipped, saying
# so; with them, a server that does not start is a failure.
STORE_TESTS="test_db test_lease test_slack test_api test_audit_store"
. tests/pg_server.sh
trap pg_server_stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
if ! pg_server_bin >/dev/null; then
	echo "SKIP unit tests on PostgreSQL: no PostgreSQL server binaries (install postgresql-15)" >&2
elif pg_server_start; then
	for name in $STORE_TESTS; do
		[ -x "$BUILD/tests/$name" ] || continue
		WARREN_TEST_STORE="$PG_SERVER_URL" run_unit "$BUILD/tests/$name" \
			"$name[postgres]" "$name.postgres"
	done
	pg_server_stop
else
	echo "FAIL unit postgres: $PG_SERVER_WHY" >>"$RESULTS"
fi

summary() {
	grep -E '^FAIL' "$RESULTS" >&2 || true
	passed=$(grep -c '^PASS' "$RESULTS")
	failed=$(grep -c '^FAIL' "$RESULTS")
	cp "$RESULTS" "$LOG_DIR/results.txt"
	rm -f "$RESULTS"
	echo "$passed passed, $failed failed"
	[ "$failed" = 0 ]
}
if [ $UNIT_ONLY = 1 ]; then
	summary
	exit
fi

# the fuzz targets replayed over their seed corpora (gcc + ASan/UBSan)
echo "== fuzz seeds" >&2
BUILD="$BUILD" tests/fuzz/replay.sh >"$LOG_DIR/fuzz-replay.log" 2>&1 ||
	grep -q '^FAIL fuzz' "$RESULTS" || echo "FAIL fuzz-replay: see $LOG_DIR/fuzz-replay.log" >>"$RESULTS"

for f in tests/integration/*.sh tests/security/*.sh; do
	[ -f "$f" ] || continue
	case "$f" in */zz_* | *lib.sh) continue ;; esac
	echo "== $f" >&2
	timeout 600 bash "$f" >"$LOG_DIR/$(basename "$f").log" 2>&1 ||
		{ rc=$?; [ $rc = 124 ] && echo "FAIL $(basename "$f" .sh): timed out" >>"$RESULTS"; }
done
# The escape probes and the posture probe again, every sandbox under gVisor
# (the gvisor backend; runsc from scripts/install-runsc.sh)
for f in tests/security/escape_*.sh tests/security/limits.sh tests/security/userns.sh; do
	[ -f "$f" ] || continue
	echo "== $f [gvisor]" >&2
	WARREN_SANDBOX_BACKEND=gvisor timeout 600 bash "$f" >"$LOG_DIR/$(basename "$f" .sh).gvisor.log" 2>&1 ||
		{ rc=$?; [ $rc = 124 ] && echo "FAIL $(basename "$f" .sh)[gvisor]: timed out" >>"$RESULTS"; }
done
for f in tests/integration/zz_*.sh; do
	[ -f "$f" ] && bash "$f" >"$LOG_DIR/$(basename "$f").log" 2>&1
done

summary
