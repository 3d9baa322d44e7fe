#!/bin/bash
# What a snapshot build itself produced in /workspace, recorded in the
# manifest (extra.build_output) so that sessions can leave it out of the
# agent's change: the files configure and make created (c-hello); a CMake
# build directory as one entry (cmake-hello); a tracked lockfile `npm
# install` rewrote, with the blob the build left, and the warning that
# names it (npm-install-app); paths with spaces, non-ASCII bytes and
# control characters, unquoted exactly; ignored files left out; the cap.
. "$(dirname "$0")/../lib.sh"

export WARREN_HOME="$TEST_TMP/data"
FIX="$ROOT_DIR/tests/fixtures"
snap() { "$WARREN" snapshot "$@"; }
REG_PID=""
cleanup_registry() { [ -n "$REG_PID" ] && kill "$REG_PID" 2>/dev/null; wait "$REG_PID" 2>/dev/null; }
trap 'cleanup_registry; rm -rf "$TEST_TMP"' EXIT

git_repo() { # SRC DST : a git repository with the fixture as first commit
	cp -a "$1" "$2"
	git -C "$2" init -q -b main
	git -C "$2" -c user.email=t@warren -c user.name=test add -A
	git -C "$2" -c user.email=t@warren -c user.name=test commit -q -m "initial"
}
# build SRC NAME : builds the repository, the manifest into $TEST_TMP/NAME.json,
# progress into $TEST_TMP/NAME.err; prints the snapshot id
build() {
	snap build --json "${@:3}" "$1" >"$TEST_TMP/$2.json" 2>"$TEST_TMP/$2.err"
	jq -r .id "$TEST_TMP/$2.json" 2>/dev/null
}
# check NAME MANIFEST JQ-EXPR [jq args...] : the expression must be true
check() {
	local name="$1" file="$2" expr="$3"
	shift 3
	if jq -e "$@" "$expr" "$file" >/dev/null 2>&1; then
		pass "$name"
	else
		fail "$name" "$(jq -c '.extra.build_output // .' "$file" 2>/dev/null | head -c 600)"
	fi
}
gitsb() { sb --snapshot "$1" -- git -c safe.directory='*' -C /workspace "${@:2}"; }

