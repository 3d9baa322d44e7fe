#!/bin/bash
# The first snapshot of a repository, when its first sessions reach two
# workers (`warren serve --role worker` on one PostgreSQL store, a registry
# between them) at the same moment: the store's build claim lets one of
# them build, the other waits for that build (saying so in its session's
# events) and pulls the snapshot from the registry.
#   - one build ran, across both workers' data directories (its
#     updateContentCommand's line in their build logs);
#   - both sessions complete, one on each worker, from that one snapshot;
#   - a session that waited says for which worker's build;
#   - no build claim is left in the store;
#   - a worker killed while it builds: its claim runs out after the lease
#     (3 s) and the other worker builds for its own session.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"
. "$(dirname "$0")/../pg_server.sh"
. "$ROOT_DIR/tests/registry_server.sh"
RT="/run/warren-test-$$"
. "$ROOT_DIR/tests/workers_lib.sh"
cleanup() {
	for w in w1 w2; do w_stop $w KILL; w_sandboxes_rm $w; done
	server_stop
	registry_stop_all
	pg_server_stop
	[ -n "${KEEP_TMP:-}" ] || rm -rf "$TEST_TMP"; rm -rf "$RT-w1" "$RT-w2"
}
trap cleanup EXIT

if ! pg_server_bin >/dev/null; then
	echo "SKIP $TEST_FILE: no PostgreSQL server binaries (install postgresql-15)" >&2
	exit 0
fi
if [ -z "$REGISTRY_BIN" ] || ! command -v htpasswd >/dev/null; then
	echo "SKIP $TEST_FILE: docker-registry or htpasswd is not installed" >&2
	exit 0
fi
if ! start_registry_htpasswd reg warren 'first-pw'; then
	fail "docker-registry starts" "$(tail -5 "$TEST_TMP/reg.log")"
	exit 0
fi
printf 'first-pw\n' >"$TEST_TMP/pw"
chmod 600 "$TEST_TMP/pw"
if ! workers_store; then
	fail "a PostgreSQL server of the test's own" "$WORKERS_WHY"
	exit 0
fi
BLOBS="$(printf '{"registry": "%s", "repository": "warren/first", "username": "warren", "password_file": "%s"}' \
	"$REG_reg" "$TEST_TMP/pw")"

# a build that takes a few seconds, and says once that it ran (the hook's
# output, not its text: the log may show the command too)
R="$TEST_TMP/proj"
mkdir -p "$R"
printf '{"updateContentCommand": "echo built-by-$(echo hook); sleep 3"}\n' >"$R/warren.json"
git -C "$R" init -q -b main
git -C "$R" -c user.email=t@warren -c user.name=test add -A
git -C "$R" -c user.email=t@warren -c user.name=test commit -q -m initial

w_start() { # NAME: one sandbox each, so that each takes one session
	worker_serve "$1" "$(printf '{"store": "%s", "limits": {"max_sandboxes": 1}, "worker": {"id": "%s", "lease": "3s", "renew": "1s"}, "blobs": %s}' \
		"$STORE" "$1" "$BLOBS")"
}
api_serve api "$(printf '{"store": "%s", "blobs": %s}' "$STORE" "$BLOBS")"
if [ -z "$TOKEN" ]; then
	fail "the API server starts" "$(tail -5 "$SERVER_LOG")"
	exit 0
fi
# both workers up before the repository exists: whoever takes the first
# session, or the refresh its registration queues, builds at once
w_start w1
w_start w2

api POST /api/v1/repositories "$(jq -n --arg u "$R" '{name: "proj", url: $u}')"
if [ "$CODE" != 201 ]; then
	fail "register the repository" "$CODE $BODY"
	exit 0
fi
REPO_ID="$(jget .id)"
A="$(submit proj "first a" 'echo a >a.txt')"
B="$(submit proj "first b" 'echo b >b.txt')"
ok=0
for s in "$A" "$B"; do wait_state "$s" review 120 && ok=$((ok + 1)); done
worker_of() {
	events_json "$1" | jq -r '[.events[] | select(.kind == "state" and .data.state == "provisioning") | .data.worker] | last // empty'
}
ws="$(for s in "$A" "$B"; do worker_of "$s"; done | sort -u | tr '\n' ' ')"
[ "$ok" = 2 ] && [ "$(echo "$ws" | wc -w)" = 2 ] &&
	pass "both first sessions complete, one on each worker ($ws)" ||
	fail "both first sessions complete, one on each worker" "$ok of 2 on $ws; $(tail -3 "$TEST_TMP/w1.log") $(tail -3 "$TEST_TMP/w2.log")"

