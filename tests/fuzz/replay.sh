#!/bin/bash
# tests/fuzz/replay.sh - replay the fuzz seed corpora without clang/libFuzzer.
#
# For each target tests/fuzz/fuzz_X.c: build $BUILD/fuzz/replay_fuzz_X with
# gcc + ASan/UBSan (tests/fuzz/replay.c supplies main()), run it over
# tests/fuzz/corpus/X/ (and tests/fuzz/crashes/X/ if present: inputs that
# once crashed stay as regression tests), and append one line to
# $WARREN_RESULTS (default stdout):
#     PASS fuzz-replay fuzz_X
#     FAIL fuzz-replay fuzz_X: <why>
# Meant to be called from tests/run.sh; exits non-zero if any target failed.
set -u
cd "$(dirname "$0")/../.."
BUILD="${BUILD:-build}"
CC="${REPLAY_CC:-gcc}"
OUT="$BUILD/fuzz"
mkdir -p "$OUT"
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
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# one result line, appended to $WARREN_RESULTS or printed
result() {
	if [ -n "${WARREN_RESULTS:-}" ]; then echo "$1" >>"$WARREN_RESULTS"; else echo "$1"; fi
}

status=0
for src in tests/fuzz/fuzz_*.c; do
	target="$(basename "$src" .c)"
	kind="${target#fuzz_}"
	bin="$OUT/replay_$target"
	log="$OUT/replay_$target.log"
	if ! "$CC" -std=c17 -D_GNU_SOURCE -Isrc -I/usr/include/postgresql -g -O1 -fno-omit-frame-pointer \
		-fsanitize=address,undefined -fno-sanitize-recover=undefined \
		-o "$bin" tests/fuzz/replay.c "$src" $(target_sources "$kind") >"$log" 2>&1; then
		result "FAIL fuzz-replay $target: build failed, see $log"
		status=1
		continue
	fi
	dirs=()
	for d in "tests/fuzz/corpus/$kind" "tests/fuzz/crashes/$kind"; do
		[ -d "$d" ] && dirs+=("$d")
	done
	if [ ${#dirs[@]} = 0 ]; then
		result "FAIL fuzz-replay $target: no corpus in tests/fuzz/corpus/$kind"
		status=1
		continue
	fi
	"$bin" "${dirs[@]}" >>"$log" 2>&1
	rc=$?
	if [ $rc = 0 ]; then
		result "PASS fuzz-replay $target"
	else
		why="$(grep -m1 -E 'ERROR: |runtime error|fuzz_[a-z]+: ' "$log" | cut -c1-160)"
		result "FAIL fuzz-replay $target: ${why:-exit status $rc}, see $log"
		status=1
	fi
done
exit $status
