#!/bin/bash
# The change is the agent's alone: what the snapshot build produced is never
# part of a session's result. The README's quick start (c-hello: configure
# and make outputs, rebuilt by the agent itself), a CMake project built into
# build/, and an `npm install` build that rewrites the tracked lockfile each
# give a change holding exactly the agent's edits, with the outputs left out
# named in outcome.result.build_output; an agent that edits the lockfile
# itself keeps that edit; an agent that changes nothing has no change.
# Verification runs on the result commit in a fresh sandbox and passes.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"

FIX="$ROOT_DIR/tests/fixtures"
repo_from() { # FIXTURE DIR: a repository with the fixture as its first commit
	cp -a "$FIX/$1" "$2"
	g -C "$2" init -q -b main
	g -C "$2" add -A
	g -C "$2" commit -q -m initial
}
repo_from c-hello "$TEST_TMP/c-hello"
repo_from cmake-hello "$TEST_TMP/cmake-hello"

REG_PID=""
NPM=""
if command -v npm >/dev/null && command -v node >/dev/null; then
	cp -a "$FIX/npm-install-app" "$TEST_TMP/npm-app"
	python3 "$ROOT_DIR/tests/tools/npm_registry.py" --packages "$FIX/npm-registry" \
		--port 0 --public-host registry.warren.test --log "$TEST_TMP/registry.log" \
		>"$TEST_TMP/registry.port" 2>"$TEST_TMP/registry.err" &
	REG_PID=$!
	for _ in $(seq 1 50); do [ -s "$TEST_TMP/registry.port" ] && break; sleep 0.1; done
	RPORT="$(head -1 "$TEST_TMP/registry.port")"
	sed -i "s/\"registry.warren.test\"/\"registry.warren.test:$RPORT\"/" "$TEST_TMP/npm-app/warren.json"
	echo "registry=http://registry.warren.test:$RPORT/" >"$TEST_TMP/npm-app/.npmrc"
	g -C "$TEST_TMP/npm-app" init -q -b main
	g -C "$TEST_TMP/npm-app" add -A
	g -C "$TEST_TMP/npm-app" commit -q -m initial
	NPM=1
fi
trap 'server_stop; [ -n "$REG_PID" ] && kill "$REG_PID" 2>/dev/null; rm -rf "$TEST_TMP"' EXIT

