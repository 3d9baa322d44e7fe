#!/bin/bash
# The staleness policy of warren serve: a session starts from the newest
# snapshot while it is within the policy (max commits behind the ref, max
# age), and waits for a fresh one when it is not; the session's record
# says which (outcome.snapshot_policy, a "snapshot" event). Per repository,
# else the server's default; a bad policy is refused at start.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"

new_repo() { # DIR
	mkdir -p "$1"
	echo 0 >"$1/n.txt"
	git -C "$1" init -q -b main
	git -C "$1" -c user.email=t@warren -c user.name=test add -A
	git -C "$1" -c user.email=t@warren -c user.name=test commit -q -m initial
}
bump() { # DIR: one more commit
	echo "$(($(cat "$1/n.txt") + 1))" >"$1/n.txt"
	git -C "$1" -c user.email=t@warren -c user.name=test commit -q -am "bump"
}
R="$TEST_TMP/behind"
A="$TEST_TMP/aged"
P="$TEST_TMP/plain"
new_repo "$R"
new_repo "$A"
new_repo "$P"

# a bad policy names its key
D="$TEST_TMP/data"
echo '{"staleness": {"max_behind": 0}}' >"$TEST_TMP/bad.json"
out="$("$WARREN" serve --data "$TEST_TMP/bad-data" --listen 127.0.0.1:1 --config "$TEST_TMP/bad.json" 2>&1)"
echo "$out" | grep -q "staleness.max_behind" && pass "a bad policy names its key" || fail "a bad policy names its key" "$out"
echo "{\"repositories\": [{\"url\": \"$R\", \"staleness\": {\"max_age\": \"1h\"}}]}" >"$TEST_TMP/bad2.json"
out="$("$WARREN" serve --data "$TEST_TMP/bad-data" --listen 127.0.0.1:1 --config "$TEST_TMP/bad2.json" 2>&1)"
echo "$out" | grep -q "'staleness' needs a 'name'" && pass "a repository's policy needs its name" || fail "a repository's policy needs its name" "$out"

CONF="$TEST_TMP/serve.json"
cat >"$CONF" <<EOF
{"staleness": {"max_behind": 100},
 "repositories": [
   {"name": "behind", "url": "$R", "staleness": {"max_behind": 2}},
   {"name": "aged", "url": "$A", "staleness": {"max_age": "10s"}},
   {"name": "plain", "url": "$P"}]}
EOF
server_start "$D" "$CONF"

# started: snapshot_policy of session ID (after it left provisioning)
policy_of() { # ID
	wait_state "$1" review 60 >/dev/null
	api GET "/api/v1/sessions/$1"
	echo "$BODY" | jq -c '.outcome.snapshot_policy' 2>/dev/null
}
snap_of() { api GET "/api/v1/sessions/$1"; jget .snapshot_id; }

# wait_snapshot NAME: until the repository has a snapshot (warren serve
# refreshes registered repositories at start)
wait_snapshot() {
	local i
	for i in $(seq 1 300); do
		api GET "/api/v1/snapshots?repo=$1"
		[ "$(echo "$BODY" | jq '.snapshots | length' 2>/dev/null)" -ge 1 ] 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# 1. no snapshot yet (a repository first named by a session): the session
# waits for the first one, under the server's default policy
N="$TEST_TMP/new"
new_repo "$N"
s1="$(submit "$N" "first" "true")"
p1="$(policy_of "$s1")"
echo "$p1" | jq -e '.newest == "none" and .waited == true and .max_behind == 100' >/dev/null &&
	pass "no snapshot: the session waits for one, and says so" || fail "no snapshot: the session waits for one, and says so" "$p1 $(jget .reason)"

wait_snapshot behind
api GET "/api/v1/snapshots?repo=behind"
snap1="$(echo "$BODY" | jq -r '.snapshots[0].id')"

# 2. one commit behind, within max_behind 2: starts from the same snapshot
bump "$R"
s2="$(submit behind "second" "true")"
p2="$(policy_of "$s2")"
echo "$p2" | jq -e '.newest == "behind" and .commits_behind == 1 and .waited == false' >/dev/null &&
	[ "$(snap_of "$s2")" = "$snap1" ] &&
	pass "1 commit behind (max 2): starts from the newest snapshot" || fail "1 commit behind (max 2): starts from the newest snapshot" "$p2"
events_json "$s2" | jq -e '[.events[] | select(.kind == "snapshot")] | length == 1' >/dev/null &&
	pass "the decision is an event of the session" || fail "the decision is an event of the session" "$(session_log "$s2" | head)"

# 3. three commits behind: stale, the session waits for a fresh snapshot
bump "$R"
bump "$R"
s3="$(submit behind "third" "true")"
p3="$(policy_of "$s3")"
snap3="$(snap_of "$s3")"
echo "$p3" | jq -e '.newest == "stale" and .commits_behind == 3 and .waited == true' >/dev/null &&
	[ -n "$snap3" ] && [ "$snap3" != "$snap1" ] &&
	pass "3 commits behind (max 2): waits for a fresh snapshot" || fail "3 commits behind (max 2): waits for a fresh snapshot" "$p3 $snap1 $snap3"
api GET "/api/v1/snapshots?repo=behind"
[ "$(echo "$BODY" | jq '.snapshots | length')" = 2 ] && pass "two snapshots of the repository" || fail "two snapshots of the repository" "$BODY"

# 4. max age: a snapshot behind the ref is stale once older than max_age
# (at the ref's commit, an old snapshot is as good as a new one: no drift)
wait_snapshot aged
bump "$A"
s5="$(submit aged "young" "true")"
p5="$(policy_of "$s5")"
echo "$p5" | jq -e '.newest == "behind" and .waited == false and .max_age_ms == 10000' >/dev/null &&
	pass "behind but young (max age 10 s): no wait" || fail "behind but young (max age 10 s): no wait" "$p5"
sleep 10
s6="$(submit aged "old" "true")"
p6="$(policy_of "$s6")"
echo "$p6" | jq -e '.newest == "stale" and .waited == true and .age_ms >= 10000' >/dev/null &&
	[ "$(snap_of "$s6")" != "$(snap_of "$s5")" ] &&
	pass "behind and old (max age 10 s): waits for a fresh one" || fail "behind and old (max age 10 s): waits for a fresh one" "$p6"
s7="$(submit aged "at the ref" "true")"
p7="$(policy_of "$s7")"
echo "$p7" | jq -e '.newest == "fresh" and .waited == false' >/dev/null &&
	pass "at the ref's commit: fresh" || fail "at the ref's commit: fresh" "$p7"

# 5. a repository without its own policy takes the server's default
s8="$(submit plain "default" "true")"
p8="$(policy_of "$s8")"
echo "$p8" | jq -e '.max_behind == 100 and .max_age_ms == 0' >/dev/null &&
	pass "no policy of its own: the server's default" || fail "no policy of its own: the server's default" "$p8"
server_stop