# builds_in WORKER REPO-ID: the builds of the repository the worker ran
# (its refreshes' log, DATA/logs/build-<repo id>.log)
builds_in() { cat "$TEST_TMP/$1/logs/build-$2.log" 2>/dev/null | grep -c ' | built-by-hook$'; }
per="$(for w in w1 w2; do printf '%s:%s ' $w "$(builds_in $w "$REPO_ID")"; done)"
builds=$(($(builds_in w1 "$REPO_ID") + $(builds_in w2 "$REPO_ID")))
[ "$builds" = 1 ] && pass "one snapshot build ran for both workers ($per)" ||
	fail "one snapshot build ran for both workers" "$builds builds ($per)"
snaps="$(for s in "$A" "$B"; do api GET "/api/v1/sessions/$s"; jget .snapshot_id; done | sort -u | wc -l)"
[ "$snaps" = 1 ] && [ "$(psql_q "SELECT count(*) FROM snapshots WHERE repo_id = '$REPO_ID'")" = 1 ] &&
	pass "both sessions start from the one snapshot in the store" ||
	fail "both sessions start from the one snapshot in the store" "$snaps snapshot ids; $(psql_q "SELECT id FROM snapshots")"
waited="$(for s in "$A" "$B"; do events_json "$s" | jq -r '.events[] | select(.kind == "snapshot" and .data.worker != null) | .data.reason'; done | head -1)"
[ -n "$waited" ] && pass "a session that waited says whose build: \"$waited\"" ||
	fail "a session that waited says whose build" "$(for s in "$A" "$B"; do session_log "$s" | grep -i snapshot; done)"
[ "$(psql_q "SELECT count(*) FROM build_claims WHERE expires_ms >= (extract(epoch from now()) * 1000)::bigint")" = 0 ] &&
	pass "no build claim is held once the build is done" ||
	fail "no build claim is held once the build is done" "$(psql_q "SELECT * FROM build_claims")"
for s in "$A" "$B"; do api POST "/api/v1/sessions/$s/reject" '{"reason": "test"}' >/dev/null; done

# --- the builder dies holding the claim: it runs out, the other builds ----
R2="$TEST_TMP/proj2"
mkdir -p "$R2"
printf '{"updateContentCommand": "echo built-by-$(echo hook); sleep 10"}\n' >"$R2/warren.json"
git -C "$R2" init -q -b main
git -C "$R2" -c user.email=t@warren -c user.name=test add -A
git -C "$R2" -c user.email=t@warren -c user.name=test commit -q -m initial
# the rejected sessions' sandboxes gone, each worker has its slot again
for _ in $(seq 1 100); do
	[ -z "$(for w in w1 w2; do WARREN_RUNTIME_DIR="$RT-$w" "$WARREN" sandbox ls --all 2>/dev/null | tail -n +2; done)" ] && break
	sleep 0.1
done
api POST /api/v1/repositories "$(jq -n --arg u "$R2" '{name: "proj2", url: $u}')"
REPO2="$(jget .id)"
C="$(submit proj2 "second c" 'echo c >c.txt')"
D="$(submit proj2 "second d" 'echo d >d.txt')"
# the builder: the worker holding the claim, once both sessions run on a
# worker each (the other then waits for it)
builder=""
for _ in $(seq 1 300); do
	builder="$(psql_q "SELECT worker FROM build_claims WHERE repo_id = '$REPO2'")"
	[ -n "$builder" ] && [ -n "$(worker_of "$C")" ] && [ -n "$(worker_of "$D")" ] && break
	sleep 0.1
done
survivor=w1
[ "$builder" = w1 ] && survivor=w2
t_kill=$(date +%s%N)
w_stop "$builder" KILL
w_sandboxes_kill "$builder"
mine=""
for s in "$C" "$D"; do
	wait_state "$s" review 90 && [ "$(worker_of "$s")" = "$survivor" ] && mine="$s"
done
t_done=$(date +%s%N)
n_surv="$(builds_in "$survivor" "$REPO2")"
[ -n "$builder" ] && [ -n "$mine" ] && [ "$n_surv" = 1 ] &&
	pass "after $builder died building, its claim ran out and $survivor built; its session completed ($(((t_done - t_kill) / 1000000)) ms after the kill)" ||
	fail "after the builder died, its claim ran out and the other worker built" "builder ${builder:-none}; session on $survivor: ${mine:-none}; $n_surv builds there; $(tail -3 "$TEST_TMP/$survivor.log")"
for s in "$C" "$D"; do api POST "/api/v1/sessions/$s/cancel" '{}' >/dev/null; done
for w in w1 w2; do w_stop $w; done
