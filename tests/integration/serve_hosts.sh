#!/bin/bash
# Three "hosts": PostgreSQL, the registry, a git server and two API servers
# (--role api) in the root network namespace, on a service address of the
# test's own (10.231.0.1, on a bridge without ports); three workers (--role
# worker), each in a network namespace of its own with a veth pair to the
# root namespace (10.231.N.0/30: .1 the root's side, .2 the worker's), no
# default route, only a route to the service address; each with its own
# data and runtime directories. Nothing of a worker's is reachable from
# another: they share the store, the registry and the git server only.
#   - sessions submitted to either API server complete on the workers;
#   - a snapshot built on one worker serves the others (pulled);
#   - kill -9 of a worker mid-turn (and its sandboxes: the host is gone):
#     the session resumes on another within the lease + 5 s;
#   - a worker dies in a session's second turn: another finishes it with
#     the first turn's work (its checkpoint); approved through an API
#     server that never ran it, its reviewed commit is pushed from that
#     API host (imported from the checkpoint); one without a registry
#     refuses the approval, saying why, and the session stays in review;
#   - SIGSTOP past the lease, then SIGCONT: its writes are refused, it
#     pushes nothing, it stops its sandbox;
#   - a worker's link cut: its session moves, it stops its sandbox on its
#     own (it cannot renew);
#   - every moved session's audit chain is intact in the store;
#   - nothing pushed twice; nothing left on any host.
# The workers enter their namespace with nsenter --net (not ip netns exec,
# which would remount /sys and hide the cgroups). SH_KEEP=DIR keeps the
# logs (servers, workers, the registry's access log) in DIR.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"
. "$(dirname "$0")/../pg_server.sh"
. "$ROOT_DIR/tests/registry_server.sh"

P="wh$$"                 # the prefix of every interface and namespace
SVC=10.231.0.1           # the service address (the store, registry, API)
NET=10.231.0.0/16        # the test's own network: nothing else in it
WORKERS="w1 w2 w3"
RT="/run/warren-test-$$" # RT-wN: each worker's runtime directory
declare -A WPID
API_PIDS=""
GIT_PID=""
NET_MADE=""

