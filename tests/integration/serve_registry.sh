#!/bin/bash
# warren serve with "blobs" in its configuration pushes each snapshot it
# builds to that registry (sched/snapshots.c): the manifest is in the
# registry under the snapshot's id, the build's record says the push and
# its digest; a snapshot the data directory lacks (removed, as on a host
# that did not build it) is pulled before the session starts, once for two
# sessions at once (the other waits for that pull, or starts after it), its
# time in the start breakdown; a pull that fails is
# the session's failure reason; with the registry gone the build still
# ends ready, its
# record and its log say the push failed and why, and the server's log
# warns. Against Debian's docker-registry (tests/registry_server.sh); SKIP
# without it.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"
. "$ROOT_DIR/tests/registry_server.sh"

if [ -z "$REGISTRY_BIN" ] || ! command -v htpasswd >/dev/null; then
	echo "SKIP serve_registry: docker-registry or htpasswd is not installed (apt-get install docker-registry apache2-utils)" >&2
	exit 0
fi
trap 'server_stop; registry_stop_all; rm -rf "$TEST_TMP"' EXIT

if ! REGISTRY_LOG_LEVEL=info start_registry_htpasswd reg warren 'serve-pw'; then
	fail "docker-registry starts with htpasswd" "$(tail -5 "$TEST_TMP/reg.log")"
	exit 0
fi
printf 'serve-pw\n' >"$TEST_TMP/pw"
chmod 600 "$TEST_TMP/pw"
greeter_remote

# serve_with REGISTRY [EXTRA [BLOBS-EXTRA]]: a configuration with the
# repository and the registry (EXTRA: more top-level keys, with a trailing
# comma; BLOBS-EXTRA: more keys of "blobs", with a leading comma)
serve_with() {
	cat >"$TEST_TMP/serve.json" <<EOF
{"repositories": [{"name": "greeter", "url": "$REMOTE"}], ${2:-}
 "blobs": {"registry": "$1", "repository": "warren/served", "username": "warren",
           "password_file": "$TEST_TMP/pw"${3:-}}}
EOF
}
repo_id() { api GET /api/v1/repositories; echo "$BODY" | jq -r '.repositories[] | select(.name == "greeter") | .id'; }
# the newest build's record once it has ended
last_build() {
	local id b
	id="$(repo_id)"
	for _ in $(seq 1 300); do
		api GET "/api/v1/repositories/$id/builds"
		b="$(echo "$BODY" | jq -c '.builds[0] // empty')"
		case "$(echo "$b" | jq -r '.state // empty' 2>/dev/null)" in ready | failed) break ;; esac
		sleep 0.2
	done
	echo "$b"
}