# (a) c-hello: ./configure (install) and make (build) outputs
R="$TEST_TMP/c-hello"
git_repo "$FIX/c-hello" "$R"
id="$(build "$R" c-hello)"
M="$TEST_TMP/c-hello.json"
[ ${#id} = 64 ] && pass "c-hello builds" || fail "c-hello builds" "$(tail -5 "$TEST_TMP/c-hello.err")"
check "c-hello: the manifest has build_output, its three fields" "$M" \
	'.extra.build_output | (keys == ["modified", "truncated", "untracked"]) and (.untracked | type == "array") and (.modified | type == "array") and .truncated == false'
check "c-hello: untracked lists configure's and make's outputs" "$M" \
	'.extra.build_output.untracked as $u | ["config.h", "config.mk", "hello", "src/greet.o", "src/main.o"] | all(. as $p | $u | index([$p]))'
check "c-hello: untracked lists nothing the repository tracks" "$M" \
	'.extra.build_output.untracked | all(. != "Makefile" and . != "configure" and . != "src/main.c" and . != "src/")'
check "c-hello: no tracked file modified, no warning" "$M" \
	'.extra.build_output.modified == [] and (.extra | has("warnings") | not)'
grep -q "@@warren-built" "$TEST_TMP/c-hello.err" && fail "the records are not progress lines" "$(grep -m2 @@warren-built "$TEST_TMP/c-hello.err")" || pass "the records are not progress lines"
LOG="$(ls -t "$WARREN_HOME"/logs/build-*.log | head -1)"
grep -q '^@@warren-built ?? config.h$' "$LOG" && pass "the records are in the build log" || fail "the records are in the build log" "$(grep -c @@warren "$LOG") marker lines"
check "the outputs phase is timed" "$M" 'any(.timings[]; .phase == "outputs")'
if [ ${#id} = 64 ]; then
	expect_output "the repository's own index is untouched (outputs unstaged)" '^\?\? config\.h$' gitsb "$id" status --porcelain
	expect_no_output "...nothing is staged" '.' gitsb "$id" diff --cached --name-only
fi
found="$(find "$WARREN_HOME/layers" -name 'warren-built*' 2>/dev/null | head -3)"
[ -z "$found" ] && pass "the temporary index is in no layer" || fail "the temporary index is in no layer" "$found"

# (b) cmake-hello: the build directory is one entry
if command -v cmake >/dev/null; then
	C="$TEST_TMP/cmake-hello"
	git_repo "$FIX/cmake-hello" "$C"
	idc="$(build "$C" cmake)"
	M="$TEST_TMP/cmake.json"
	[ ${#idc} = 64 ] && pass "cmake-hello builds (cmake -S . -B build)" || fail "cmake-hello builds (cmake -S . -B build)" "$(tail -5 "$TEST_TMP/cmake.err")"
	check "cmake-hello: untracked has build/ as one entry" "$M" '.extra.build_output.untracked | index(["build/"]) != null'
	check "cmake-hello: no path under build/ is listed" "$M" '.extra.build_output.untracked | map(select(startswith("build/") and . != "build/")) == []'
	check "cmake-hello: build/ is all there is" "$M" '.extra.build_output == {"untracked": ["build/"], "modified": [], "truncated": false}'
	if [ ${#idc} = 64 ]; then
		expect_output "cmake-hello: the built binary runs from the snapshot" '^hello, warren!$' sb --snapshot "$idc" -- ./build/hello warren
		expect_status "cmake-hello: its verify command (ctest) passes" 0 sb --snapshot "$idc" -- sh -c 'cd build && ctest --output-on-failure'
	fi
else
	fail "cmake is installed" "apt-get install cmake"
fi

# (c) npm-install-app: npm install rewrites the tracked lockfile
if command -v npm >/dev/null && command -v node >/dev/null; then
	APP="$TEST_TMP/npm-install-app"
	cp -a "$FIX/npm-install-app" "$APP"
	REG_LOG="$TEST_TMP/registry.log"
	python3 "$ROOT_DIR/tests/tools/npm_registry.py" --packages "$FIX/npm-registry" \
		--port 0 --public-host registry.warren.test --log "$REG_LOG" \
		>"$TEST_TMP/registry.port" 2>"$TEST_TMP/registry.err" &
	REG_PID=$!
	for _ in $(seq 1 50); do [ -s "$TEST_TMP/registry.port" ] && break; sleep 0.1; done
	PORT="$(head -1 "$TEST_TMP/registry.port")"
	[ -n "$PORT" ] || fail "the registry stand-in starts" "$(cat "$TEST_TMP/registry.err")"
	sed -i "s/\"registry.warren.test\"/\"registry.warren.test:$PORT\"/" "$APP/warren.json"
	echo "registry=http://registry.warren.test:$PORT/" >"$APP/.npmrc"
	git -C "$APP" init -q -b main
	git -C "$APP" -c user.email=t@warren -c user.name=test add -A
	git -C "$APP" -c user.email=t@warren -c user.name=test commit -q -m "initial"
	committed="$(git -C "$APP" rev-parse HEAD:package-lock.json)"
	RULES="$TEST_TMP/egress.json"
	echo '{"allow_addresses": ["127.0.0.1/32"], "hosts": {"registry.warren.test": "127.0.0.1"}, "self": "127.0.0.1:9"}' >"$RULES"
	idn="$(build "$APP" npm --egress-config "$RULES")"
	M="$TEST_TMP/npm.json"
	[ ${#idn} = 64 ] && pass "npm-install-app builds (npm install)" || fail "npm-install-app builds (npm install)" "$(tail -8 "$TEST_TMP/npm.err")"
	left=""
	[ ${#idn} = 64 ] && left="$(gitsb "$idn" hash-object package-lock.json 2>&1)"
	[ ${#left} = 40 ] && [ "$left" != "$committed" ] && pass "npm install rewrote the lockfile" || fail "npm install rewrote the lockfile" "committed $committed, left '$left'"
	check "npm: modified is package-lock.json with the blob the build left" "$M" \
		'.extra.build_output.modified == [{"path": "package-lock.json", "blob": $blob}]' --arg blob "$left"
	check "npm: node_modules/ is untracked, one entry" "$M" \
		'.extra.build_output.untracked | index(["node_modules/"]) != null and (map(select(startswith("node_modules/") and . != "node_modules/")) == [])'
	[ ${#idn} = 64 ] && expect_output "npm: the build's blob is in the snapshot's object store" '^blob$' gitsb "$idn" cat-file -t "$left"
	want="warning: the build's hooks modified tracked files: package-lock.json; sessions leave these changes out of their result (for npm, \`npm ci\` installs without rewriting the lockfile)"
	grep -qxF "$want" "$TEST_TMP/npm.err" && pass "npm: the progress output has the warning" || fail "npm: the progress output has the warning" "$(grep -i warning "$TEST_TMP/npm.err")"
	LOG="$(ls -t "$WARREN_HOME"/logs/build-*.log | head -1)"
	grep -qxF "$want" "$LOG" && pass "npm: the build log has the warning" || fail "npm: the build log has the warning" "$(grep -i warning "$LOG")"
	check "npm: the manifest's warnings have it" "$M" '.extra.warnings == [$w]' --arg w "$want"
	[ ${#idn} = 64 ] && expect_output "npm: the project's tests pass from the snapshot" "^ok   banner$" sb --snapshot "$idn" -- npm test --silent
else
	fail "node and npm are installed" "$(command -v node) $(command -v npm)"
fi

# (d) unusual paths: spaces, non-ASCII, control characters, quotes,
# backslashes; a modified and a deleted tracked file; ignored files
W="$TEST_TMP/weird"
mkdir -p "$W/tracked dir" "$W/out"
echo keep >"$W/tracked dir/keep"
echo old >"$W/tracked é.txt"
echo gone >"$W/gone.txt"
echo '*.log' >"$W/.gitignore"
cat >"$W/make-outputs.sh" <<'EOF'
set -e
echo 1 >"with space.txt"
echo 2 >"naïve-ü.txt"
echo 3 >"$(printf 'tab\there')"
echo 4 >"$(printf 'line\nbreak')"
echo 5 >'quote"and\back'
mkdir -p "new dir é/sub"
echo 6 >"new dir é/sub/f"
echo 7 >"tracked dir/new file"
echo 8 >build.log
echo new >"tracked é.txt"
rm gone.txt
EOF
echo '{"updateContentCommand": "sh make-outputs.sh"}' >"$W/warren.json"
git -C "$W" init -q -b main
git -C "$W" -c user.email=t@warren -c user.name=test add -A
git -C "$W" -c user.email=t@warren -c user.name=test commit -q -m "initial"
idw="$(build "$W" weird)"
M="$TEST_TMP/weird.json"
[ ${#idw} = 64 ] && pass "a build that writes unusual names builds" || fail "a build that writes unusual names builds" "$(tail -5 "$TEST_TMP/weird.err")"
check "a path with a space comes back exactly" "$M" '.extra.build_output.untracked | index(["with space.txt"]) != null'
check "a non-ASCII path comes back exactly" "$M" '.extra.build_output.untracked | index(["naïve-ü.txt"]) != null'
check "tab, newline, quote and backslash come back exactly" "$M" \
	'.extra.build_output.untracked as $u | ["tab\there", "line\nbreak", "quote\"and\\back"] | all(. as $p | $u | index([$p]))'
check "a new directory with a non-ASCII name is one entry" "$M" \
	'.extra.build_output.untracked | index(["new dir é/"]) != null and (map(select(startswith("new dir é/") and . != "new dir é/")) == [])'
check "a new file in a tracked directory is listed as a file" "$M" '.extra.build_output.untracked | index(["tracked dir/new file"]) != null'
check "ignored files are left out" "$M" '.extra.build_output.untracked | all(. != "build.log")'
check "untracked is exactly what the hook created" "$M" \
	'(.extra.build_output.untracked | sort) == (["line\nbreak", "naïve-ü.txt", "new dir é/", "quote\"and\\back", "tab\there", "tracked dir/new file", "with space.txt"] | sort)'
newblob="$(printf 'new\n' | git hash-object --stdin)"
check "a modified tracked non-ASCII file: its path and new blob" "$M" \
	'.extra.build_output.modified | index([{"path": "tracked é.txt", "blob": $b}]) != null' --arg b "$newblob"
check "a deleted tracked file: blob 0{40}" "$M" \
	'.extra.build_output.modified | index([{"path": "gone.txt", "blob": "0000000000000000000000000000000000000000"}]) != null'
check "modified has exactly those two, in git's order" "$M" '.extra.build_output.modified | map(.path) == ["gone.txt", "tracked é.txt"]'
check "the warning names both, without npm's advice" "$M" \
	'.extra.warnings == ["warning: the build'"'"'s hooks modified tracked files: gone.txt, tracked é.txt; sessions leave these changes out of their result"]'

# the cap: 10,000 records, then truncated; the changed tracked file first
T="$TEST_TMP/many"
mkdir -p "$T/out"
echo keep >"$T/out/keep"
echo '{"updateContentCommand": "cd out && seq -f f%05g 10050 | xargs touch && echo changed >keep"}' >"$T/warren.json"
git -C "$T" init -q -b main
git -C "$T" -c user.email=t@warren -c user.name=test add -A
git -C "$T" -c user.email=t@warren -c user.name=test commit -q -m "initial"
idt="$(build "$T" many)"
M="$TEST_TMP/many.json"
[ ${#idt} = 64 ] && pass "a build with 10,050 new files builds" || fail "a build with 10,050 new files builds" "$(tail -5 "$TEST_TMP/many.err")"
check "at most 10,000 records, truncated set" "$M" '.extra.build_output | (.untracked | length) + (.modified | length) == 10000 and .truncated == true'
check "the changed tracked file is kept, before the untracked ones" "$M" '.extra.build_output.modified | map(.path) == ["out/keep"]'
check "the untracked paths kept are the first ones" "$M" '.extra.build_output.untracked[0] == "out/f00001" and .extra.build_output.untracked[9998] == "out/f09999"'
grep -q "recorded in part" "$TEST_TMP/many.err" && pass "the progress says the record is partial" || fail "the progress says the record is partial" "$(tail -3 "$TEST_TMP/many.err")"
check "the manifest's warnings say so" "$M" '.extra.warnings | any(startswith("warning: the build'"'"'s outputs are recorded in part"))'

# a path that is not UTF-8 can be no JSON string: left out, truncated set
U="$TEST_TMP/latin1"
mkdir -p "$U"
echo '{"updateContentCommand": "echo 1 >ok.txt && echo 2 >\"$(printf '"'"'caf\\351'"'"')\""}' >"$U/warren.json"
git -C "$U" init -q -b main
git -C "$U" -c user.email=t@warren -c user.name=test add -A
git -C "$U" -c user.email=t@warren -c user.name=test commit -q -m "initial"
idu="$(build "$U" latin1)"
M="$TEST_TMP/latin1.json"
[ ${#idu} = 64 ] && pass "a build that writes a Latin-1 name builds" || fail "a build that writes a Latin-1 name builds" "$(tail -5 "$TEST_TMP/latin1.err")"
check "a path that is not UTF-8: left out, the others kept, truncated set" "$M" \
	'.extra.build_output == {"untracked": ["ok.txt"], "modified": [], "truncated": true}'
