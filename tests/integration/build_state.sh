#!/bin/bash
# A failed snapshot build is visible where the repository is: the
# repository object's "build" says failed with the cause (the spec's own
# error, not "see the log"), `warren repo ls` shows the state and prints the
# cause, a session of it fails naming it, and it survives a restart; a good
# repository's build says ready with its snapshot.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"

greeter_remote
BAD="$TEST_TMP/bad"
mkdir -p "$BAD"
echo '{"customizations": {"warren": {"verify": 42}}}' >"$BAD/warren.json"
g -C "$BAD" init -q -b main
g -C "$BAD" add -A
g -C "$BAD" commit -q -m initial
cat >"$TEST_TMP/serve.json" <<EOF2
{"repositories": [{"name": "greeter", "url": "$REMOTE"}, {"name": "bad", "url": "$BAD"}]}
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