serve_with "$REG_reg"
server_start "$TEST_TMP/data" "$TEST_TMP/serve.json"
b="$(last_build)"
snap="$(echo "$b" | jq -r '.snapshot_id // empty')"
[ "$(echo "$b" | jq -r .state)" = ready ] && [ ${#snap} = 64 ] && pass "the server builds the snapshot" ||
	fail "the server builds the snapshot" "$b $(tail -5 "$SERVER_LOG")"
digest="$(echo "$b" | jq -r '.push.manifest_digest // empty')"
[ "$(echo "$b" | jq -r .push.ok)" = true ] && [ "${digest#sha256:}" != "$digest" ] &&
	pass "the build's record says it was pushed, with the manifest's digest" ||
	fail "the build's record says it was pushed, with the manifest's digest" "$b"
got="$(curl -s -o /dev/null -w '%{http_code} %header{docker-content-digest}' -u warren:serve-pw \
	-H 'Accept: application/vnd.oci.image.manifest.v1+json' "$REG_reg/v2/warren/served/manifests/$snap")"
[ "$got" = "200 $digest" ] && pass "the registry holds the snapshot under its id" ||
	fail "the registry holds the snapshot under its id" "$got (want 200 $digest)"
server_stop

# ---- the server pulls a snapshot its data directory lacks ---------------------
# (as a second host would: the store names the repository's snapshot, the
# data directory does not hold it)
"$WARREN" snapshot rm "$snap" --data "$TEST_TMP/data" >/dev/null
"$WARREN" snapshot gc --data "$TEST_TMP/data" >/dev/null
[ ! -e "$TEST_TMP/data/snapshots/$snap.json" ] && [ -z "$(ls "$TEST_TMP/data/layers" | grep -E '^[0-9a-f]{64}$')" ] &&
	pass "the snapshot and its layers are gone from the data directory" ||
	fail "the snapshot and its layers are gone from the data directory" "$(ls "$TEST_TMP/data/layers")"
manifest_gets() { grep -c "\"GET /v2/warren/served/manifests/$snap" "$TEST_TMP/reg.log"; }
gets0="$(manifest_gets)"
server_start "$TEST_TMP/data" "$TEST_TMP/serve.json"
# two sessions at once: one pull
P1="$(submit greeter "first" 'cat greeting.txt')"
P2="$(submit greeter "second" 'cat greeting.txt')"
for p in "$P1" "$P2"; do
	wait_state "$p" review 120
	[ "$STATE" = review ] && pass "a session on the pulled snapshot runs to review" ||
		fail "a session on the pulled snapshot runs to review" "state $STATE: $(session_log "$p" | tail -5) $(tail -5 "$SERVER_LOG")"
done
api GET "/api/v1/sessions/$P1"
o1="$(jraw .outcome)"
api GET "/api/v1/sessions/$P2"
o2="$(jraw .outcome)"
[ "$(echo "$o1" | jq -r .session.snapshot)" = "$snap" ] && pass "...from the snapshot the store names" ||
	fail "...from the snapshot the store names" "$o1"
pulls=$(($(manifest_gets) - gets0))
[ "$pulls" = 1 ] && pass "two sessions needing it at once pull it once" ||
	fail "two sessions needing it at once pull it once" "$pulls manifest GETs: $(grep -c . "$TEST_TMP/reg.log") lines"
PP="$P1"
[ "$(echo "$o2" | jq -r '.pull.waited // empty')" = false ] && PP="$P2"
# one of them pulled; the other waited for that pull or, admitted after
# it ended, found the snapshot here (no pull key)
pulled="" other=""
for o in "$o1" "$o2"; do
	if [ "$(echo "$o" | jq -r '.pull.layers_fetched // empty')" = 2 ] &&
		[ "$(echo "$o" | jq -r .pull.waited)" = false ] && [ -z "$pulled" ]; then
		pulled="$o"
	else
		other="$o"
	fi
done
ms_pull="$(echo "$pulled" | jq -r '.start_ms.pull // 0' 2>/dev/null)"
ms_other="$(echo "$other" | jq -r '.start_ms.pull // 0' 2>/dev/null)"
other_ok=""
if [ "$(echo "$other" | jq -r '.pull.waited // empty')" = true ]; then
	python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)' "$ms_other" && other_ok="waited"
elif [ "$(echo "$other" | jq -r 'has("pull") or (.start_ms | has("pull"))')" = false ]; then
	other_ok="found it here"
fi
if [ -n "$pulled" ] && python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)' "$ms_pull" &&
	[ "$(echo "$pulled" | jq -r '.pull.ms')" = "$ms_pull" ] && [ -n "$other_ok" ]; then
	pass "the start breakdown has the pull's time (start_ms.pull), the outcome what it fetched; the other session $other_ok"
else
	fail "the start breakdown has the pull's time (start_ms.pull), the outcome what it fetched; the other waited or found it" "$o1 // $o2"
fi
echo "INFO serve_registry: pull before the session start: $ms_pull ms; the other session $other_ok (${ms_other} ms)" >&2
events_json "$PP" | jq -e '[.events[] | select(.kind == "phase" and .data.phase == "pull" and .data.ms > 0)] | length == 1' >/dev/null &&
	pass "the session's events say the pull" || fail "the session's events say the pull" "$(events_json "$PP" | head -c 600)"
grep -q 'pulled snapshot .* from the registry' "$SERVER_LOG" && pass "the server's log says the pull" ||
	fail "the server's log says the pull" "$(tail -3 "$SERVER_LOG")"
[ -f "$TEST_TMP/data/snapshots/$snap.json" ] && pass "the snapshot is back in the data directory" ||
	fail "the snapshot is back in the data directory" "$(ls "$TEST_TMP/data/snapshots")"
api GET /api/v1/metrics
n_pull=$([ "$other_ok" = waited ] && echo 2 || echo 1)
echo "$BODY" | grep -q "warren_start_latency_ms_count{phase=\"snapshot_pull\"} $n_pull\$" &&
	pass "the start latency metric has the pull phase" || fail "the start latency metric has the pull phase" "$(echo "$BODY" | grep snapshot_pull | head -3)"
