#!/bin/bash
# Repositories can be changed and removed: `warren repo set` (PATCH
# /repositories/{id}) changes the url, ref, refresh and agent, checking a
# new remote as `repo add` does and rebuilding; `warren repo rm` (DELETE)
# refuses while a session of the repository is not finished, then removes
# it from the list and frees its name while its sessions' history keeps it.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"

greeter_remote
D="$TEST_TMP/data"
server_start "$D"
repo() { "$WARREN" repo "$@" --server "$URL" --token "$TOKEN"; }
R="$TEST_TMP/remote2.git"
git clone -q --bare "$REMOTE" "$R"
g -C "$W" checkout -q -b next
echo next >"$W/greeting.txt"
g -C "$W" commit -q -am next
g -C "$W" push -q "$R" next

out="$(repo add "$REMOTE" --name greeter 2>&1)"
id="$(echo "$out" | awk '{print $1}')"
[ -n "$id" ] && pass "set up: greeter registered" || fail "set up: greeter registered" "$out"

# --- set
out="$(repo set greeter --refresh 2h --json 2>&1)"
[ "$(echo "$out" | jq -r .refresh_ms)" = 7200000 ] && [ "$(echo "$out" | jq -r .url)" = "$REMOTE" ] &&
	pass "repo set --refresh changes only the refresh interval" ||
	fail "repo set --refresh changes only the refresh interval" "$out"
out="$(repo set greeter --url "$R" --ref next --json 2>&1)"
[ "$(echo "$out" | jq -r .url)" = "$R" ] && [ "$(echo "$out" | jq -r .default_ref)" = next ] &&
	pass "repo set --url --ref: the new remote and ref" || fail "repo set --url --ref: the new remote and ref" "$out"
out="$(repo set greeter --ref no-such-ref 2>&1)"
rc=$?
[ "$rc" != 0 ] && echo "$out" | grep -qi "no-such-ref" &&
	pass "repo set refuses a ref the remote does not have, naming it" ||
	fail "repo set refuses a ref the remote does not have, naming it" "exit $rc: $out"
api GET /api/v1/repositories
[ "$(echo "$BODY" | jq -r '.repositories[0].default_ref')" = next ] &&
	pass "a refused change changes nothing" || fail "a refused change changes nothing" "$BODY"
out="$(repo set greeter --ref '' --json 2>&1)"
[ "$(echo "$out" | jq -r .default_ref)" = null ] &&
	pass "repo set --ref '': back to the remote's HEAD" || fail "repo set --ref '': back to the remote's HEAD" "$out"
expect_status "repo set with nothing to change is a usage error (2)" 2 repo set greeter
api PATCH "/api/v1/repositories/$id" '{"name": "other"}'
[ "$CODE" = 400 ] && pass "PATCH refuses an unknown key (name does not change)" ||
	fail "PATCH refuses an unknown key (name does not change)" "$CODE $BODY"
api GET "/api/v1/repositories/$id"
[ "$CODE" = 200 ] && [ "$(jget .name)" = greeter ] && [ "$(jget .url)" = "$R" ] && [ -n "$(jget .refresh_source)" ] &&
	pass "GET /repositories/{id}: the repository, as listed" || fail "GET /repositories/{id}: the repository, as listed" "$CODE $BODY"
api GET /api/v1/repositories/r-nosuch
[ "$CODE" = 404 ] && pass "GET of an unknown repository is 404" || fail "GET of an unknown repository is 404" "$CODE $BODY"
api PATCH "/api/v1/repositories/r-nosuch" '{"refresh": "1h"}'
[ "$CODE" = 404 ] && pass "PATCH of an unknown repository is 404" || fail "PATCH of an unknown repository is 404" "$CODE $BODY"

# --- rm: refused while a session is not finished
S="$(submit greeter "wait" 'sleep 60')"
wait_state "$S" running 60
out="$(repo rm greeter 2>&1)"
rc=$?
[ "$rc" != 0 ] && echo "$out" | grep -q "not finished" &&
	pass "repo rm is refused while a session of it runs (409, said why)" ||
	fail "repo rm is refused while a session of it runs (409, said why)" "exit $rc: $out"
api POST "/api/v1/sessions/$S/cancel" '{}'
wait_state "$S" cancelled 60
out="$(repo rm greeter 2>&1)"
[ "$?" = 0 ] && [ "$out" = "removed greeter" ] && pass "repo rm removes it once its sessions are finished" ||
	fail "repo rm removes it once its sessions are finished" "$out"
api GET /api/v1/repositories
[ "$(echo "$BODY" | jq '.repositories | length')" = 0 ] && pass "a removed repository is not listed" ||
	fail "a removed repository is not listed" "$BODY"
api GET "/api/v1/sessions/$S"
[ "$(jget .repo_id)" = "$id" ] && [ "$(jget .state)" = cancelled ] &&
	pass "its sessions' history stays" || fail "its sessions' history stays" "$BODY"
api POST /api/v1/sessions "$(jq -n '{repo: "greeter", prompt: "x", agent: ["true"]}')"
[ "$CODE" = 404 ] && echo "$BODY" | grep -q "no repository 'greeter'" &&
	pass "no new session of a removed repository (404, its name not found)" ||
	fail "no new session of a removed repository (404, its name not found)" "$CODE $BODY"
out="$(repo add "$REMOTE" --name greeter 2>&1)"
[ "$?" = 0 ] && [ "$(echo "$out" | awk '{print $1}')" != "$id" ] &&
	pass "its name is free again (a new repository)" || fail "its name is free again (a new repository)" "$out"
expect_status "repo rm of an unknown repository fails" 1 repo rm no-such-repo
server_stop
