#!/bin/bash
# Nothing in a sandbox names a host path: /proc/self/mountinfo of a
# session shows neither the data directory nor the install directory.
# The perimeter's sockets, token, relays and git client are in a tmpfs of
# the session's own that the server holds and mounts nowhere (its binds
# show "/egress", "/bin/warren-relay"); a read-only directory bind (an
# agent preset's layer, a verification's bundle and hidden tests) is an
# overlay of it, named by a relative path. The perimeter still works
# through them, and the session's tmpfs goes with it.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../integration/control_lib.sh"

# --- a read-only directory bind of a one-off sandbox --------------------------
mkdir -p "$TEST_TMP/share/sub"
echo shared >"$TEST_TMP/share/f"
out="$("$WARREN" sandbox run --timeout 60s --bind "$TEST_TMP/share:/mnt/share:ro" -- sh -c 'cat /mnt/share/f; cat /proc/self/mountinfo')"
echo "$out" | head -1 | grep -qx shared && ! echo "$out" | grep -qF "$TEST_TMP" &&
	pass "a read-only directory bind is seen, its host path is not" ||
	fail "a read-only directory bind is seen, its host path is not" "$(echo "$out" | grep -F "$TEST_TMP")"
echo "$out" | grep -E ' /mnt/share ' | grep -q ' ro,' && pass "the bind stays read-only" || fail "the bind stays read-only" "$(echo "$out" | grep /mnt/share)"

# --- a session with the broker, the egress proxy and the model gateway -------
greeter_remote
D="$TEST_TMP/data"
cat >"$TEST_TMP/serve.json" <<EOF
{"repositories": [{"name": "greeter", "url": "$REMOTE"}],
 "gateway": {"upstreams": {"chat_completions": {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "WR_TEST_MP_KEY"}}}}
EOF
WR_TEST_MP_KEY=sk-test server_start "$D" "$TEST_TMP/serve.json"
agent='cat /proc/self/mountinfo; for s in /run/warren-broker/broker.sock /run/warren-egress/proxy.sock /run/warren-gateway/gateway.sock; do [ -S $s ] && echo "socket-ok $s"; done; git ls-remote origin >/dev/null 2>&1 && echo broker-answers; sleep 30'
S="$(api POST /api/v1/sessions "$(jq -n --arg a "$agent" '{repo: "greeter", prompt: "mounts", agent: ["sh", "-c", $a], egress: ["allowed.test:443"]}')"; jget .id)"
[ -n "$S" ] && wait_output "$S" broker-answers 60
log="$(session_log "$S")"
echo "$log" | grep -q 'socket-ok /run/warren-broker/broker.sock' && echo "$log" | grep -q 'socket-ok /run/warren-egress/proxy.sock' &&
	echo "$log" | grep -q 'socket-ok /run/warren-gateway/gateway.sock' &&
	pass "the session sees the broker's, the proxy's and the gateway's sockets" || fail "the session sees the broker's, the proxy's and the gateway's sockets" "$(echo "$log" | tail -5)"
echo "$log" | grep -q broker-answers && pass "the broker answers through them (git ls-remote origin)" || fail "the broker answers through them" "$(echo "$log" | tail -5)"
mi="$(echo "$log" | sed -n 's/^stdout //p' | grep -E '^([0-9]+ ){2}[0-9]+:[0-9]+ ')"
[ -n "$mi" ] && ! echo "$mi" | grep -qF "$D" && ! echo "$mi" | grep -qF "$TEST_TMP" && ! echo "$mi" | grep -qF "$ROOT_DIR" &&
	pass "the session's mountinfo names neither the data directory nor the install directory ($(echo "$mi" | wc -l) mounts)" ||
	fail "the session's mountinfo names neither the data directory nor the install directory" "$(echo "$mi" | grep -F -e "$TEST_TMP" -e "$ROOT_DIR" | head -5)"
echo "$mi" | grep -E ' /run/warren-broker ' | grep -q ' - tmpfs ' &&
	pass "the perimeter's files are on a tmpfs of their own" || fail "the perimeter's files are on a tmpfs of their own" "$(echo "$mi" | grep warren-)"
link="$(readlink "$D/sessions/$S.broker")"
[ -S "$D/sessions/$S.broker/broker.sock" ] && echo "$link" | grep -q '^/proc/[0-9]*/fd/[0-9]*/broker$' &&
	pass "the host sees the session's files through DATA/sessions/ID.broker" || fail "the host sees the session's files through DATA/sessions/ID.broker" "$link"
! grep -qF "$D" /proc/self/mountinfo && pass "nothing of it is mounted on the host" || fail "nothing of it is mounted on the host" "$(grep -F "$D" /proc/self/mountinfo)"
api POST "/api/v1/sessions/$S/cancel" '{}'
wait_state "$S" cancelled 30
for _ in $(seq 1 50); do [ -L "$D/sessions/$S.broker" ] || break; sleep 0.1; done
[ ! -L "$D/sessions/$S.broker" ] && [ ! -L "$D/sessions/$S.egress" ] && [ ! -L "$D/sessions/$S.gateway" ] &&
	pass "the session's perimeter files go with its sandbox" || fail "the session's perimeter files go with its sandbox" "$(ls -la "$D/sessions")"
server_stop