wn() { echo "${1#w}"; } # w2 -> 2
in_ns() { # NAME CMD...: CMD in worker NAME's network namespace only
	local w="$1"
	shift
	nsenter --net="/run/netns/$P-$w" "$@"
}
w_stop() { # NAME [SIGNAL]: bounded (a worker cut off may be slow to go)
	local p="${WPID[$1]:-}"
	[ -n "$p" ] || return 0
	kill -CONT "$p" 2>/dev/null
	kill -"${2:-TERM}" "$p" 2>/dev/null
	for _ in $(seq 1 150); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
	kill -9 "$p" 2>/dev/null
	wait "$p" 2>/dev/null
	WPID[$1]=""
}
w_sandboxes() { # NAME: its sandboxes' JSON list
	WARREN_RUNTIME_DIR="$RT-$1" "$WARREN" sandbox ls --all --json 2>/dev/null |
		jq -c '(if type == "array" then . else .sandboxes end)' 2>/dev/null
}
w_sandboxes_kill() { # NAME: what a dead host's sandboxes do: die
	w_sandboxes "$1" | jq -r '.[] | .init_pid' 2>/dev/null |
		while read -r p; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null; done
}
w_sandboxes_rm() { # NAME: remove what is left of a worker's sandboxes
	local n
	for n in $(w_sandboxes "$1" | jq -r '.[] | .name' 2>/dev/null); do
		WARREN_RUNTIME_DIR="$RT-$1" "$WARREN" sandbox rm "$n" >/dev/null 2>&1
	done
}
net_down() {
	local w
	for w in $WORKERS; do
		ip netns del "$P-$w" 2>/dev/null # its veth end goes with it, and the pair
		ip link del "$P-h$(wn $w)" 2>/dev/null
	done
	ip link del "${P}d" 2>/dev/null
}
cleanup() {
	local w p
	# SH_KEEP=DIR: the logs kept there (to look into a failure)
	[ -n "${SH_KEEP:-}" ] && mkdir -p "$SH_KEEP" && cp "$TEST_TMP"/*.log "$SH_KEEP/" 2>/dev/null
	for w in $WORKERS; do w_stop $w KILL; w_sandboxes_rm $w; done
	for p in $API_PIDS $GIT_PID; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	registry_stop_all
	pg_server_stop
	net_down
	for w in $WORKERS; do rm -rf "$RT-$w"; done
	rm -rf "$TEST_TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! pg_server_bin >/dev/null; then
	echo "SKIP $TEST_FILE: no PostgreSQL server binaries (install postgresql-15)" >&2
	exit 0
fi
if [ -z "$REGISTRY_BIN" ] || ! command -v htpasswd >/dev/null; then
	echo "SKIP $TEST_FILE: docker-registry or htpasswd is not installed" >&2
	exit 0
fi
for c in ip nsenter; do
	command -v $c >/dev/null || { echo "SKIP $TEST_FILE: no $c" >&2; exit 0; }
done
if ip -4 route show | grep -q '^10\.231\.'; then
	echo "SKIP $TEST_FILE: 10.231.0.0/16 is in use here ($(ip -4 route show | grep '^10\.231\.' | head -1))" >&2
	exit 0
fi

# --- the network: a bridge with the service address, a veth pair a worker
if ! ip netns add "$P-w1" 2>"$TEST_TMP/ns.err"; then
	echo "SKIP $TEST_FILE: ip netns add: $(cat "$TEST_TMP/ns.err")" >&2
	exit 0
fi
net_ok=1
{
	# a bridge without ports as the service address's device (a dummy
	# would do, but not every kernel has one)
	ip link add "${P}d" type bridge &&
		ip addr add "$SVC/32" dev "${P}d" &&
		ip link set "${P}d" up
} 2>>"$TEST_TMP/ns.err" || net_ok=0
for w in $WORKERS; do
	n="$(wn $w)"
	[ "$net_ok" = 1 ] || break
	{
		{ [ "$w" = w1 ] || ip netns add "$P-$w"; } &&
			ip link add "$P-h$n" type veth peer name "$P-n$n" netns "$P-$w" &&
			ip addr add "10.231.$n.1/30" dev "$P-h$n" &&
			ip link set "$P-h$n" up &&
			ip -n "$P-$w" link set lo up &&
			ip -n "$P-$w" addr add "10.231.$n.2/30" dev "$P-n$n" &&
			ip -n "$P-$w" link set "$P-n$n" up &&
			ip -n "$P-$w" route add "$SVC/32" via "10.231.$n.1"
	} 2>>"$TEST_TMP/ns.err" || net_ok=0
	# packets for the service address arrive on the veth: delivered here
	sysctl -qw "net.ipv4.conf.$P-h$n.rp_filter=0" 2>/dev/null
done
if [ "$net_ok" != 1 ]; then
	echo "SKIP $TEST_FILE: cannot make the test's network: $(tail -2 "$TEST_TMP/ns.err" | tr '\n' ' ')" >&2
	exit 0
fi
NET_MADE=1
routes=""
for w in $WORKERS; do
	for a in "$SVC" 10.231.1.2 10.231.2.2 10.231.3.2 "$(ip -4 -o addr show scope global | awk '{print $4}' | cut -d/ -f1 | grep -v '^10\.231\.' | head -1)" 1.1.1.1; do
		[ -n "$a" ] || continue
		ip -n "$P-$w" route get "$a" >/dev/null 2>&1 && routes="$routes $w:$a"
	done
done
# each reaches the service address and its own address; nothing else
want=" w1:$SVC w1:10.231.1.2 w2:$SVC w2:10.231.2.2 w3:$SVC w3:10.231.3.2"
[ "$routes" = "$want" ] && pass "each worker namespace routes to the service address and nothing else (no default route)" ||
	fail "each worker namespace routes to the service address and nothing else" "routes:$routes"

# --- the shared services, on the service address ---------------------------
if ! REGISTRY_HOST="$SVC" REGISTRY_LOG_LEVEL=info start_registry_htpasswd reg warren 'hosts-pw'; then
	fail "docker-registry starts on $SVC" "$(tail -5 "$TEST_TMP/reg.log")"
	exit 0
fi
printf 'hosts-pw\n' >"$TEST_TMP/pw"
chmod 600 "$TEST_TMP/pw"
PG_PORT="$(free_port)"
if ! PG_SERVER_PORT="$PG_PORT" PG_SERVER_LISTEN="$SVC" PG_SERVER_HBA="$NET" pg_server_start; then
	fail "a PostgreSQL server of the test's own on $SVC" "$PG_SERVER_WHY"
	exit 0
fi
"$PG_SERVER_BIN/psql" -q "$PG_SERVER_URL" -c "CREATE DATABASE warren" || fail "create the database" "psql failed"
STORE="postgresql://warren@$SVC:$PG_PORT/warren"
psql_q() { "$PG_SERVER_BIN/psql" -qtA "$STORE" -c "$1"; }
in_ns w2 "$PG_SERVER_BIN/psql" -qtA "$STORE" -c 'SELECT 1' 2>&1 | grep -qx 1 &&
	pass "PostgreSQL answers over TCP from a worker's namespace ($STORE)" ||
	fail "PostgreSQL answers over TCP from a worker's namespace" "$(in_ns w2 "$PG_SERVER_BIN/psql" -qtA "$STORE" -c 'SELECT 1' 2>&1 | tail -2)"

# the repository, served by git daemon: no worker reads the test's files
mkdir -p "$TEST_TMP/git"
R="$TEST_TMP/proj"
mkdir -p "$R"
printf '{}\n' >"$R/warren.json"
git -C "$R" init -q -b main
g -C "$R" add warren.json
g -C "$R" commit -q -m initial
git clone -q --bare "$R" "$TEST_TMP/git/proj.git"
GIT_PORT="$(free_port)"
git daemon --reuseaddr --listen="$SVC" --port="$GIT_PORT" --base-path="$TEST_TMP/git" --export-all --enable=receive-pack \
	"$TEST_TMP/git" >"$TEST_TMP/git.log" 2>&1 &
GIT_PID=$!
REPO_URL="git://$SVC:$GIT_PORT/proj.git"
for _ in $(seq 1 50); do in_ns w3 git ls-remote "$REPO_URL" >/dev/null 2>&1 && break; sleep 0.1; done
in_ns w3 git ls-remote "$REPO_URL" 2>/dev/null | grep -q refs/heads/main &&
	pass "the repository is served over the network ($REPO_URL)" ||
	fail "the repository is served over the network" "$(tail -3 "$TEST_TMP/git.log")"

# the two API servers (A's data directory: the tokens' first admin)
api_start() { # NAME PORT CONFIG-JSON
	mkdir -p "$TEST_TMP/$1"
	printf '%s\n' "$3" >"$TEST_TMP/$1.json"
	"$WARREN" serve --data "$TEST_TMP/$1" --listen "$SVC:$2" --config "$TEST_TMP/$1.json" --role api \
		>"$TEST_TMP/$1.log" 2>&1 &
	API_PIDS="$API_PIDS $!"
	for _ in $(seq 1 100); do curl -s -o /dev/null "http://$SVC:$2/api/v1/healthz" && break; sleep 0.1; done
}
PA="$(free_port)"
api_start api-a "$PA" "{\"store\": \"$STORE\", \"repositories\": [{\"name\": \"proj\", \"url\": \"$REPO_URL\"}]}"
for _ in $(seq 1 100); do [ -s "$TEST_TMP/api-a/admin.token" ] && break; sleep 0.1; done
PB="$(free_port)"
# B reads the registry (a session's diff, artifacts and checkpoint); A does not
api_start api-b "$PB" "{\"store\": \"$STORE\", \"blobs\": {\"registry\": \"$REG_reg\", \"repository\": \"warren/hosts\", \"username\": \"warren\", \"password_file\": \"$TEST_TMP/pw\"}}"
URL_A="http://$SVC:$PA"
URL_B="http://$SVC:$PB"
URL="$URL_A"
TOKEN="$(cat "$TEST_TMP/api-a/admin.token" 2>/dev/null)"
URL="$URL_B" api GET /api/v1/repositories
echo "$BODY" | grep -q '"proj"' && pass "two API servers on the store (B sees A's repository with A's token)" ||
	fail "two API servers on the store" "$CODE $BODY; $(tail -3 "$TEST_TMP/api-b.log")"

w_start() { # NAME: in its namespace, with its own data and runtime directories
	printf '{"store": "%s", "limits": {"max_sandboxes": 2}, "worker": {"id": "%s", "lease": "3s", "renew": "1s"},
 "blobs": {"registry": "%s", "repository": "warren/hosts", "username": "warren", "password_file": "%s"}}\n' \
		"$STORE" "$1" "$REG_reg" "$TEST_TMP/pw" >"$TEST_TMP/$1.json"
	# (nsenter execs: $! is the worker's own pid)
	nsenter --net="/run/netns/$P-$1" env WARREN_RUNTIME_DIR="$RT-$1" "$WARREN" serve --data "$TEST_TMP/$1" --listen "127.0.0.1:8080" \
		--config "$TEST_TMP/$1.json" --role worker >>"$TEST_TMP/$1.log" 2>&1 &
	WPID[$1]=$!
	for _ in $(seq 1 100); do in_ns "$1" curl -s -o /dev/null "http://127.0.0.1:8080/api/v1/healthz" && break; sleep 0.1; done
}
for w in $WORKERS; do w_start $w; done
[ "$(psql_q "SELECT count(*) FROM workers WHERE stopped_ms IS NULL OR stopped_ms = 0")" = 3 ] &&
	pass "three workers, each in its own network namespace, are registered in the store" ||
	fail "three workers are registered in the store" "$(psql_q "SELECT * FROM workers"); $(tail -3 "$TEST_TMP/w1.log")"

! in_ns w1 timeout 3 curl -s -o /dev/null "http://10.231.2.2:8080/api/v1/healthz" &&
	in_ns w2 curl -s -o /dev/null "http://127.0.0.1:8080/api/v1/healthz" &&
	pass "a worker cannot reach another's API (w2's answers in its own namespace only)" ||
	fail "a worker cannot reach another's API" "w1 reached 10.231.2.2:8080"

worker_of() { # SESSION: the worker of its last start
	events_json "$1" | jq -r '[.events[] | select(.kind == "state" and .data.state == "provisioning") | .data.worker] | last // empty'
}
worker_ip() { echo "10.231.$(wn "$1").2"; }
# the registry's access log: "METHOD PATH" of each request, with its client
reg_puts() { # the manifest PUTs answered 201: "CLIENT-IP TAG" a line
	grep -E '^[0-9.]+ - - \[[^]]*\] "PUT /v2/[^ ]*/manifests/[^ ]* HTTP/[0-9.]+" 201 ' "$TEST_TMP/reg.log" |
		sed -E 's|^([0-9.]+) .*/manifests/([^ ]+) HTTP.*|\1 \2|'
}
reg_writes_from() { # IP [FROM-LINE]: its PUT, POST, PATCH requests
	tail -n +"${2:-1}" "$TEST_TMP/reg.log" | grep -cE "^$1 - - \[[^]]*\] \"(PUT|POST|PATCH) "
}

