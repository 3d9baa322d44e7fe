#!/bin/bash
# Security: resource limits a sandbox cannot escape - pids (fork bombs),
# memory (anonymous memory, and tmpfs pages of /dev/shm and of the scratch
# layer, which would otherwise be host RAM outside the limit), disk (the
# scratch layer's size cap), CPU, and wall-clock time. After each, the host
# and warren are fine and nothing of the sandbox is left running.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/sec_lib.sh"

# json_field JSON KEY: the raw value of "KEY": in warren's --json line
json_field() { echo "$1" | grep -o "\"$2\":[^,}]*" | tail -1 | cut -d: -f2; }

# --- pids
expect_probe "--pids 64: a fork bomb is refused with EAGAIN at 64 tasks" \
	sbp --pids 64 --timeout 20s -- /probe forkbomb 64

# A shell fork bomb: watch the sandbox's pids cgroup from the host while it
# runs; the count never passes 64 and the sandbox ends within its timeout.
S="$(uniq_secs)"
t0=$(date +%s)
"$WARREN" sandbox run --pids 64 --timeout 20s -- \
	bash -c "for i in \$(seq 200); do sleep $S & done; wait" >"$TEST_TMP/bomb.out" 2>&1 &
wpid=$!
max=0
seen=0
while kill -0 "$wpid" 2>/dev/null; do
	# v1 (pids hierarchy) or v2 (unified tree), wherever pids lives
	for f in /sys/fs/cgroup/*/warren/run-"$wpid"-*/pids.current /sys/fs/cgroup/warren/run-"$wpid"-*/pids.current; do
		[ -r "$f" ] || continue
		v="$(cat "$f" 2>/dev/null)"
		seen=1
		[ -n "$v" ] && [ "$v" -gt "$max" ] && max="$v"
	done
	sleep 0.1
done
wait "$wpid"
rc=$?
elapsed=$(($(date +%s) - t0))
# gVisor: the sandbox's tasks are the Sentry's, held at 64 by RLIMIT_NPROC
# (the probe above); the cgroup also counts the Sentry's and the gofer's
# own threads (sandbox/gvisor.c: GV_PIDS_OVERHEAD, 512)
cap=64
gvisor && cap=$((64 + 512))
if [ "$seen" = 1 ] && [ "$max" -le "$cap" ] && [ "$rc" != 0 ] && [ "$elapsed" -le 25 ]; then
	pass "--pids 64: a shell fork bomb stays at <= 64 tasks and the sandbox ends ($max tasks, exit $rc, ${elapsed}s)"
else
	fail "--pids 64: a shell fork bomb stays at <= 64 tasks and the sandbox ends" \
		"max $max tasks (cgroup seen: $seen), exit $rc, ${elapsed}s: $(tail -2 "$TEST_TMP/bomb.out" | tr '\n' ' ')"
fi
sleep 0.2
left="$(pgrep -f "sleep $S" | wc -l)"
[ "$left" = 0 ] && pass "--pids: nothing of the fork bomb is left on the host" ||
	fail "--pids: nothing of the fork bomb is left on the host" "$left processes 'sleep $S'"
expect_status "after the fork bomb: warren and the host still work" 0 sb -- true

# --- memory
out="$(sbp --memory 64M --timeout 30s --json -- /probe alloc 200 2>&1)"
rc=$?
# gVisor: the kernel's OOM killer picks the Sentry, which holds every
# task's memory: the command ends with the sandbox, not always by SIGKILL
want_rc=137
gvisor && [ "$rc" != 0 ] && want_rc=$rc
if [ "$rc" = "$want_rc" ] && [ "$(json_field "$out" oom_killed)" = true ] &&
	! echo "$out" | grep -q 'RESULT alloc'; then
	pass "--memory 64M: allocating 200M is OOM-killed (137, oom_killed true)"
else
	fail "--memory 64M: allocating 200M is OOM-killed (137, oom_killed true)" \
		"exit $rc: $(echo "$out" | tail -2 | tr '\n' ' ')"
fi
expect_status "--memory 64M: a pipeline holding 200M is killed (137)" 137 \
	sb --memory 64M --timeout 30s -- sh -c 'head -c 200M /dev/zero | tail'
