#!/bin/bash
# warren eval export SUITE --harbor OUT: the sample suite (eval/sample) in
# Harbor's task layout. Each exported task is then run the way Harbor
# runs one, in a Warren sandbox instead of a container: the environment's
# repo.tar unpacked at /workspace, tests/ at /tests, and
# /logs/verifier/reward.txt read back: with solution/solve.sh every task
# earns 1, without it a task earns 0. task.toml is TOML (Python's
# tomllib reads it, a quote in a URL included); the hidden tests are not in
# the environment; an existing task directory is refused and nothing is
# changed; a repository the command cannot place leaves no half task.
. "$(dirname "$0")/../lib.sh"

"$ROOT_DIR/eval/repos.sh" "$TEST_TMP/repos" >/dev/null
SUITE="$ROOT_DIR/eval/sample"
OUT="$TEST_TMP/harbor"
export_suite() {
	"$WARREN" eval export "$SUITE" --harbor "$1" --repo "c-hello=$TEST_TMP/repos/c-hello" \
		--repo "cmake-hello=$TEST_TMP/repos/cmake-hello" --apt "make gcc cmake" "${@:2}"
}
out="$(export_suite "$OUT" 2>&1)"
rc=$?
ntasks="$(find "$SUITE" -name task.json | wc -l)"
nout="$(ls "$OUT" 2>/dev/null | wc -l)"
[ $rc = 0 ] && [ "$nout" = "$ntasks" ] && echo "$out" | grep -q "exported $ntasks tasks" &&
	pass "every task exported ($ntasks)" || fail "every task exported ($ntasks)" "rc=$rc $nout: $out"

