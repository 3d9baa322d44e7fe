#!/bin/bash
# Workers on one PostgreSQL store (`warren serve --role worker`), each with
# its data and runtime directories of its own, behind an API server
# (--role api). A worker runs only what it claimed, with a lease (3 s
# here, renewed every second) and an epoch that fences every write:
#   - sessions submitted to the API server complete on the workers;
#   - kill -9 of a worker (and of its sandboxes: the host is gone) mid-turn:
#     the other worker reaps the lease, the session goes back to the queue
#     and completes there, within the lease and a few seconds;
#   - SIGSTOP of a worker past its lease, then SIGCONT: the session has
#     moved to the other worker; the frozen one's writes are refused, it
#     stops its sandbox on its own, and the session ends once, elsewhere;
#   - the registry's gc over the store (`snapshot gc --config`) from a host
#     with nothing of its own keeps what the store references and takes
#     an older epoch's checkpoint.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"
. "$(dirname "$0")/../pg_server.sh"
. "$ROOT_DIR/tests/registry_server.sh"
# each worker's runtime directory, as a host of its own would have
RT="/run/warren-test-$$"
. "$ROOT_DIR/tests/workers_lib.sh"
cleanup() {
	for w in w1 w2; do w_stop $w KILL; w_sandboxes_rm $w; done
	server_stop
	registry_stop_all
	pg_server_stop
	rm -rf "$TEST_TMP" "$RT-w1" "$RT-w2"
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
# the snapshots' registry: a build on one worker serves the others
if ! start_registry_htpasswd reg warren 'workers-pw'; then
	fail "docker-registry starts" "$(tail -5 "$TEST_TMP/reg.log")"
	exit 0
fi
printf 'workers-pw\n' >"$TEST_TMP/pw"
chmod 600 "$TEST_TMP/pw"
if ! workers_store; then
	fail "a PostgreSQL server of the test's own" "$WORKERS_WHY"
	exit 0
fi

R="$TEST_TMP/proj"
mkdir -p "$R"
printf '{}\n' >"$R/warren.json"
git -C "$R" init -q -b main
git -C "$R" -c user.email=t@warren -c user.name=test add -A
git -C "$R" -c user.email=t@warren -c user.name=test commit -q -m initial

# the API server (its data directory: the tokens' first admin)
BLOBS="$(printf '{"registry": "%s", "repository": "warren/workers", "username": "warren", "password_file": "%s"}' \
	"$REG_reg" "$TEST_TMP/pw")"
api_serve api "$(printf '{"store": "%s", "repositories": [{"name": "proj", "url": "%s"}], "blobs": %s}' "$STORE" "$R" "$BLOBS")"

w_start() { # NAME
	worker_serve "$1" "$(printf '{"store": "%s", "limits": {"max_sandboxes": 2}, "worker": {"id": "%s", "lease": "3s", "renew": "1s"}, "blobs": %s}' \
		"$STORE" "$1" "$BLOBS")"
}
worker_of() { # SESSION: the worker of its last start
	events_json "$1" | jq -r '[.events[] | select(.kind == "state" and .data.state == "provisioning") | .data.worker] | last // empty'
}
# w1 alone first: it builds the snapshot (and pushes it to the registry)
w_start w1
P0="$(submit proj "the first" 'echo first >first.txt')"
wait_state "$P0" review 120
w_start w2
# a session while both are idle: w1 has its snapshot cached, w2 would pull
P1="$(submit proj "cached" 'echo cached >cached.txt')"
wait_state "$P1" review 60
[ "$(worker_of "$P1")" = w1 ] && [ ! -e "$TEST_TMP/w2/snapshots" -o -z "$(ls "$TEST_TMP/w2/snapshots" 2>/dev/null | grep json)" ] &&
	pass "a worker with the snapshot cached takes the session before one that would pull it" ||
	fail "a worker with the snapshot cached takes the session before one that would pull it" "ran on $(worker_of "$P1")"
for s in "$P0" "$P1"; do api POST "/api/v1/sessions/$s/reject" '{"reason": "test"}' >/dev/null; done
grep -q "role worker" "$TEST_TMP/w1.log" && grep -q "worker w1" "$TEST_TMP/w1.log" &&
	pass "two workers on the API server's store (--role worker)" || fail "two workers on the API server's store" "$(tail -5 "$TEST_TMP/w1.log")"
[ "$(psql_q "SELECT count(*) FROM workers WHERE stopped_ms IS NULL OR stopped_ms = 0")" = 2 ] &&
	pass "both are registered in the store" || fail "both are registered in the store" "$(psql_q "SELECT * FROM workers")"

# --- sessions through the API server complete on the workers ---------------
S=()
for i in 1 2 3 4; do
	S+=("$(submit proj "task $i" 'echo working; sleep 1; echo done >out.txt')")
done
ok=0
for s in "${S[@]}"; do wait_state "$s" review 120 && ok=$((ok + 1)); done
ws="$(for s in "${S[@]}"; do worker_of "$s"; done | sort -u | tr '\n' ' ')"
[ "$ok" = 4 ] && pass "4 sessions submitted to the API server reach review on the workers ($ws)" ||
	fail "4 sessions submitted to the API server reach review on the workers" "$ok of 4; $(tail -3 "$TEST_TMP/w1.log") $(tail -3 "$TEST_TMP/w2.log")"
[ "$(echo "$ws" | wc -w)" = 2 ] && pass "both workers ran sessions" || fail "both workers ran sessions" "$ws"
epochs="$(psql_q "SELECT min(lease_epoch) FROM sessions WHERE id IN ('${S[0]}','${S[1]}','${S[2]}','${S[3]}')")"
[ "${epochs:-0}" -ge 1 ] && pass "each session was claimed (lease epoch ${epochs} or more)" || fail "each session was claimed" "$epochs"
for s in "${S[@]}"; do api POST "/api/v1/sessions/$s/reject" '{"reason": "test"}' >/dev/null; done

# --- a follow-up taken by the API server goes to the resting sandbox --------
U="$(submit proj "two turns" 'if [ -f /tmp/turn-1 ]; then echo same-sandbox-turn; else : >/tmp/turn-1; echo first-turn; fi')"
wait_state "$U" review 60
holder="$(worker_of "$U")"
api POST "/api/v1/sessions/$U/messages" '{"text": "and again"}'
wait_output "$U" same-sandbox-turn 60
wait_state "$U" review 60
n_prov="$(events_json "$U" | jq '[.events[] | select(.kind == "state" and .data.state == "provisioning")] | length')"
session_log "$U" | grep -q same-sandbox-turn && [ "$n_prov" = 1 ] && [ "$STATE" = review ] &&
	pass "a follow-up through the API server runs in the resting sandbox on $holder" ||
	fail "a follow-up through the API server runs in the resting sandbox" "$STATE, $n_prov provisionings; $(session_log "$U" | tail -4)"
api POST "/api/v1/sessions/$U/reject" '{"reason": "test"}' >/dev/null

# --- kill -9 of a worker mid-turn: the session finishes on the other -------
K="$(submit proj "survive a dead worker" 'echo turn-started; sleep 6; echo finished >survived.txt')"
wait_output "$K" turn-started 60
victim="$(worker_of "$K")"
other=w1
[ "$victim" = w1 ] && other=w2
t_kill=$(date +%s%N)
w_stop "$victim" KILL
w_sandboxes_kill "$victim"
wait_state "$K" review 60
t_done=$(date +%s%N)
api GET "/api/v1/sessions/$K"
[ "$STATE" = review ] && [ "$(worker_of "$K")" = "$other" ] &&
	pass "after kill -9 of $victim the session completes on $other ($(((t_done - t_kill) / 1000000)) ms)" ||
	fail "after kill -9 of its worker the session completes on the other" "$STATE $(jget .reason) on $(worker_of "$K")"
log="$(session_log "$K")"
echo "$log" | grep -q "lost its lease" && pass "its events say the worker lost its lease" || fail "its events say the worker lost its lease" "$(echo "$log" | grep state)"
resumed_ms="$(events_json "$K" | jq -r --arg w "$other" '[.events[] | select(.kind == "state" and .data.state == "provisioning" and .data.worker == $w) | .time_ms] | last // 0')"
[ "$resumed_ms" -gt 0 ] && [ $((resumed_ms - t_kill / 1000000)) -le 8000 ] &&
	pass "it runs again within the lease + 5 s ($((resumed_ms - t_kill / 1000000)) ms after the kill)" ||
	fail "it runs again within the lease + 5 s" "$((resumed_ms - t_kill / 1000000)) ms"
api POST "/api/v1/sessions/$K/reject" '{"reason": "test"}'
# the dead worker comes back: its previous life's sandboxes go
w_start "$victim"

# --- a worker dies in a follow-up: the session goes on elsewhere with the
# committed work of its first turn (its checkpoint in the registry) --------
C="$(submit proj "keep my work" 'if [ -f turn1.txt ]; then echo has-turn-1; echo two >turn2.txt; sleep 6; echo turn-two-done; else echo one >turn1.txt; echo turn-one; fi')"
wait_state "$C" review 60
api GET "/api/v1/sessions/$C"
ck_tag="$(jget .outcome.checkpoint.tag)"
[ -n "$ck_tag" ] && curl -s -u "warren:workers-pw" -H 'Accept: application/vnd.oci.image.manifest.v1+json' -o /dev/null -w '%{http_code}' "$REG_reg/v2/warren/workers/manifests/$ck_tag" | grep -q 200 &&
	pass "the first turn's work is checkpointed in the registry ($ck_tag)" || fail "the first turn's work is checkpointed in the registry" "$(jget .outcome.checkpoint)"
holder="$(worker_of "$C")"
heir=w1
[ "$holder" = w1 ] && heir=w2
api POST "/api/v1/sessions/$C/messages" '{"text": "now the second file"}'
wait_output "$C" has-turn-1 60
w_stop "$holder" KILL
w_sandboxes_kill "$holder"
wait_output "$C" turn-two-done 90
wait_state "$C" review 60
api GET "/api/v1/sessions/$C"
files="$(jget '[.outcome.result.files[].path] | sort | join(",")')"
[ "$STATE" = review ] && [ "$(worker_of "$C")" = "$heir" ] && [ "$files" = "turn1.txt,turn2.txt" ] &&
	pass "after $holder died in the follow-up, $heir finished it with the first turn's work (the result holds both files)" ||
	fail "after its worker died in a follow-up, another finished it with the first turn's work" "$STATE on $(worker_of "$C"); files: $files"
# the diff, through the API server, which has no file of the session's:
# the worker checkpointed it to the registry
diff_text="$(curl -s -H "Authorization: Bearer $TOKEN" "$URL/api/v1/sessions/$C/diff")"
echo "$diff_text" | grep -q '^+++ b/turn1.txt' && echo "$diff_text" | grep -q '^+++ b/turn2.txt' &&
	pass "the API server serves the diff a worker wrote (from the registry)" || fail "the API server serves the diff a worker wrote" "$(echo "$diff_text" | head -5)"
events_json "$C" | jq -e '[.events[] | select(.kind == "checkpoint" and .data.restored != null)] | length == 1' >/dev/null &&
	pass "its events say the checkpoint was restored" || fail "its events say the checkpoint was restored" "$(session_log "$C" | grep -i checkpoint)"
api POST "/api/v1/sessions/$C/reject" '{"reason": "test"}'
w_start "$holder"

# --- SIGSTOP past the lease, then SIGCONT: fenced -----------------------------
F="$(submit proj "a frozen worker" 'echo turn-started; sleep 8; echo finished >f.txt')"
wait_output "$F" turn-started 60
frozen="$(worker_of "$F")"
thawed=w1
[ "$frozen" = w1 ] && thawed=w2
frozen_epoch="$(psql_q "SELECT lease_epoch FROM sessions WHERE id = '$F'")"
kill -STOP "${WPID[$frozen]}"
# another worker takes it over after the lease
for _ in $(seq 1 100); do [ "$(worker_of "$F")" = "$thawed" ] && break; sleep 0.2; done
[ "$(worker_of "$F")" = "$thawed" ] && pass "while $frozen is frozen past its lease, $thawed takes the session" ||
	fail "while a worker is frozen past its lease, another takes the session" "on $(worker_of "$F")"
kill -CONT "${WPID[$frozen]}"
wait_state "$F" review 60
api GET "/api/v1/sessions/$F"
[ "$STATE" = review ] && pass "the session completes once, on $thawed" || fail "the session completes once" "$STATE $(jget .reason)"
sleep 3
grep -q "$F: lease lost" "$TEST_TMP/$frozen.log" && pass "the thawed worker knows it lost the lease" || fail "the thawed worker knows it lost the lease" "$(tail -5 "$TEST_TMP/$frozen.log")"
left="$(WARREN_RUNTIME_DIR="$RT-$frozen" "$WARREN" sandbox ls --all 2>/dev/null | grep -c "ws-$F")"
[ "$left" = 0 ] && pass "it stopped its sandbox on its own" || fail "it stopped its sandbox on its own" "$(WARREN_RUNTIME_DIR="$RT-$frozen" "$WARREN" sandbox ls --all)"
stale="$(events_json "$F" | jq --argjson e "${frozen_epoch:-0}" '[.events[] | select(.kind == "output" and .data.line == "finished")] | length')"
results="$(events_json "$F" | jq '[.events[] | select(.kind == "result")] | length')"
[ "$results" = 1 ] && pass "one result: nothing of the frozen worker's was written after it lost the lease" || fail "one result" "$results results"
grep -q "session $F: lease epoch [0-9-]* is stale" "$TEST_TMP/$frozen.log" &&
	pass "its late writes were refused by the store (a stale epoch)" || fail "its late writes were refused by the store" "$(grep "$F" "$TEST_TMP/$frozen.log" | tail -5)"
api POST "/api/v1/sessions/$F/reject" '{"reason": "test"}'

for w in w1 w2; do w_stop $w; done
left="$(for w in w1 w2; do WARREN_RUNTIME_DIR="$RT-$w" "$WARREN" sandbox ls --all 2>/dev/null | tail -n +2; done)"
[ -z "$left" ] && pass "no sandbox is left on any worker" || fail "no sandbox is left on any worker" "$left"
[ "$(psql_q "SELECT count(*) FROM workers WHERE stopped_ms IS NULL OR stopped_ms = 0")" = 0 ] &&
	pass "stopped workers are marked stopped" || fail "stopped workers are marked stopped" "$(psql_q "SELECT id, stopped_ms FROM workers")"

# --- the registry's gc over every worker, from the store (PostgreSQL) --------
# (src/registry/gc.c with --config: the API server's configuration, its
# store and its blobs), from a host whose data directory holds nothing:
# every snapshot the store has stays, each session's recorded checkpoint
# with its bundle and artifacts (layers of its manifest) stays, and the
# first worker's checkpoint of C (an older epoch) goes
api GET "/api/v1/sessions/$C"
ck_c="$(jget .outcome.checkpoint.tag)"
bundle_c="$(jget .outcome.checkpoint.bundle)"
diff_c="$(jget '.outcome.checkpoint.artifacts["diff.patch"].digest')"
reg_status() { # KIND NAME
	curl -s -o /dev/null -w '%{http_code}' -u warren:workers-pw -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
		$([ "$1" = blobs ] && echo -I) "$REG_reg/v2/warren/workers/$1/$2"
}
curl -s -u warren:workers-pw -H 'Accept: application/vnd.oci.image.manifest.v1+json' "$REG_reg/v2/warren/workers/manifests/$ck_c" |
	jq -e --arg d "$diff_c" --arg b "$bundle_c" '[.layers[].digest] | index($b) == 0 and index($d) != null' >/dev/null &&
	pass "a checkpoint's manifest names its bundle and its artifacts" || fail "a checkpoint's manifest names its bundle and its artifacts" "$ck_c $diff_c"
mkdir -p "$TEST_TMP/gc"
out="$("$WARREN" snapshot gc --data "$TEST_TMP/gc" --blobs "$TEST_TMP/api.json" --config "$TEST_TMP/api.json" --json 2>&1)"
rc=$?
gone="$(echo "$out" | jq -r '.registry.manifests[].snapshot' 2>/dev/null | sort | tr '\n' ' ')"
snaps_ok=1
for s in $(psql_q "SELECT id FROM snapshots"); do [ "$(reg_status manifests "$s")" = 200 ] || snaps_ok=0; done
[ $rc = 0 ] && [ "$snaps_ok" = 1 ] && [ -n "$(psql_q "SELECT id FROM snapshots")" ] &&
	pass "gc --config from an empty data directory keeps every snapshot the store has" ||
	fail "gc --config from an empty data directory keeps every snapshot the store has" "rc=$rc $out"
[ "$ck_tag" != "$ck_c" ] && echo " $gone" | grep -q " $ck_tag " && [ "$(reg_status manifests "$ck_tag")" = 404 ] &&
	[ "$(reg_status manifests "$ck_c")" = 200 ] && [ "$(reg_status blobs "$bundle_c")" = 200 ] && [ "$(reg_status blobs "$diff_c")" = 200 ] &&
	pass "...takes C's older checkpoint ($ck_tag), keeps the recorded one ($ck_c) with its bundle and diff" ||
	fail "...takes C's older checkpoint, keeps the recorded one with its bundle and diff" "$ck_tag / $ck_c; gone: $gone; $out"
recorded="$(psql_q "SELECT outcome_json::json->'checkpoint'->>'tag' FROM sessions" | grep . | sort -u)"
lost=""
for t in $recorded; do [ "$(reg_status manifests "$t")" = 200 ] || lost="$lost $t"; done
[ -n "$recorded" ] && [ -z "$lost" ] && pass "every session's recorded checkpoint is still in the registry" ||
	fail "every session's recorded checkpoint is still in the registry" "lost:$lost of $recorded"
# a database that is not there: the gc stops, nothing deleted
out="$("$WARREN" snapshot gc --data "$TEST_TMP/gc" --blobs "$TEST_TMP/api.json" \
	--store "postgresql://warren@/nosuchdb?host=$PG_SERVER_DIR&port=5432" 2>&1)"
rc=$?
[ $rc != 0 ] && echo "$out" | grep -q "registry gc (nothing deleted): read the store postgresql://" &&
	[ "$(reg_status manifests "$ck_c")" = 200 ] && pass "a PostgreSQL store that cannot be read stops the gc, nothing deleted" ||
	fail "a PostgreSQL store that cannot be read stops the gc, nothing deleted" "rc=$rc $out"