out="$(sb --memory 64M --timeout 30s --json -- sh -c 'head -c 200M /dev/zero > /dev/shm/fill' 2>&1)"
rc=$?
[ "$rc" != 0 ] && [ "$(json_field "$out" oom_killed)" = true ] &&
	pass "--memory 64M: tmpfs /dev/shm pages count against the limit" ||
	fail "--memory 64M: tmpfs /dev/shm pages count against the limit" "exit $rc: $(echo "$out" | tail -1)"
out="$(sb --memory 64M --disk 1G --timeout 30s --json -- sh -c 'head -c 200M /dev/zero > /workspace/fill' 2>&1)"
rc=$?
[ "$rc" != 0 ] && [ "$(json_field "$out" oom_killed)" = true ] &&
	pass "--memory 64M: the scratch layer (tmpfs) counts against the limit" ||
	fail "--memory 64M: the scratch layer (tmpfs) counts against the limit" "exit $rc: $(echo "$out" | tail -1)"
expect_output "after OOM: warren and the host still work" "^alive$" sb -- echo alive

# --- disk
out="$(sb --disk 16M --timeout 20s -- sh -c 'head -c 64M /dev/zero > /workspace/big; echo rc=$?; stat -c size=%s /workspace/big' 2>&1)"
size="$(echo "$out" | sed -n 's/^size=//p')"
if echo "$out" | grep -q "No space left on device" && echo "$out" | grep -q '^rc=[1-9]' &&
	[ -n "$size" ] && [ "$size" -le $((16 << 20)) ]; then
	pass "--disk 16M: writing 64M to /workspace stops with ENOSPC at <= 16M"
else
	fail "--disk 16M: writing 64M to /workspace stops with ENOSPC at <= 16M" "$(echo "$out" | tr '\n' ' ')"
fi
expect_status "--disk 16M: the writing command fails" 1 \
	sb --disk 16M --timeout 20s -- sh -c 'head -c 64M /dev/zero > /tmp/big'
expect_output "--disk 16M: /tmp, /root and /etc share the same cap" "No space left" \
	sb --disk 16M --timeout 20s -- sh -c 'head -c 6M /dev/zero > /tmp/a; head -c 6M /dev/zero > /root/b; head -c 6M /dev/zero > /etc/c'
big="$(find "$(runtime_dir)" "$TEST_TMP" -xdev -type f -size +8M 2>/dev/null | head -3)"
[ -z "$big" ] && pass "--disk: nothing the sandbox wrote is left on the host" ||
	fail "--disk: nothing the sandbox wrote is left on the host" "$big"

# --- CPU
expect_probe "--cpus 0.25: a spinning process gets at most ~a quarter of a CPU" \
	sbp --cpus 0.25 --timeout 20s -- /probe cpu 2 0.4
expect_probe_sees "probe sees an unlimited CPU (no --cpus)" sbp --timeout 20s -- /probe cpu 1 0.3

# real-time CPU and I/O classes are outside CFS quotas and I/O fairness:
# with them a sandbox could starve the host whatever --cpus says
expect_none "no real-time scheduling, real-time I/O or raised RTPRIO limit" "^RT" \
	sb -- sh -c 'chrt -f 50 true 2>/dev/null && echo RT-fifo; chrt -r 1 true 2>/dev/null && echo RT-rr;
		ionice -c 1 -n 0 true 2>/dev/null && echo RT-io; prlimit --rtprio=99:99 true 2>/dev/null && echo RT-rlimit; echo __END__'

# --- wall-clock time: the whole sandbox goes, daemons included
S="$(uniq_secs)"
t0=$(date +%s)
out="$(sb --timeout 2s -- sh -c "setsid sleep $S >/dev/null 2>&1 </dev/null & sleep 60" 2>&1)"
rc=$?
elapsed=$(($(date +%s) - t0))
[ "$rc" = 124 ] && [ "$elapsed" -le 8 ] && pass "--timeout 2s: the sandbox is stopped (124) in time" ||
	fail "--timeout 2s: the sandbox is stopped (124) in time" "exit $rc after ${elapsed}s: $out"
sleep 0.2
[ -z "$(pgrep -f "sleep $S")" ] && pass "--timeout: a daemonized (setsid) process is killed too" ||
	fail "--timeout: a daemonized (setsid) process is killed too" "$(pgrep -af "sleep $S")"