# --- sessions submitted to either API server complete on the workers -------
# the first alone: its worker builds the snapshot (the repository's first),
# the others' sessions then find it in the store and pull it. (Sessions on
# several workers at once before any snapshot exists each build their own:
# the builds of one repository are one at a time per server, not across
# workers.)
S=("$(URL="$URL_A" submit proj "task A1" 'echo working; sleep 2; echo done >out.txt')")
wait_state "${S[0]}" review 120
for i in 2 3; do S+=("$(URL="$URL_A" submit proj "task A$i" 'echo working; sleep 2; echo done >out.txt')"); done
for i in 1 2 3; do S+=("$(URL="$URL_B" submit proj "task B$i" 'echo working; sleep 2; echo done >out.txt')"); done
ok=0
for s in "${S[@]}"; do [ -n "$s" ] && wait_state "$s" review 120 && ok=$((ok + 1)); done
ws="$(for s in "${S[@]}"; do worker_of "$s"; done | sort -u | tr '\n' ' ')"
[ "$ok" = 6 ] && pass "6 sessions submitted to API servers A and B reach review on the workers ($ws)" ||
	fail "6 sessions submitted to API servers A and B reach review on the workers" "$ok of 6; $(tail -3 "$TEST_TMP/w1.log")"
[ "$(echo "$ws" | wc -w)" -ge 2 ] && pass "sessions ran on $(echo "$ws" | wc -w) workers" || fail "sessions ran on at least two workers" "$ws"
# B's sessions seen through A, and A's through B
URL="$URL_B" api GET "/api/v1/sessions/${S[0]}"
b_sees="$(jget .state)"
api GET "/api/v1/sessions/${S[5]}"
[ "$b_sees" = review ] && [ "$(jget .state)" = review ] && pass "each API server serves the other's sessions" ||
	fail "each API server serves the other's sessions" "$b_sees / $(jget .state)"

