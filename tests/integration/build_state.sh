#!/bin/bash
# A failed snapshot build is visible where the repository is: the
# repository object's "build" says failed with the cause (the spec's own
# error, not "see the log"), `warren repo ls` shows the state and prints the
# cause, a session of it fails naming it, and it survives a restart; a good
# repository's build says ready with its snapshot; a failing hook is named
# (build.hook); the refresh interval in effect and its source are said.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"

greeter_remote
BAD="$TEST_TMP/bad"
mkdir -p "$BAD"
echo '{"customizations": {"warren": {"verify": 42}}}' >"$BAD/warren.json"
g -C "$BAD" init -q -b main
g -C "$BAD" add -A
g -C "$BAD" commit -q -m initial
# a hook that fails (status 3); a spec with its own refresh interval
HOOK="$TEST_TMP/hookfail"
SPECR="$TEST_TMP/specrefresh"
mkdir -p "$HOOK" "$SPECR"
echo '{"onCreateCommand": "echo boom; exit 3"}' >"$HOOK/warren.json"
echo '{"customizations": {"warren": {"refresh": "2h"}}}' >"$SPECR/warren.json"
for d in "$HOOK" "$SPECR"; do
	g -C "$d" init -q -b main
	g -C "$d" add -A
	g -C "$d" commit -q -m initial
done
cat >"$TEST_TMP/serve.json" <<EOF2
{"repositories": [{"name": "greeter", "url": "$REMOTE"}, {"name": "bad", "url": "$BAD"},
 {"name": "hookfail", "url": "$HOOK", "refresh": "6h"}, {"name": "specrefresh", "url": "$SPECR"}]}
EOF2
server_start "$TEST_TMP/data" "$TEST_TMP/serve.json"

build_of() { api GET /api/v1/repositories; echo "$BODY" | jq -c --arg n "$1" '.repositories[] | select(.name == $n) | .build'; }
for _ in $(seq 1 100); do
	case "$(build_of bad | jq -r '.state // empty')" in failed) break ;; esac
	sleep 0.2
done
b="$(build_of bad)"
[ "$(echo "$b" | jq -r .state)" = failed ] && echo "$b" | jq -r .error | grep -q 'customizations.warren.verify' &&
	pass "a failed build: the repository's build says failed, with the spec's own error" || fail "a failed build: the repository's build says failed, with the spec's own error" "$b"
for _ in $(seq 1 100); do
	case "$(build_of greeter | jq -r '.state // empty')" in ready) break ;; esac
	sleep 0.2
done
g_b="$(build_of greeter)"
[ "$(echo "$g_b" | jq -r .state)" = ready ] && [ "$(echo "$g_b" | jq -r '.snapshot | length')" = 64 ] &&
	pass "a good build: ready, with its snapshot" || fail "a good build: ready, with its snapshot" "$g_b"
for _ in $(seq 1 150); do
	case "$(build_of hookfail | jq -r '.state // empty')$(build_of specrefresh | jq -r '.state // empty')" in failedready) break ;; esac
	sleep 0.2
done
h_b="$(build_of hookfail)"
[ "$(echo "$h_b" | jq -r .state)" = failed ] && [ "$(echo "$h_b" | jq -r .hook)" = onCreateCommand ] &&
	echo "$h_b" | jq -r .error | grep -q 'hook onCreateCommand failed with status 3' &&
	pass "a failing hook: the build names it (hook), its status in the error" || fail "a failing hook: the build names it (hook), its status in the error" "$h_b"
[ "$(echo "$b" | jq -r '.hook // "none"')" = none ] && pass "a spec error names no hook" || fail "a spec error names no hook" "$b"
api GET /api/v1/repositories
every_of() { echo "$BODY" | jq -r --arg n "$1" '.repositories[] | select(.name == $n) | "\(.refresh_ms) \(.refresh_every_ms) \(.refresh_source)"'; }
[ "$(every_of greeter)" = "0 1800000 default" ] && [ "$(every_of hookfail)" = "21600000 21600000 repository" ] &&
	[ "$(every_of specrefresh)" = "0 7200000 spec" ] &&
	pass "the refresh interval in effect: the repository's, the spec's, else 30 min" ||
	fail "the refresh interval in effect: the repository's, the spec's, else 30 min" "$(every_of greeter); $(every_of hookfail); $(every_of specrefresh)"
"$WARREN" repo ls --server "$URL" --token "$TOKEN" >"$TEST_TMP/ls.out" 2>"$TEST_TMP/ls.err"
grep -Eq '^r-[^ ]+ +bad +- +failed ' "$TEST_TMP/ls.out" && grep -q '^bad: build failed: .*customizations.warren.verify' "$TEST_TMP/ls.err" &&
	pass "warren repo ls shows the state and prints the cause" || fail "warren repo ls shows the state and prints the cause" "$(cat "$TEST_TMP/ls.out" "$TEST_TMP/ls.err")"
S="$(submit bad "x" 'true')"
wait_state "$S" failed 60
api GET "/api/v1/sessions/$S"
jget .reason | grep -q 'customizations.warren.verify' &&
	pass "a session of it fails naming the cause" || fail "a session of it fails naming the cause" "$STATE $(jget .reason)"
server_stop
server_start "$TEST_TMP/data" "$TEST_TMP/serve.json"
[ "$(build_of bad | jq -r .state)" = failed ] && pass "the build state survives a restart" || fail "the build state survives a restart" "$(build_of bad)"
server_stop
