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
procs="$(pgrep -af 'warren-init' | grep -v pgrep)"
[ -z "$procs" ] && pass "no warren-init process left" || fail "no warren-init process left" "$procs"
mounts="$(grep -E 'warren' /proc/self/mountinfo)"
[ -z "$mounts" ] && pass "no mount left" || fail "no mount left" "$mounts"
tmps="$(find /tmp -maxdepth 1 -name 'warren-test.*' 2>/dev/null)"
[ -z "$tmps" ] && pass "no test temp directory left" || fail "no test temp directory left" "$tmps"
works="$(find /tmp -maxdepth 3 -name '*.warren-work' 2>/dev/null)"
[ -z "$works" ] && pass "no overlay work directory left" || fail "no overlay work directory left" "$works"