# one build; the other workers pulled it
snap_puts="$(reg_puts | awk '$2 !~ /^ckpt-/' )"
n_snap_puts="$(echo "$snap_puts" | grep -c .)"
[ "$(psql_q "SELECT count(*) FROM snapshots")" = 1 ] && [ "$n_snap_puts" = 1 ] &&
	pass "one snapshot, built once and pushed ($(echo "$snap_puts" | awk '{print $1}' | sort -u | tr '\n' ' '))" ||
	fail "one snapshot, built once and pushed" "$(psql_q "SELECT id FROM snapshots"); PUTs: $snap_puts"
builder_ip="$(echo "$snap_puts" | awk '{print $1}' | sort -u | head -1)"
pulled=""
nopull=""
declare -A FIRST
for s in "${S[@]}"; do
	w="$(worker_of "$s")"
	[ -n "$w" ] && [ -z "${FIRST[$w]:-}" ] && FIRST[$w]="$s"
done
for w in "${!FIRST[@]}"; do
	[ "$(worker_ip "$w")" = "$builder_ip" ] && continue
	api GET "/api/v1/sessions/${FIRST[$w]}"
	if [ -n "$(jget .outcome.start_ms.pull)" ]; then pulled="$pulled $w"; else nopull="$nopull $w"; fi