missing=""
for t in "$OUT"/*; do
	for f in instruction.md task.toml environment/Dockerfile environment/repo.tar tests/test.sh solution/solve.sh solution/solution.patch; do
		[ -s "$t/$f" ] || missing="$missing $(basename "$t")/$f"
	done
done
[ -z "$missing" ] && pass "each task has Harbor's files" || fail "each task has Harbor's files" "missing:$missing"

cmp -s "$OUT/c-help/instruction.md" <(jq -j .prompt "$SUITE/c-help/task.json") &&
	pass "instruction.md is the prompt, as written" || fail "instruction.md is the prompt, as written" "$(head -c 300 "$OUT/c-help/instruction.md")"
cmp -s "$OUT/c-help/tests/hidden/check.sh" "$SUITE/c-help/tests/check.sh" &&
	! tar -tf "$OUT/c-help/environment/repo.tar" | grep -q "check.sh" &&
	pass "the hidden tests are in tests/, not in the environment" ||
	fail "the hidden tests are in tests/, not in the environment" "$(tar -tf "$OUT/c-help/environment/repo.tar" | head)"
python3 - "$OUT/c-help/task.toml" "$(jq -r .base "$SUITE/c-help/task.json")" <<'PY' && pass "task.toml is TOML: version, metadata, timeouts" || fail "task.toml is TOML: version, metadata, timeouts" "$(cat "$OUT/c-help/task.toml")"
import sys, tomllib
t = tomllib.load(open(sys.argv[1], "rb"))
assert t["version"] == "1.0"
m = t["metadata"]
assert m["warren_suite"] == "sample" and m["warren_task"] == "c-help" and m["base"] == sys.argv[2], m
assert t["agent"]["timeout_sec"] == 600.0 and t["verifier"]["timeout_sec"] > 0, t
PY
grep -q "apt-get install -y --no-install-recommends git ca-certificates make gcc cmake" "$OUT/c-help/environment/Dockerfile" &&
	grep -q "^WORKDIR /workspace$" "$OUT/c-help/environment/Dockerfile" &&
	pass "the Dockerfile installs --apt's packages, works in /workspace" || fail "the Dockerfile installs --apt's packages, works in /workspace" "$(cat "$OUT/c-help/environment/Dockerfile")"

# the repository's own set-up, from its spec at base (cmake-hello's
# updateContentCommand configures build/), run by the Dockerfile
grep -qF "sh -c 'cmake -S . -B build && cmake --build build'" "$OUT/cmake-shout/environment/setup.sh" &&
	grep -q "^RUN sh /tmp/setup.sh" "$OUT/cmake-shout/environment/Dockerfile" &&
	pass "the spec's set-up commands become environment/setup.sh, run at build" ||
	fail "the spec's set-up commands become environment/setup.sh, run at build" "$(cat "$OUT/cmake-shout/environment/setup.sh" "$OUT/cmake-shout/environment/Dockerfile" 2>&1)"

# Harbor's trial, in a sandbox: the environment (its set-up), then (for the oracle)
# solution/solve.sh, then tests/test.sh; the reward it wrote
trial() { # TASK_DIR SOLVE(yes|no)
	local solve=""
	[ "$2" = yes ] && solve="sh /task/solution/solve.sh >/dev/null 2>&1 &&"
	"$WARREN" sandbox run --data "$TEST_TMP/sbx" --bind "$1:/task:ro" -- sh -c "
		mkdir -p /workspace /logs && tar -xf /task/environment/repo.tar -C /workspace && cd /workspace &&
		git init -q && git add -A && git -c user.name=w -c user.email=w@l commit -qm base &&
		{ [ ! -f /task/environment/setup.sh ] || sh /task/environment/setup.sh >/dev/null 2>&1; } &&
		cp -r /task/tests /tests && $solve sh /tests/test.sh >/dev/null 2>&1; cat /logs/verifier/reward.txt" 2>&1
}
bad=""
for t in "$OUT"/*; do
	r="$(trial "$t" yes)"
	[ "$r" = 1 ] || bad="$bad $(basename "$t")=$r"
done
[ -z "$bad" ] && pass "with solve.sh, every exported task earns reward 1" || fail "with solve.sh, every exported task earns reward 1" "$bad"
bad=""
for t in "$OUT"/c-help "$OUT"/c-version "$OUT"/cmake-shout; do
	r="$(trial "$t" no)"
	[ "$r" = 0 ] || bad="$bad $(basename "$t")=$r"
done
[ -z "$bad" ] && pass "without a solution, a task earns reward 0" || fail "without a solution, a task earns reward 0" "$bad"

# again into the same directory: refused, nothing changed
before="$(find "$OUT" -type f -exec sha256sum {} + | sort | sha256sum)"
out="$(export_suite "$OUT" 2>&1)"
rc=$?
after="$(find "$OUT" -type f -exec sha256sum {} + | sort | sha256sum)"
[ $rc = 2 ] && echo "$out" | grep -q "exists already" && [ "$before" = "$after" ] &&
	pass "an existing task directory is refused (exit 2), nothing changed" ||
	fail "an existing task directory is refused (exit 2), nothing changed" "rc=$rc $out"

# a remote repository: cloned at build time; the URL quoted for the shell
# and escaped in TOML (nothing is fetched here)
url='https://git.example.invalid/o"w/c-hello.git'
"$WARREN" eval export "$SUITE" --harbor "$TEST_TMP/remote" --repo "c-hello=$url" \
	--repo "cmake-hello=$TEST_TMP/repos/cmake-hello" >/dev/null 2>&1
rc=$?
python3 - "$TEST_TMP/remote/c-help/task.toml" "$url" <<'PY' && [ $rc = 0 ] &&
import sys, tomllib
assert tomllib.load(open(sys.argv[1], "rb"))["metadata"]["repository"] == sys.argv[2]
PY
	grep -qF "RUN git clone 'https://git.example.invalid/o\"w/c-hello.git' /workspace" "$TEST_TMP/remote/c-help/environment/Dockerfile" &&
	[ ! -e "$TEST_TMP/remote/c-help/environment/repo.tar" ] &&
	pass "a remote repository: cloned at build, its URL quoted and TOML-escaped" ||
	fail "a remote repository: cloned at build, its URL quoted and TOML-escaped" "rc=$rc $(cat "$TEST_TMP/remote/c-help/environment/Dockerfile" 2>&1)"

# a registered name and no server to ask: said, with the way out; no half
# task left
out="$("$WARREN" eval export "$SUITE" --harbor "$TEST_TMP/noserver" --server http://127.0.0.1:9 --token x 2>&1)"
rc=$?
[ $rc != 0 ] && echo "$out" | grep -q -- "--repo c-hello=URL" && [ -z "$(ls "$TEST_TMP/noserver" 2>/dev/null)" ] &&
	pass "a name no server can place: said with --repo, no half task" ||
	fail "a name no server can place: said with --repo, no half task" "rc=$rc $out $(ls "$TEST_TMP/noserver")"
expect_status "export without --harbor is a usage error" 2 "$WARREN" eval export "$SUITE"
expect_status "--harbor with eval run is a usage error" 2 "$WARREN" eval run "$SUITE" --harbor "$TEST_TMP/x"
expect_status "--apt refuses what is no package name" 2 "$WARREN" eval export "$SUITE" --harbor "$TEST_TMP/y" --apt 'make; rm -rf /'
expect_no_output "no sandbox is left" "^run-" "$WARREN" sandbox ls --data "$TEST_TMP/sbx"
