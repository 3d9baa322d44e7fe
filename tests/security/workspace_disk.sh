#!/bin/bash
# A session's disk and inode limits are its workspace's own filesystem
# (DATA/sessions/ID/layer.img, ext4 of the disk limit's size and the inode
# limit's files), enforced by the kernel at every moment the workspace
# exists: a background writer the agent leaves behind is stopped at the
# limit after the turn, a flood of empty files stops at the inode limit,
# each session gets a clear reason, and another session is unaffected.
# Nothing of it is mounted on the host; its loop devices go with it.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../integration/control_lib.sh"

greeter_remote
echo "{\"repositories\": [{\"name\": \"greeter\", \"url\": \"$REMOTE\"}]}" >"$TEST_TMP/serve.json"
D="$TEST_TMP/data"
server_start "$D" "$TEST_TMP/serve.json"
img() { echo "$D/sessions/$1/layer.img"; }
allocated() { echo $(($(stat -c %b "$(img "$1")") * 512)); }

# 1. a setsid writer left running after the turn: the kernel stops it at
# the limit while the sandbox rests in review
BG="$(submit greeter "background writer" 'setsid sh -c "sleep 2; head -c 64M /dev/zero >/workspace/bg.bin; echo rc=\$? >/workspace/bg.done" </dev/null >/dev/null 2>&1 & echo started' '{"disk": "8M"}')"
wait_state "$BG" review 60
[ "$STATE" = review ] && pass "the writer's turn ends; the session rests in review" || fail "the writer's turn ends; the session rests in review" "$STATE $(jget .reason)"
for _ in $(seq 1 50); do
	[ -n "$(sandbox_exec_in "$BG" cat /workspace/bg.done 2>/dev/null | grep rc=)" ] && break
	sleep 0.2
done
done_line="$(sandbox_exec_in "$BG" cat /workspace/bg.done)"
size="$(sandbox_exec_in "$BG" stat -c %s /workspace/bg.bin)"
[ "$done_line" != rc=0 ] && [ -n "$size" ] && [ "$size" -lt $((8 << 20)) ] &&
	pass "a background writer after the turn is stopped at the disk limit ($size bytes of 64 MiB written)" ||
	fail "a background writer after the turn is stopped at the disk limit" "done=$done_line size=$size"
[ "$(allocated "$BG")" -le $((8 << 20)) ] &&
	pass "the workspace takes no more than its limit on the host ($(allocated "$BG") bytes)" ||
	fail "the workspace takes no more than its limit on the host" "$(allocated "$BG")"
df_line="$(sandbox_exec_in "$BG" df -k /)"
total_k="$(echo "$df_line" | awk 'NR == 2 {print $2}')"
[ -n "$total_k" ] && [ "$total_k" -le 8192 ] && pass "inside, the workspace's filesystem shows its limit (${total_k} KiB)" ||
	fail "inside, the workspace's filesystem shows its limit" "$df_line"

# 2. empty files until the inode limit: the session fails, saying so
IN="$(submit greeter "inode flood" 'i=0; while [ $i -lt 5000 ]; do touch f$i 2>/dev/null || break; i=$((i+1)); done; echo made=$i' '{"disk": "64M", "inodes": 1000}')"
wait_state "$IN" failed 90
api GET "/api/v1/sessions/$IN"
reason="$(jget .reason)"
made="$(session_log "$IN" | grep -o 'made=[0-9]*' | cut -d= -f2)"
[ "$STATE" = failed ] && echo "$reason" | grep -q "inode limit exceeded" &&
	pass "the inode limit fails the session with the reason ($reason)" || fail "the inode limit fails the session with the reason" "$STATE $reason"
[ -n "$made" ] && [ "$made" -lt 1100 ] && pass "the files stop at the inode limit ($made of 5000)" || fail "the files stop at the inode limit" "made=$made"

# 3. filling the disk during the turn: the session fails with the reason
FULL="$(submit greeter "fill it" 'head -c 32M /dev/zero >big.bin; echo wrote' '{"disk": "4M"}')"
wait_state "$FULL" failed 60
api GET "/api/v1/sessions/$FULL"
reason="$(jget .reason)"
[ "$STATE" = failed ] && echo "$reason" | grep -q "disk limit exceeded" &&
	pass "a full workspace fails the session with the reason ($reason)" || fail "a full workspace fails the session with the reason" "$STATE $reason"

# 4. another session meanwhile is unaffected
OK="$(submit greeter "ordinary" 'echo fine >greeting.txt')"
wait_state "$OK" review 60
[ "$STATE" = review ] && pass "another session is unaffected" || fail "another session is unaffected" "$STATE $(jget .reason)"

# nothing mounted on the host, whatever runs
! grep -q "$D" /proc/self/mountinfo && pass "no workspace filesystem is mounted on the host" ||
	fail "no workspace filesystem is mounted on the host" "$(grep "$D" /proc/self/mountinfo)"
server_stop

# an admin's limits.max.inodes caps what a session may ask and what it gets
echo "{\"repositories\": [{\"name\": \"greeter\", \"url\": \"$REMOTE\"}], \"limits\": {\"max\": {\"inodes\": 2000}}}" >"$TEST_TMP/serve2.json"
server_start "$D" "$TEST_TMP/serve2.json"
api POST /api/v1/sessions '{"repo": "greeter", "prompt": "p", "agent": ["true"], "limits": {"inodes": 5000}}'
[ "$CODE" = 400 ] && echo "$BODY" | grep -q "limits.inodes" && pass "more inodes than limits.max.inodes are refused" || fail "more inodes than limits.max.inodes are refused" "$CODE $BODY"
CAP="$(submit greeter "capped" 'true')"
wait_state "$CAP" review 60
api GET "/api/v1/sessions/$CAP"
[ "$(jget .outcome.limits.inodes)" = 2000 ] && pass "a session gets limits.max.inodes when it asks for none" || fail "a session gets limits.max.inodes when it asks for none" "$(jget .outcome.limits)"
server_stop
loops="$(for f in "$D"/sessions/*/layer.img; do losetup -j "$f"; done)"
for _ in $(seq 1 50); do
	[ -z "$loops" ] && break
	sleep 0.1
	loops="$(for f in "$D"/sessions/*/layer.img; do losetup -j "$f"; done)"
done
[ -z "$loops" ] && pass "the workspaces' loop devices are gone with their sandboxes" || fail "the workspaces' loop devices are gone with their sandboxes" "$loops"