done
[ -n "$pulled" ] && [ -z "$nopull" ] &&
	pass "the workers that did not build pulled the snapshot (outcome.start_ms.pull on:$pulled)" ||
	fail "the workers that did not build pulled the snapshot" "pulled:$pulled; not:$nopull; builder $builder_ip; $(jget .outcome.start_ms)"
for s in "${S[@]}"; do api POST "/api/v1/sessions/$s/reject" '{"reason": "test"}' >/dev/null; done

# --- kill -9 of a worker mid-turn: the session finishes on another ---------
K="$(URL="$URL_B" submit proj "survive a dead worker" 'echo turn-started; sleep 6; echo finished >survived.txt')"
wait_output "$K" turn-started 60
victim="$(worker_of "$K")"
t_kill=$(date +%s%N)
w_stop "$victim" KILL
w_sandboxes_kill "$victim"
wait_state "$K" review 60
t_done=$(date +%s%N)
api GET "/api/v1/sessions/$K"
heir="$(worker_of "$K")"
[ "$STATE" = review ] && [ -n "$heir" ] && [ "$heir" != "$victim" ] &&
	pass "after kill -9 of $victim the session completes on $heir ($(((t_done - t_kill) / 1000000)) ms)" ||
	fail "after kill -9 of its worker the session completes on another" "$STATE $(jget .reason) on $heir"
resumed_ms="$(events_json "$K" | jq -r --arg w "$heir" '[.events[] | select(.kind == "state" and .data.state == "provisioning" and .data.worker == $w) | .time_ms] | last // 0')"
KILL_MS=$((resumed_ms - t_kill / 1000000))
[ "$resumed_ms" -gt 0 ] && [ "$KILL_MS" -le 8000 ] &&
	pass "it runs again within the lease + 5 s ($KILL_MS ms after the kill)" ||
	fail "it runs again within the lease + 5 s" "$KILL_MS ms"
api POST "/api/v1/sessions/$K/reject" '{"reason": "test"}'
w_start "$victim"

# --- a worker dies in a follow-up: the session goes on elsewhere with the
# first turn's work (its checkpoint in the registry) ------------------------
C="$(submit proj "keep my work" 'if [ -f turn1.txt ]; then echo has-turn-1; echo two >turn2.txt; sleep 6; echo turn-two-done; else echo one >turn1.txt; echo turn-one; fi')"
wait_state "$C" review 60
api GET "/api/v1/sessions/$C"
ck_tag="$(jget .outcome.checkpoint.tag)"
[ -n "$ck_tag" ] && [ "$(curl -s -u "warren:hosts-pw" -H 'Accept: application/vnd.oci.image.manifest.v1+json' -o /dev/null -w '%{http_code}' "$REG_reg/v2/warren/hosts/manifests/$ck_tag")" = 200 ] &&
	pass "the first turn's work is checkpointed in the registry ($ck_tag)" || fail "the first turn's work is checkpointed in the registry" "$(jget .outcome.checkpoint)"
holder="$(worker_of "$C")"
URL="$URL_B" api POST "/api/v1/sessions/$C/messages" '{"text": "now the second file"}'
wait_output "$C" has-turn-1 60
t_kill=$(date +%s%N)
w_stop "$holder" KILL
w_sandboxes_kill "$holder"
wait_output "$C" turn-two-done 90
wait_state "$C" review 60
api GET "/api/v1/sessions/$C"
files="$(jget '[.outcome.result.files[].path] | sort | join(",")')"
heir="$(worker_of "$C")"
resumed_ms="$(events_json "$C" | jq -r --arg w "$heir" '[.events[] | select(.kind == "state" and .data.state == "provisioning" and .data.worker == $w) | .time_ms] | last // 0')"
FOLLOW_MS=$((resumed_ms - t_kill / 1000000))
[ "$STATE" = review ] && [ -n "$heir" ] && [ "$heir" != "$holder" ] && [ "$files" = "turn1.txt,turn2.txt" ] &&
	pass "after $holder died in the follow-up, $heir finished it with the first turn's work (both files; resumed $FOLLOW_MS ms after the kill)" ||
	fail "after its worker died in a follow-up, another finished it with the first turn's work" "$STATE on $heir; files: $files"
