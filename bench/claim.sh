#!/bin/bash
# bench/claim.sh - the store's claim latency (session_claim, the worker's
# queue take) through PostgreSQL against SQLite's, in one run on this
# machine: bench/claim (bench/claim.c) inserts N queued sessions and
# claims them one call at a time (p50/p90/p99 of the calls), on a SQLite
# file in a temp directory and on a private PostgreSQL (tests/pg_server.sh:
# initdb in a temp directory, a unix socket only, fsync off as the tests
# run it); then the same with two claimers at once (two handles: SKIP
# LOCKED on PostgreSQL, BEGIN IMMEDIATE on SQLite). ROUNDS rounds,
# alternating backends; the ratio is PostgreSQL's p50 over SQLite's.
# docs/benchmarks.md, "Claim latency", has results.
#
#   N (default 2000) sessions per round, ROUNDS (default 3)
set -euo pipefail
BUILD="${BUILD:-build}"
N="${N:-2000}"
ROUNDS="${ROUNDS:-3}"
cd "$(dirname "$0")/.."
B="$PWD/$BUILD/bench/claim"
. tests/pg_server.sh
work="$(mktemp -d /tmp/warren-bench-claim.XXXXXX)"
cleanup() {
	set +e # every step runs
	pg_server_stop
	rm -rf "$work"
}
trap cleanup EXIT
if ! pg_server_start; then
	echo "bench/claim: SKIP: $PG_SERVER_WHY" >&2
	exit 0
fi
echo "postgresql: $("$PG_SERVER_BIN/postgres" --version)   sqlite: $(sqlite3 --version 2>/dev/null | cut -d' ' -f1 || echo '?')   cpus: $(nproc)"
# one database per run on the private server
pgdb() {
	local name="bench_$1"
	pg_server_as "$PG_SERVER_BIN/psql" -q -h "$PG_SERVER_DIR" -p 5432 -U warren -d postgres \
		-c "CREATE DATABASE $name" >/dev/null
	echo "postgresql://warren@/$name?host=$PG_SERVER_DIR&port=5432"
}
run=0
for threads in 1 2; do
	for r in $(seq 1 "$ROUNDS"); do
		run=$((run + 1))
		"$B" "$work/claim-$run.db" -n "$N" -t "$threads"
		"$B" "$(pgdb "$run")" -n "$N" -t "$threads"
	done
done | tee "$work/out"
python3 - "$work/out" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    kv = dict(x.split("=") for x in f[2:])
    rows.setdefault((int(kv["threads"]), f[1]), []).append(kv)
for threads in sorted({t for t, _ in rows}):
    s, p = rows.get((threads, "sqlite")), rows.get((threads, "postgresql"))
    if not s or not p:
        continue
    med = lambda rs, k: statistics.median(float(r[k]) for r in rs)
    print(f"== {threads} claimer{'s' if threads > 1 else ''}: medians of {len(s)} rounds (ms per claim call)")
    for name, rs in (("sqlite", s), ("postgresql", p)):
        print(f"  {name:10s} p50 {med(rs, 'p50'):7.3f}  p90 {med(rs, 'p90'):7.3f}  p99 {med(rs, 'p99'):7.3f}  insert {med(rs, 'insert_mean'):7.3f}")
    print(f"  ratio postgresql/sqlite: p50 {med(p, 'p50') / med(s, 'p50'):.2f}  p90 {med(p, 'p90') / med(s, 'p90'):.2f}")
PY
