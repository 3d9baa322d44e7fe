#!/bin/bash
# A submitter cannot lift its own limits: with no limits.max configured,
# built-in maximums derived from the host apply (memory half the host's,
# CPUs three quarters of them, 16384 pids, a 24 h lifetime, a quarter of the
# data filesystem's disk); a request above one is refused (400, naming the
# limit) and a session that asks for nothing gets them as caps (a CPU cap
# and a disk limit by default). Only an admin's configuration raises them.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../integration/control_lib.sh"

greeter_remote
echo "{\"repositories\": [{\"name\": \"greeter\", \"url\": \"$REMOTE\"}]}" >"$TEST_TMP/serve.json"
server_start "$TEST_TMP/data" "$TEST_TMP/serve.json"
api POST /api/v1/tokens '{"user": "sam", "role": "submitter"}'
ADMIN="$TOKEN"
TOKEN="$(jget .token)"

asks() { # NAME LIMITS-JSON KEY: a request above the built-in maximum is refused
	api POST /api/v1/sessions "$(jq -n --argjson l "$2" '{repo: "greeter", prompt: "p", agent: ["true"], limits: $l}')"
	[ "$CODE" = 400 ] && echo "$BODY" | grep -q "limits.$3" &&
		pass "a submitter's $1 is refused" || fail "a submitter's $1 is refused" "$CODE $BODY"
}
asks "memory of 1T" '{"memory": "1T"}' memory
asks "4194304 pids" '{"pids": 4194304}' pids
asks "lifetime of 100000h" '{"lifetime": "100000h"}' lifetime
asks "64 CPUs" '{"cpus": 64}' cpus
asks "disk of 100T" '{"disk": "100T"}' disk

S="$(submit greeter "no limits asked" 'true')"
wait_state "$S" review 30
api GET "/api/v1/sessions/$S"
host_mem=$(($(awk '/^MemTotal/ {print $2}' /proc/meminfo) * 1024))
mem="$(jget .outcome.limits.memory)"
cpus="$(jget .outcome.limits.cpus)"
disk="$(jget .outcome.limits.disk)"
[ -n "$mem" ] && [ "$mem" -le $((host_mem / 2)) ] && pass "a session's memory stays within half the host's" || fail "a session's memory stays within half the host's" "$mem of $host_mem"
awk -v c="$cpus" -v n="$(nproc)" 'BEGIN {exit !(c > 0 && c <= n * 0.75 + 0.001 || (n == 1 && c == 1))}' &&
	pass "a session gets a CPU cap by default ($cpus of $(nproc))" || fail "a session gets a CPU cap by default" "cpus=$cpus"
[ -n "$disk" ] && [ "$disk" -gt 0 ] && pass "a session gets a disk limit by default" || fail "a session gets a disk limit by default" "$(jget .outcome.limits)"
server_stop

# an admin's limits.max raises a maximum
TOKEN="$ADMIN"
echo "{\"limits\": {\"max\": {\"memory\": \"2T\"}}, \"repositories\": [{\"name\": \"greeter\", \"url\": \"$REMOTE\"}]}" >"$TEST_TMP/serve2.json"
server_start "$TEST_TMP/data" "$TEST_TMP/serve2.json"
api POST /api/v1/sessions '{"repo": "greeter", "prompt": "p", "agent": ["true"], "limits": {"memory": "1T"}}'
[ "$CODE" = 201 ] && pass "an admin's limits.max raises the memory maximum" || fail "an admin's limits.max raises the memory maximum" "$CODE $BODY"
S2="$(jget .id)"
[ -n "$S2" ] && api POST "/api/v1/sessions/$S2/cancel"
api POST /api/v1/sessions '{"repo": "greeter", "prompt": "p", "agent": ["true"], "limits": {"pids": 4194304}}'
[ "$CODE" = 400 ] && pass "the other built-in maximums still apply" || fail "the other built-in maximums still apply" "$CODE $BODY"
server_stop