events_json "$C" | jq -e '[.events[] | select(.kind == "checkpoint" and .data.restored != null)] | length == 1' >/dev/null &&
	pass "its events say the checkpoint was restored" || fail "its events say the checkpoint was restored" "$(session_log "$C" | grep -i checkpoint)"

# --- approved through an API server that never ran it: the push is of the
# checkpoint's commit, from that API host --------------------------------------
C_COMMIT="$(jget .outcome.result.commit)"
URL="$URL_A" api POST "/api/v1/sessions/$C/approve"
a_code="$CODE" a_msg="$(jget .error.message)"
URL="$URL_A" api GET "/api/v1/sessions/$C"
[ "$a_code" = 409 ] && [ "$STATE" = review ] && [ "$(jget .state)" = review ] && echo "$a_msg" | grep -q "registry" &&
	pass "API server A, without a registry, refuses the approval saying why, and the session stays in review ($a_msg)" ||
	fail "API server A, without a registry, refuses the approval and the session stays in review" "$a_code $a_msg; $(jget .state)"
URL="$URL_B" api POST "/api/v1/sessions/$C/approve"
b_code="$CODE"
wait_state "$C" pushed 30
pushed_ref="$(git --git-dir="$TEST_TMP/git/proj.git" rev-parse -q --verify "refs/heads/warren/$C" 2>/dev/null)"
pushed_files="$(git --git-dir="$TEST_TMP/git/proj.git" ls-tree --name-only "refs/heads/warren/$C" 2>/dev/null | grep turn | tr '\n' ,)"
[ "$b_code" = 200 ] && [ "$STATE" = pushed ] && [ -n "$C_COMMIT" ] && [ "$pushed_ref" = "$C_COMMIT" ] && [ "$pushed_files" = "turn1.txt,turn2.txt," ] &&
	pass "approved through API server B, which never held it: warren/$C pushed at the reviewed commit ${C_COMMIT:0:12} with both turns' files" ||
	fail "approved through API server B, which never held it: the reviewed commit is pushed" "$b_code $STATE $(jget .reason); ref $pushed_ref vs $C_COMMIT; files $pushed_files; $(tail -3 "$TEST_TMP/api-b.log")"
[ "$(jget .outcome.push.commit)" = "$C_COMMIT" ] && grep -q "imported from checkpoint" "$TEST_TMP/api-b.log" &&
	pass "the push is recorded in the outcome, and B's log says it came from the checkpoint" ||
	fail "the push is recorded in the outcome" "$(jget .outcome.push); $(grep -c checkpoint "$TEST_TMP/api-b.log")"
left=""
for _ in $(seq 1 100); do left="$(w_sandboxes "$heir" | jq -r '.[].name' 2>/dev/null)"; [ -z "$left" ] && break; sleep 0.1; done
[ -z "$left" ] && pass "$heir lets the pushed session's resting sandbox go" || fail "$heir lets the pushed session's resting sandbox go" "$left"
w_start "$holder"

# --- SIGSTOP past the lease, then SIGCONT: fenced -----------------------------
F="$(submit proj "a frozen worker" 'echo turn-started; sleep 8; echo finished >f.txt')"
wait_output "$F" turn-started 60
frozen="$(worker_of "$F")"
frozen_epoch="$(psql_q "SELECT lease_epoch FROM sessions WHERE id = '$F'")"
kill -STOP "${WPID[$frozen]}"
t_stop=$(date +%s%N)
for _ in $(seq 1 100); do
	t="$(worker_of "$F")"
	[ -n "$t" ] && [ "$t" != "$frozen" ] && break
	sleep 0.2
done
thawed="$(worker_of "$F")"
STOP_MS=$((($(date +%s%N) - t_stop) / 1000000))
[ -n "$thawed" ] && [ "$thawed" != "$frozen" ] && pass "while $frozen is frozen past its lease, $thawed takes the session (after $STOP_MS ms)" ||
	fail "while a worker is frozen past its lease, another takes the session" "on $thawed"