server_stop

# with a staleness policy the refresh measures the newest snapshot: the one
# the store names is pulled first, not built again
"$WARREN" snapshot rm "$snap" --data "$TEST_TMP/data" >/dev/null
"$WARREN" snapshot gc --data "$TEST_TMP/data" >/dev/null
serve_with "$REG_reg" '"staleness": {"max_behind": 5},'
server_start "$TEST_TMP/data" "$TEST_TMP/serve.json"
P3="$(submit greeter "policy" 'cat greeting.txt')"
wait_state "$P3" review 120
api GET "/api/v1/sessions/$P3"
o3="$(jraw .outcome)"
if [ "$STATE" = review ] && [ "$(echo "$o3" | jq -r .session.snapshot)" = "$snap" ] &&
	[ "$(echo "$o3" | jq -r .snapshot_policy.newest)" = fresh ] &&
	[ "$(echo "$o3" | jq -r '.pull.layers_fetched // empty')" = 2 ] &&
	[ "$(ls "$TEST_TMP/data/snapshots")" = "$snap.json" ]; then
	pass "under a staleness policy the newest snapshot is pulled, not built again"
else
	fail "under a staleness policy the newest snapshot is pulled, not built again" "state $STATE: $(echo "$o3" | jq -c '{session, snapshot_policy, pull}'); want $snap; $(ls "$TEST_TMP/data/snapshots")"
fi
# a refresh (here the API's) on a data directory lacking the store's newest
# pulls it first and keeps it rather than building it again
"$WARREN" snapshot rm "$snap" --data "$TEST_TMP/data" >/dev/null
rid="$(repo_id)"
api GET "/api/v1/repositories/$rid/builds"
nb="$(echo "$BODY" | jq '.builds | length')"
api POST "/api/v1/repositories/$rid/refresh" '{}'
b=""
for _ in $(seq 1 300); do
	api GET "/api/v1/repositories/$rid/builds"
	if [ "$(echo "$BODY" | jq '.builds | length')" -gt "$nb" ]; then
		b="$(echo "$BODY" | jq -c '.builds[0]')"
		case "$(echo "$b" | jq -r .state)" in ready | failed) break ;; esac
	fi
	sleep 0.2
done
[ "$(echo "$b" | jq -r .state)" = ready ] && [ "$(echo "$b" | jq -r .snapshot_id)" = "$snap" ] &&
	[ "$(ls "$TEST_TMP/data/snapshots")" = "$snap.json" ] &&
	pass "a refresh pulls the store's newest snapshot first and keeps it" ||
	fail "a refresh pulls the store's newest snapshot first and keeps it" "$b; $(ls "$TEST_TMP/data/snapshots")"
server_stop

# ---- the layer cache's cap (blobs.cache_max) ----------------------------------
# two more snapshots of another repository in the data directory: one in the
# registry (pushed), one only here; then a pull under a 1-byte cap
O="$TEST_TMP/other"
mkdir -p "$O"
printf '{}\n' >"$O/warren.json"
echo one >"$O/file"
g -C "$O" init -q -b main
g -C "$O" add -A
g -C "$O" commit -q -m one
other="$("$WARREN" snapshot build --quiet --data "$TEST_TMP/data" "$O" 2>&1 | tail -1)"
"$WARREN" snapshot push "$other" --data "$TEST_TMP/data" --blobs "$TEST_TMP/serve.json" >/dev/null 2>&1
echo two >"$O/file"
g -C "$O" commit -q -am two
local_only="$("$WARREN" snapshot build --quiet --data "$TEST_TMP/data" "$O" 2>&1 | tail -1)"
other_only="$(comm -23 <(jq -r '.layers[].id' "$TEST_TMP/data/snapshots/$other.json" | sort) \
	<(jq -r '.layers[].id' "$TEST_TMP/data/snapshots/$snap.json" "$TEST_TMP/data/snapshots/$local_only.json" | sort -u))"
