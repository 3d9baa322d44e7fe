#!/bin/bash
# A repository that cannot be built is refused when it is registered, with
# git's reason: `warren repo add` of a path that does not exist, or with a
# ref that does not exist, fails (the API's 400) and registers nothing; a
# good one with a branch, a tag or no ref is registered.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"

greeter_remote
g -C "$W" tag v1
g -C "$W" push -q "$REMOTE" v1
server_start "$TEST_TMP/data" ""
R() { "$WARREN" repo "$@" --server "$URL" --token "$TOKEN"; }

out="$(R add "$TEST_TMP/no-such-dir" --name ghost 2>&1)"
rc=$?
[ "$rc" != 0 ] && echo "$out" | grep -q "no-such-dir" && echo "$out" | grep -qi "does not appear to be a git repository\|not found\|No such" &&
	pass "repo add of a path that does not exist fails with git's reason" || fail "repo add of a path that does not exist fails with git's reason" "rc=$rc $out"
out="$(R add "$REMOTE" --name badref --ref no-such-branch 2>&1)"
rc=$?
[ "$rc" != 0 ] && echo "$out" | grep -q "ref: 'no-such-branch' is not a branch or tag" &&
	pass "repo add with a ref that does not exist fails, naming it" || fail "repo add with a ref that does not exist fails, naming it" "rc=$rc $out"
api POST /api/v1/repositories "{\"url\": \"$TEST_TMP/no-such-dir\", \"name\": \"ghost2\"}"
[ "$CODE" = 400 ] && pass "the API answers 400" || fail "the API answers 400" "$CODE $BODY"
api GET /api/v1/repositories
[ "$(echo "$BODY" | jq '[.repositories[] | select(.name | test("ghost|badref"))] | length')" = 0 ] &&
	pass "nothing was registered" || fail "nothing was registered" "$BODY"
R add "$REMOTE" --name good >/dev/null 2>&1 && R add "$REMOTE" --name good-branch --ref main >/dev/null 2>&1 &&
	R add "$REMOTE" --name good-tag --ref v1 >/dev/null 2>&1 &&
	pass "a good repository registers, with no ref, a branch or a tag" || fail "a good repository registers, with no ref, a branch or a tag" "$(R add "$REMOTE" --name good-x --ref v1 2>&1)"
server_stop