sleep 1
reg_lines_at_thaw="$(wc -l <"$TEST_TMP/reg.log")"
kill -CONT "${WPID[$frozen]}"
wait_state "$F" review 60
api GET "/api/v1/sessions/$F"
[ "$STATE" = review ] && pass "the session completes once, on $thawed" || fail "the session completes once" "$STATE $(jget .reason)"
sleep 3
grep -q "$F: lease lost" "$TEST_TMP/$frozen.log" && pass "the thawed worker knows it lost the lease" || fail "the thawed worker knows it lost the lease" "$(tail -5 "$TEST_TMP/$frozen.log")"
left="$(w_sandboxes "$frozen" | jq -r --arg n "ws-$F" '[.[] | select(.name == $n)] | length')"
[ "$left" = 0 ] && pass "it stopped its sandbox on its own" || fail "it stopped its sandbox on its own" "$(w_sandboxes "$frozen")"
results="$(events_json "$F" | jq '[.events[] | select(.kind == "result")] | length')"
[ "$results" = 1 ] && pass "one result event: nothing of the frozen worker's was written after it lost the lease" || fail "one result event" "$results results"
grep -q "session $F: .*lease epoch [0-9-]* is stale" "$TEST_TMP/$frozen.log" &&
	pass "its late writes were refused by the store (a stale epoch)" || fail "its late writes were refused by the store" "$(grep "$F" "$TEST_TMP/$frozen.log" | tail -5)"
late="$(reg_writes_from "$(worker_ip "$frozen")" "$((reg_lines_at_thaw + 1))")"
[ "$late" = 0 ] && ! reg_puts | grep -q " ckpt-$F-e$frozen_epoch\$" &&
	pass "the thawed worker pushed nothing to the registry (no ckpt-$F-e$frozen_epoch)" ||
	fail "the thawed worker pushed nothing to the registry" "$late requests; $(reg_puts | grep "$F")"
api POST "/api/v1/sessions/$F/reject" '{"reason": "test"}'

# --- a worker's link cut: its session moves, it stops its sandbox ----------
L="$(URL="$URL_B" submit proj "a cut-off worker" 'echo turn-started; sleep 8; echo finished >cut.txt')"
wait_output "$L" turn-started 60
cut="$(worker_of "$L")"
ip link set "$P-h$(wn "$cut")" down
t_cut=$(date +%s%N)
# at once, from the cut: the session moves (another worker reaps the
# lease), the cut-off worker gives it up on its own (its renewal hangs on
# the cut connection: past a lease without one), then stops its sandbox
# (its agent's stop grace, 5 s, then the sandbox's removal)
CUT_MS=""
CUT_LOST_MS=""
CUT_SB_MS=""
for _ in $(seq 1 300); do
	now_ms=$((($(date +%s%N) - t_cut) / 1000000))
	if [ -z "$CUT_MS" ]; then
		t="$(worker_of "$L")"
		[ -n "$t" ] && [ "$t" != "$cut" ] && CUT_MS=$now_ms
	fi
	[ -z "$CUT_LOST_MS" ] && grep -q "$L: lease lost" "$TEST_TMP/$cut.log" && CUT_LOST_MS=$now_ms
	[ -z "$CUT_SB_MS" ] && [ "$(w_sandboxes "$cut" | jq -r --arg n "ws-$L" '[.[] | select(.name == $n)] | length')" = 0 ] &&
		CUT_SB_MS=$now_ms
	[ -n "$CUT_MS" ] && [ -n "$CUT_LOST_MS" ] && [ -n "$CUT_SB_MS" ] && break
	sleep 0.1
done
moved="$(worker_of "$L")"
wait_state "$L" review 60
[ "$STATE" = review ] && [ -n "$CUT_MS" ] && [ "$moved" != "$cut" ] &&
	pass "after $cut's link is cut its session moves to $moved ($CUT_MS ms) and completes" ||
	fail "after a worker's link is cut its session moves and completes" "$STATE on $moved"
[ -n "$CUT_LOST_MS" ] && [ "$CUT_LOST_MS" -le 5000 ] &&
	pass "the cut-off worker gives its lease up on its own ($CUT_LOST_MS ms after the cut: lease 3 s, renewal every 1 s)" ||
	fail "the cut-off worker gives its lease up on its own within the lease and a renewal" "${CUT_LOST_MS:-never} ms; $(tail -4 "$TEST_TMP/$cut.log")"
[ -n "$CUT_SB_MS" ] && [ "$CUT_SB_MS" -le 12000 ] && pass "the cut-off worker stopped its sandbox on its own ($CUT_SB_MS ms after the cut)" ||
	fail "the cut-off worker stopped its sandbox on its own (lease + renewal + stop grace + its removal)" "${CUT_SB_MS:-not} after 30 s; $(tail -4 "$TEST_TMP/$cut.log")"
grep -q "cannot renew" "$TEST_TMP/$cut.log" && grep -q "$L: lease lost" "$TEST_TMP/$cut.log" &&
	pass "its log says it cannot renew and lost the lease" || fail "its log says it cannot renew and lost the lease" "$(grep -E "renew|lease" "$TEST_TMP/$cut.log" | tail -4)"