D="$TEST_TMP/data"
cat >"$TEST_TMP/serve.json" <<EOF
{"verify": {"retries": 0},
 "egress": {"allow_addresses": ["127.0.0.1/32"], "hosts": {"registry.warren.test": "127.0.0.1"}},
 "repositories": [{"name": "c-hello", "url": "$TEST_TMP/c-hello"},
                  {"name": "cmake-hello", "url": "$TEST_TMP/cmake-hello"}
                  ${NPM:+, {\"name\": \"npm-app\", \"url\": \"$TEST_TMP/npm-app\"}}]}
EOF
server_start "$D" "$TEST_TMP/serve.json"

# session REPO AGENT: waits for review; sets S and BODY (the session)
session() {
	S="$(submit "$1" "change" "$2")"
	wait_state "$S" review 240
	api GET "/api/v1/sessions/$S"
}
files() { jget '[.outcome.result.files[].path] | join(",")'; }
verified_here() { # NAME: verify passed on the result commit, in a fresh sandbox
	if [ "$(jget .outcome.verify.passed)" = true ] && [ -n "$(jget .outcome.result.commit)" ] &&
		[ "$(jget .outcome.verify.commit)" = "$(jget .outcome.result.commit)" ] &&
		[ "$(jget .outcome.verify.sandbox)" = fresh ]; then
		pass "$1: verified on the result commit in a fresh sandbox"
	else
		fail "$1: verified on the result commit in a fresh sandbox" "$(jget .outcome.verify | head -c 600)"
	fi
}

# --- the README's quick start ------------------------------------------------
session c-hello 'sed -i "s/%s, %s!/%s, %s!!/" src/greet.c && make hello && ./hello'
[ "$STATE" = review ] && [ "$(files)" = src/greet.c ] &&
	pass "quick start: the change holds only src/greet.c" || fail "quick start: the change holds only src/greet.c" "$STATE $(files) $(jget .reason)"
left="$(jget '.outcome.result.build_output.paths | join(",")')"
[ "$(jget .outcome.result.build_output.count)" -ge 4 ] 2>/dev/null && echo ",$left," | grep -q ',config.h,' && echo ",$left," | grep -q ',hello,' &&
	pass "quick start: configure and make outputs are named as left out" || fail "quick start: configure and make outputs are named as left out" "$(jget .outcome.result.build_output)"
# the quick start's edit breaks the project's own tests ("!!"): Warren's
# verification of the result commit, in a fresh sandbox, says so
if [ "$(jraw .outcome.verify.passed)" = false ] && [ "$(jget .outcome.verify.commit)" = "$(jget .outcome.result.commit)" ] &&
	[ "$(jget .outcome.verify.sandbox)" = fresh ] && jget '.outcome.verify.results[0].output' | grep -q "got 'hello, world!!'"; then
	pass "quick start: verified on the result commit in a fresh sandbox, failing for the edit's own reason"
else
	fail "quick start: verified on the result commit in a fresh sandbox, failing for the edit's own reason" "$(jget .outcome.verify | head -c 600)"
fi
diff="$(curl -s -H "Authorization: Bearer $TOKEN" "$URL/api/v1/sessions/$S/diff")"
echo "$diff" | grep -q '^+.*%s, %s!!' && ! echo "$diff" | grep -q 'config.h' &&
	pass "quick start: the diff is the agent's edit only" || fail "quick start: the diff is the agent's edit only" "$(echo "$diff" | grep '^diff' | head)"

# an agent that changes nothing: no change, though the build left files
session c-hello 'true'
[ "$STATE" = review ] && [ "$(jraw .outcome.result.changed)" = false ] && [ -z "$(files)" ] &&
	pass "an agent that changes nothing has no change" || fail "an agent that changes nothing has no change" "$STATE $(files)"
# a new file of the agent's own is always in the change
session c-hello 'echo notes >NOTES.md'
[ "$(files)" = NOTES.md ] && pass "a file the agent creates is in the change" || fail "a file the agent creates is in the change" "$(files)"

# a change to a lockfile (c-hello declares `configure` one): the verification
# sandbox re-runs updateContentCommand first, as a session at that commit would
session c-hello 'echo "# reviewed" >>configure'
[ "$(files)" = configure ] && [ "$(jraw .outcome.verify.hooks_rerun)" = true ] && [ "$(jraw .outcome.verify.passed)" = true ] &&
	pass "a changed lockfile: updateContentCommand re-runs before verification" || fail "a changed lockfile: updateContentCommand re-runs before verification" "$(files) $(jget .outcome.verify | head -c 400)"
session c-hello 'echo "# notes" >>README.md'
[ "$(jraw '.outcome.verify.hooks_rerun // false')" = false ] &&
	pass "no lockfile changed: no re-install" || fail "no lockfile changed: no re-install" "$(jget .outcome.verify | head -c 300)"

# --- CMake, built out of tree into build/ ------------------------------------
session cmake-hello 'sed -i "s/hello/hello, cmake/" src/main.c && cmake --build build'
[ "$STATE" = review ] && [ "$(files)" = src/main.c ] &&
	pass "cmake: the change holds only src/main.c" || fail "cmake: the change holds only src/main.c" "$STATE $(files) $(jget .reason)"
[ "$(jget '[.outcome.result.files[].path | select(startswith("build/"))] | length')" = 0 ] &&
	pass "cmake: nothing under build/ is in the change" || fail "cmake: nothing under build/ is in the change" "$(files)"
[ "$(jget .outcome.result.diff_bytes)" -lt 4096 ] 2>/dev/null &&
	pass "cmake: the diff is small ($(jget .outcome.result.diff_bytes) bytes)" || fail "cmake: the diff is small" "$(jget .outcome.result.diff_bytes)"
verified_here "cmake"

# --- npm install rewrites the tracked lockfile -------------------------------
if [ -n "$NPM" ]; then
	session npm-app 'echo "// touched" >>index.js'
	[ "$STATE" = review ] && [ "$(files)" = index.js ] &&
		pass "npm install: the change holds only index.js, not the lockfile" || fail "npm install: the change holds only index.js, not the lockfile" "$STATE $(files) $(jget .reason)"
	jget '.outcome.result.build_output.paths' | grep -q '"package-lock.json"' &&
		pass "npm install: the lockfile is named as left out" || fail "npm install: the lockfile is named as left out" "$(jget .outcome.result.build_output)"
	verified_here "npm install"
	# the agent's own edit of the lockfile stays
	session npm-app 'sed -i "s/\"name\": \"npm-install-app\"/\"name\": \"npm-install-app-2\"/" package-lock.json'
	echo ",$(files)," | grep -q ',package-lock.json,' &&
		pass "npm install: a lockfile the agent changed further is in the change" || fail "npm install: a lockfile the agent changed further is in the change" "$(files)"
else
	fail "npm install: node and npm are installed" "npm or node missing"
fi

server_stop
left_sb="$("$WARREN" sandbox ls --data "$D" 2>/dev/null | grep -c 'w[sv]-s-')"
[ "$left_sb" = 0 ] && pass "no sandbox left" || fail "no sandbox left" "$("$WARREN" sandbox ls --all)"
