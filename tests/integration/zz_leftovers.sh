#!/bin/bash
# Runs last: after the whole suite, nothing of ours remains on the host - no
# cgroup, no sandbox record, no process, no mount, no temp directory.
. "$(dirname "$0")/../lib.sh"
trap - EXIT
rm -rf "$TEST_TMP"

"$WARREN" sandbox ls >/dev/null 2>&1 # reaps anything stale, as any warren would
[ -z "$(warren_cgroups)" ] && pass "no cgroup left" || fail "no cgroup left" "$(warren_cgroups | head -5 | tr '\n' ' ')"
[ -z "$(find /sys/fs/cgroup -maxdepth 2 -name warren -type d 2>/dev/null)" ] && pass "no warren/ cgroup parent left" || fail "no warren/ cgroup parent left" "$(find /sys/fs/cgroup -maxdepth 2 -name warren -type d)"
[ -z "$(warren_records)" ] && pass "no sandbox record left" || fail "no sandbox record left" "$(warren_records | tr '\n' ' ')"
slots="$(find /run/warren/slots /dev/shm/warren/slots -mindepth 1 2>/dev/null)"
[ -z "$slots" ] && pass "no slot claim left" || fail "no slot claim left" "$slots"
# a sandbox's init whose creator exited is the host's PID 1's child once
# killed: a zombie until that PID 1 reaps it, which it does in its own time
# (it holds nothing but its pid); a live one is a leftover at once
live_inits() {
	for p in $(pgrep -f 'warren-init'); do
		st="$(awk '/^State:/ {print $2}' "/proc/$p/status" 2>/dev/null)"
		[ -n "$st" ] && [ "$st" != Z ] && echo "$p $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"
	done
}
procs="$(live_inits)"
[ -z "$procs" ] && pass "no warren-init process left" || fail "no warren-init process left" "$procs"
for _ in $(seq 1 50); do
	[ -z "$(pgrep -f 'warren-init')" ] && break
	sleep 0.2
done
zombies="$(pgrep -af 'warren-init')"
[ -z "$zombies" ] && pass "no warren-init zombie left after 10 s" || fail "no warren-init zombie left after 10 s" "$zombies (parent $(ps -o ppid= -p "$(pgrep -f warren-init | head -1)" 2>/dev/null))"
mounts="$(grep -E 'warren' /proc/self/mountinfo)"
[ -z "$mounts" ] && pass "no mount left" || fail "no mount left" "$mounts"
tmps="$(find /tmp -maxdepth 1 -name 'warren-test.*' 2>/dev/null)"
[ -z "$tmps" ] && pass "no test temp directory left" || fail "no test temp directory left" "$tmps"
works="$(find /tmp -maxdepth 3 -name '*.warren-work' 2>/dev/null)"
[ -z "$works" ] && pass "no overlay work directory left" || fail "no overlay work directory left" "$works"
