#!/bin/bash
# Limits are written into the sandbox's cgroup before anything runs inside,
# on whichever cgroup version holds each controller, and the sandbox's
# processes are in that cgroup.
. "$(dirname "$0")/../lib.sh"

N="lim-$$"
"$WARREN" sandbox create --name "$N" --memory 96M --cpus 0.5 --pids 77 >/dev/null
cgfile() { # controller v1-file v2-file
	local d
	for d in "/sys/fs/cgroup/$1/warren/$N" "/sys/fs/cgroup/warren/$N" "/sys/fs/cgroup/unified/warren/$N"; do
		[ -f "$d/$2" ] && { cat "$d/$2"; return; }
		[ -f "$d/$3" ] && { cat "$d/$3"; return; }
	done
	echo missing
}
mem="$(cgfile memory memory.limit_in_bytes memory.max)"
[ "$mem" = $((96 * 1024 * 1024)) ] && pass "--memory is the cgroup's memory limit" || fail "--memory is the cgroup's memory limit" "$mem"
cpu="$(cgfile cpu cpu.cfs_quota_us cpu.max)"
case "$cpu" in 50000 | "50000 100000") pass "--cpus 0.5 is a 50ms/100ms quota" ;; *) fail "--cpus 0.5 is a 50ms/100ms quota" "$cpu" ;; esac
pids="$(cgfile pids pids.max pids.max)"
[ "$pids" = 77 ] && pass "--pids is the cgroup's pids.max" || fail "--pids is the cgroup's pids.max" "$pids"
if [ -f "/sys/fs/cgroup/memory/warren/$N/memory.memsw.limit_in_bytes" ]; then
	sw="$(cat "/sys/fs/cgroup/memory/warren/$N/memory.memsw.limit_in_bytes")"
	[ "$sw" = $((96 * 1024 * 1024)) ] && pass "swap is capped with memory (v1 memsw)" || fail "swap is capped with memory (v1 memsw)" "$sw"
fi
ipid="$("$WARREN" sandbox ls | awk -v n="$N" '$1==n {print $3}')"
grep -q "warren/$N" "/proc/$ipid/cgroup" && pass "init is in the sandbox's cgroup" || fail "init is in the sandbox's cgroup" "$(cat /proc/$ipid/cgroup)"
expect_output "the cgroup namespace hides the host's cgroup paths" "^0::/$|:/$" "$WARREN" sandbox exec "$N" -- sh -c 'cat /proc/self/cgroup | head -1'

# CPU: a busy loop for 2 s of wall time gets about half a CPU
"$WARREN" sandbox exec "$N" -- sh -c 'end=$(($(date +%s) + 2)); while [ $(date +%s) -lt $end ]; do :; done' &
sleep 0.2
t0="$(awk '{print $14+$15}' /proc/$ipid/stat)"
wait
usage_file="/sys/fs/cgroup/cpu/warren/$N/cpuacct.usage"
[ -f "$usage_file" ] || usage_file="/sys/fs/cgroup/cpuacct/warren/$N/cpuacct.usage"
stat_file="/sys/fs/cgroup/cpu/warren/$N/cpu.stat"
[ -f "$stat_file" ] || stat_file="/sys/fs/cgroup/warren/$N/cpu.stat"
throttled="$(awk '/nr_throttled|throttled_usec/ {print $2; exit}' "$stat_file" 2>/dev/null)"
[ -n "$throttled" ] && [ "$throttled" -gt 0 ] && pass "a busy loop is throttled by the CPU quota" || fail "a busy loop is throttled by the CPU quota" "throttled=$throttled ($stat_file)"
"$WARREN" sandbox rm "$N"

# memory: the OOM killer acts inside the sandbox, never outside
json="$("$WARREN" sandbox run --json --memory 48M -- sh -c 'x=$(head -c 300M /dev/zero | tr "\0" a); echo survived' 2>/dev/null | tail -1)"
case "$json" in *'"oom_killed":true'*) pass "the memory limit kills inside and is reported" ;; *) fail "the memory limit kills inside and is reported" "$json" ;; esac
case "$json" in *'"exit_code":137'*) pass "an OOM-killed command exits 137" ;; *) fail "an OOM-killed command exits 137" "$json" ;; esac
kill -0 $$ && pass "the host shell survives the sandbox's OOM" || fail "the host shell survives the sandbox's OOM" ""