"$WARREN" snapshot rm "$snap" --data "$TEST_TMP/data" >/dev/null
"$WARREN" snapshot gc --data "$TEST_TMP/data" >/dev/null
serve_with "$REG_reg" "" ', "cache_max": 1'
server_start "$TEST_TMP/data" "$TEST_TMP/serve.json"
P4="$(submit greeter "capped" 'cat greeting.txt')"
wait_state "$P4" review 120
gone=1
for l in $other_only; do [ -e "$TEST_TMP/data/layers/$l" ] && gone=""; done
if [ "$STATE" = review ] && [ ${#other} = 64 ] && [ -n "$other_only" ] && [ -n "$gone" ] &&
	[ ! -e "$TEST_TMP/data/snapshots/$other.json" ] && [ -e "$TEST_TMP/data/snapshots/$snap.json" ]; then
	pass "over blobs.cache_max a pull removes the least recently used snapshot the registry has, and its layers (not the one pulled)"
else
	fail "over blobs.cache_max a pull removes the least recently used snapshot the registry has" "state $STATE; other $other ($other_only); $(ls "$TEST_TMP/data/snapshots"); $(grep 'layer cache' "$SERVER_LOG" | tail -3)"
fi
[ ${#local_only} = 64 ] && [ -e "$TEST_TMP/data/snapshots/$local_only.json" ] &&
	pass "a snapshot the registry lacks is kept whatever the cap (it could not come back)" ||
	fail "a snapshot the registry lacks is kept whatever the cap" "$local_only: $(ls "$TEST_TMP/data/snapshots")"
grep -q "the layer cache (cap 1 bytes): snapshot ${other:0:12} removed" "$SERVER_LOG" &&
	pass "the server's log says which snapshot left the cache and why" ||
	fail "the server's log says which snapshot left the cache and why" "$(grep 'layer cache' "$SERVER_LOG" | tail -3)"
api POST "/api/v1/sessions/$P4/reject" '{"reason": "test"}' >/dev/null
server_stop
out="$("$WARREN" snapshot pull "$other" --data "$TEST_TMP/data" --blobs "$TEST_TMP/serve.json" --json 2>&1)"
[ "$(echo "$out" | jq -r '.layers_fetched // 0' 2>/dev/null)" -ge 1 ] 2>/dev/null && [ -e "$TEST_TMP/data/snapshots/$other.json" ] &&
	pass "...and it is pulled back when needed" || fail "...and it is pulled back when needed" "$out"
"$WARREN" snapshot rm "$local_only" --data "$TEST_TMP/data" >/dev/null
"$WARREN" snapshot rm "$other" --data "$TEST_TMP/data" >/dev/null
serve_with "$REG_reg"

# a pull that fails is the session's failure reason
"$WARREN" snapshot rm "$snap" --data "$TEST_TMP/data" >/dev/null
registry_stop_all
server_start "$TEST_TMP/data" "$TEST_TMP/serve.json"
F="$(submit greeter "third" 'cat greeting.txt')"
wait_state "$F" failed 60
api GET "/api/v1/sessions/$F"
reason="$(jget .reason)"
[ "$STATE" = failed ] && echo "$reason" | grep -q "snapshot $snap is not in the data directory; its pull from the registry failed: .*registry http://127.0.0.1" &&
	pass "a failed pull fails the session, saying why" || fail "a failed pull fails the session, saying why" "state $STATE: $reason"
server_stop

# the registry gone: the build stands, the push's failure is said
rm -rf "$TEST_TMP/data"
serve_with "http://127.0.0.1:$(free_port)"
server_start "$TEST_TMP/data" "$TEST_TMP/serve.json"
b="$(last_build)"
[ "$(echo "$b" | jq -r .state)" = ready ] && pass "a failed push does not fail the build" ||
	fail "a failed push does not fail the build" "$b"
[ "$(echo "$b" | jq -r .push.ok)" = false ] && echo "$b" | jq -r .push.error | grep -q 'registry http://127.0.0.1' &&
	pass "the build's record says the push failed and why" || fail "the build's record says the push failed and why" "$b"
id="$(repo_id)"
api GET "/api/v1/repositories/$id/builds/$(echo "$b" | jq -r .id)/log"
echo "$BODY" | grep -q 'the push of snapshot .* failed (the build stands)' &&
	pass "the build's log says the push failed" || fail "the build's log says the push failed" "$(echo "$BODY" | tail -3)"
grep -q 'push of snapshot .* to the registry failed' "$SERVER_LOG" && pass "the server's log warns" ||
	fail "the server's log warns" "$(tail -3 "$SERVER_LOG")"
server_stop