ip link set "$P-h$(wn "$cut")" up
results="$(events_json "$L" | jq '[.events[] | select(.kind == "result")] | length')"
[ "$results" = 1 ] && pass "one result event for the moved session" || fail "one result event for the moved session" "$results"
api POST "/api/v1/sessions/$L/reject" '{"reason": "test"}'
w_stop "$cut"
[ -z "$(w_sandboxes "$cut" | jq -r '.[]')" ] && pass "the cut-off worker, reconnected then stopped, leaves no sandbox" ||
	fail "the cut-off worker, reconnected then stopped, leaves no sandbox" "$(w_sandboxes "$cut")"

# --- each moved session's audit chain, in the store, intact --------------------
bad=""
for s in "$K" "$C" "$F" "$L"; do
	"$WARREN" audit verify "$s" --store "$STORE" --json >"$TEST_TMP/audit-$s.json" 2>"$TEST_TMP/audit-$s.err"
	jq -e '.ok == true and .source == "store" and .records > 0 and .kinds.result >= 1' "$TEST_TMP/audit-$s.json" >/dev/null ||
		bad="$bad $s: $(cat "$TEST_TMP/audit-$s.json" "$TEST_TMP/audit-$s.err" | tr '\n' ' ' | cut -c1-200)"
done
[ -z "$bad" ] && pass "the audit chains of the 4 sessions that moved between workers are intact in the store (warren audit verify --store)" ||
	fail "the audit chains of the sessions that moved are intact" "$bad"
jq -e '.kinds.push == 1 and .kinds.decision >= 1' "$TEST_TMP/audit-$C.json" >/dev/null &&
	pass "the session approved through API server B has one push record in its chain" ||
	fail "the session approved through API server B has one push record in its chain" "$(jq -c .kinds "$TEST_TMP/audit-$C.json")"

# --- nothing pushed twice ------------------------------------------------------
dups="$(reg_puts | awk '{print $2}' | sort | uniq -d)"
n_ck="$(reg_puts | awk '$2 ~ /^ckpt-/' | wc -l)"
[ -z "$dups" ] && [ "$n_ck" -ge 1 ] && [ "$(reg_puts | awk '$2 !~ /^ckpt-/' | wc -l)" = "$n_snap_puts" ] &&
	pass "nothing pushed twice: each manifest tag PUT once ($(reg_puts | wc -l) PUTs, $n_ck checkpoints)" ||
	fail "nothing pushed twice" "twice: $dups; $(reg_puts | tr '\n' ';')"

# --- nothing left behind on any host --------------------------------------------
for w in $WORKERS; do w_stop $w; done
left="$(for w in $WORKERS; do w_sandboxes "$w" | jq -r --arg w "$w" '.[] | "\($w): \(.name)"'; done)"
[ -z "$left" ] && pass "no sandbox is left on any worker" || fail "no sandbox is left on any worker" "$left"
[ "$(psql_q "SELECT count(*) FROM workers WHERE stopped_ms IS NULL OR stopped_ms = 0")" = 0 ] &&
	pass "stopped workers are marked stopped" || fail "stopped workers are marked stopped" "$(psql_q "SELECT id, stopped_ms FROM workers")"
held="$(psql_q "SELECT id || ' ' || state || ' ' || worker_id FROM sessions WHERE worker_id IS NOT NULL" 2>/dev/null)"
[ -z "$held" ] && pass "no session holds a lease" || fail "no session holds a lease" "$held"
procs="$(for w in $WORKERS; do ip netns pids "$P-$w" 2>/dev/null; done)"
[ -z "$procs" ] && pass "no process is left in any worker's namespace" || fail "no process is left in any worker's namespace" "$(ps -o pid,args -p "$(echo $procs | tr ' ' ,)")"
net_down
[ -z "$(ip netns list | grep "^$P-")" ] && [ -z "$(ip -o link show | grep " $P")" ] &&
	pass "the namespaces, veths and the service bridge are gone" || fail "the namespaces, veths and the service bridge are gone" "$(ip netns list | grep "^$P-") $(ip -o link show | grep " $P")"
echo "serve_hosts figures: kill -9 resumed ${KILL_MS:-?} ms, follow-up resumed ${FOLLOW_MS:-?} ms, SIGSTOP taken over ${STOP_MS:-?} ms, link cut moved ${CUT_MS:-?} ms, cut lease given up ${CUT_LOST_MS:-?} ms, cut sandbox stopped ${CUT_SB_MS:-?} ms" >&2
