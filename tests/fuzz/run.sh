#!/bin/bash
# tests/fuzz/run.sh - run the libFuzzer targets for a while (`make fuzz`).
#
#   FUZZ_SECONDS=60   how long each target runs
#   FUZZ_TARGETS="parse proto"   which targets (tests/fuzz/fuzz_X.c)
#   FUZZ_JOBS=1       parallel fuzzing processes per target (-fork=N if > 1)
#
# Each target is built with clang -fsanitize=fuzzer,address,undefined into
# $BUILD/fuzz/ and run on a copy of tests/fuzz/corpus/X (the copy grows; the
# committed seeds stay as they are). A crashing input is saved under
# $BUILD/fuzz/crashes/X/; copy it to tests/fuzz/crashes/X/ so that
# tests/fuzz/replay.sh keeps replaying it. Exits 1 if any target crashed.
set -u
cd "$(dirname "$0")/../.."
BUILD="${BUILD:-build}"
SECONDS_EACH="${FUZZ_SECONDS:-60}"
TARGETS="${FUZZ_TARGETS:-parse proto spec api egress broker slack gitpath gateway blobs}"
JOBS="${FUZZ_JOBS:-1}"
OUT="$BUILD/fuzz"

if ! command -v clang >/dev/null; then
	if [ "$(id -u)" = 0 ]; then
		echo "installing clang"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q clang >/dev/null ||
			{ apt-get update -q >/dev/null &&
			  DEBIAN_FRONTEND=noninteractive apt-get install -y -q clang >/dev/null; } ||
			{ echo "fuzz: cannot install clang" >&2; exit 1; }
	else
		echo "fuzz: clang is missing (run as root to install it)" >&2
		exit 1
	fi
fi

# what each target links besides its own file (the api target needs the
# whole control plane: store, session manager, API and their libraries)
target_sources() {
	case "$1" in
	api) echo src/util/*.c src/sandbox/*.c src/snapshot/*.c src/store/*.c \
		  src/session/*.c src/sched/*.c src/perimeter/*.c src/api/*.c src/agent/*.c src/review/*.c \
		  src/security/*.c src/notify/*.c src/meter/*.c src/gateway/*.c src/agents/*.c src/blobs/*.c \
		  -lmicrohttpd -lsqlite3 -lpq -lcurl -ljansson -lsodium -lseccomp -lpthread -lpsl ;;
	egress) echo src/util/*.c src/security/egress_policy.c -ljansson -lsodium -lpsl ;;
	gateway) echo src/util/*.c src/gateway/config.c src/gateway/usage.c src/meter/meter.c \
		      src/security/secrets.c -ljansson -lsodium ;;
	broker) echo src/util/*.c src/security/broker_policy.c -ljansson -lsodium ;;
	blobs) echo src/util/*.c src/blobs/auth.c src/blobs/manifest.c src/blobs/config.c \
		    -ljansson -lsodium ;;
	gitpath) echo src/util/*.c src/snapshot/git.c -ljansson -lsodium ;;
	eval) echo src/util/*.c src/cli/client/eval_suite.c src/cli/client/eval_report.c \
		   src/cli/client/format.c -ljansson -lsodium -lm ;;
	slack) echo src/util/*.c src/notify/slack_request.c src/notify/slack_message.c \
		    -ljansson -lsodium ;;
	*) echo src/util/*.c src/sandbox/proto.c src/sandbox/backend_name.c src/snapshot/spec.c \
		src/snapshot/jsonc.c -ljansson -lsodium ;;
	esac
}

mkdir -p "$OUT"
status=0
for kind in $TARGETS; do
	target="fuzz_$kind"
	bin="$OUT/$target"
	echo "== $target: build"
	if ! clang -std=c17 -D_GNU_SOURCE -Isrc -I/usr/include/postgresql -g -O1 -fno-omit-frame-pointer \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		-o "$bin" "tests/fuzz/$target.c" $(target_sources "$kind"); then
		echo "FAIL $target: build failed"
		status=1
		continue
	fi
	work="$OUT/corpus/$kind"
	crashes="$OUT/crashes/$kind"
	mkdir -p "$work" "$crashes"
	cp -n "tests/fuzz/corpus/$kind"/* "$work"/ 2>/dev/null
	[ -d "tests/fuzz/crashes/$kind" ] && cp -n "tests/fuzz/crashes/$kind"/* "$work"/ 2>/dev/null
	opts=(-max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048
	      -print_final_stats=1 -artifact_prefix="$crashes/")
	[ -f "tests/fuzz/$kind.dict" ] && opts+=(-dict="tests/fuzz/$kind.dict")
	# requests go up to 64 KiB (the caps need ~24 KiB)
	[ "$kind" = proto ] && opts+=(-max_len=70000)
	[ "$JOBS" -gt 1 ] && opts+=(-fork="$JOBS" -ignore_crashes=0)
	log="$OUT/$target.log"
	echo "== $target: fuzzing for ${SECONDS_EACH}s (log: $log)"
	before=$(ls "$crashes" | wc -l)
	"$bin" "${opts[@]}" "$work" >"$log" 2>&1
	rc=$?
	execs=$(grep -E 'stat::number_of_executed_units' "$log" | awk '{s += $2} END {print s + 0}')
	cov=$(grep -E '^#[0-9]+' "$log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+' || true)
	after=$(ls "$crashes" | wc -l)
	if [ $rc = 0 ] && [ "$after" = "$before" ]; then
		echo "PASS $target: $execs executions in ${SECONDS_EACH}s, ${cov:-no coverage line}, corpus $(ls "$work" | wc -l) inputs"
	else
		echo "FAIL $target: crashed (exit $rc) after $execs executions; inputs in $crashes/:"
		ls "$crashes" | sed 's/^/    /'
		grep -m3 -E 'ERROR: |runtime error|fuzz_[a-z]+: ' "$log" | sed 's/^/    /'
		status=1
	fi
done
exit $status
