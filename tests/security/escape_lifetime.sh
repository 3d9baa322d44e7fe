#!/bin/bash
# Security: a sandbox's lifetime and what crosses into it. Nothing outlives
# it (rm, the end of a one-off command, the death of warren itself), and
# nothing of the caller leaks in (open descriptors, environment) - for
# one-off sandboxes and for commands started with `sandbox exec`, which also
# run with the same capabilities, filter and namespaces as init's children.
# The exec socket is for host root only.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/sec_lib.sh"

N="sec-lt-$$"
cg_dirs() { find /sys/fs/cgroup -mindepth 2 -maxdepth 3 -type d -path "*/warren/$1" 2>/dev/null; }

# --- nothing of the caller leaks in
exec 7</etc/hostname 8>"$TEST_TMP/fd8"
expect_probe "run: the caller's extra descriptors (7, 8) are not open inside" sbp -- /probe fds
WARREN_SEC_SECRET="s3cr3t-$$" expect_probe "run: the caller's environment does not leak in" \
	sbp -- /probe env WARREN_SEC_SECRET

if "$WARREN" sandbox create --name "$N" --bind "$PROBE_BIND" >/dev/null 2>&1; then
	on_exit "'$WARREN' sandbox rm '$N'"
	expect_probe "exec: the caller's extra descriptors are not open inside" \
		"$WARREN" sandbox exec "$N" -- /probe fds
	WARREN_SEC_SECRET="s3cr3t-$$" expect_probe "exec: the caller's environment does not leak in" \
		"$WARREN" sandbox exec "$N" -- /probe env WARREN_SEC_SECRET
	expect_probe "exec: same exact capabilities" "$WARREN" sandbox exec "$N" -- /probe caps
	expect_probe "exec: seccomp + no_new_privs on every thread" "$WARREN" sandbox exec "$N" -- /probe seccomp
	expect_probe "exec: the same denied syscalls" "$WARREN" sandbox exec "$N" -- /probe syscalls
	expect_probe "exec: init (holding the exec socket) cannot be traced, read or killed" \
		"$WARREN" sandbox exec "$N" -- /probe ptrace1
	expect_probe "exec: pid 1 is warren-init, no host process visible" \
		"$WARREN" sandbox exec "$N" -- /probe ns
	expect_probe "exec: TIOCSTI/TIOCLINUX refused on a pty" \
		"$WARREN" sandbox exec "$N" -- /probe tiocsti
	# the exec socket lives in a root-only directory of the host
	out="$(as_nobody "$WARREN" sandbox exec "$N" -- sh -c 'echo INSIDE' 2>&1)"
	if echo "$out" | grep -q INSIDE; then
		fail "an unprivileged host user cannot exec into a sandbox" "$out"
	else
		pass "an unprivileged host user cannot exec into a sandbox"
	fi
	out="$(as_nobody "$WARREN" sandbox rm "$N" 2>&1)"
	"$WARREN" sandbox exec "$N" -- true >/dev/null 2>&1 &&
		pass "an unprivileged host user cannot remove a sandbox" ||
		fail "an unprivileged host user cannot remove a sandbox" "$out"
else
	fail "set up: create $N" "$("$WARREN" sandbox create --name "$N" 2>&1)"
fi
exec 7<&- 8>&-

# --- rm: nothing survives, daemons and background jobs included
R="sec-lt-$$-rm"
S="$(uniq_secs)"
if "$WARREN" sandbox create --name "$R" >/dev/null 2>&1; then
	on_exit "'$WARREN' sandbox rm '$R'"
	"$WARREN" sandbox exec "$R" -- sh -c "setsid sleep $S >/dev/null 2>&1 </dev/null & sleep $S >/dev/null 2>&1 </dev/null & nohup sleep $S >/dev/null 2>&1 </dev/null &"
	sleep 0.3
	# the sandbox's processes on the host: the commands themselves, or
	# under gVisor its Sentry and gofer (the commands live in the Sentry)
	left() { if gvisor; then gvisor_procs "$R"; else pgrep -f "sleep $S"; fi; }
	if gvisor; then
		n="$("$WARREN" sandbox exec "$R" -- pgrep -c -f "sleep $S")"
		[ -n "$(left)" ] || fail "set up: the Sentry and gofer of $R" "none found"
	else
		n="$(pgrep -f "sleep $S" | wc -l)"
	fi
	[ "$n" = 3 ] || fail "set up: 3 background sleeps in $R" "found $n"
	[ -n "$(cg_dirs "$R")" ] || fail "set up: cgroups of $R exist" "none found"
	"$WARREN" sandbox rm "$R"
	rc=$?
	sleep 0.2
	[ "$rc" = 0 ] && [ -z "$(left)" ] &&
		pass "rm: no process of the sandbox survives (setsid, background, nohup)" ||
		fail "rm: no process of the sandbox survives (setsid, background, nohup)" "rm exit $rc; left: $(left | tr '\n' ' ')"
	[ -z "$(cg_dirs "$R")" ] && pass "rm: no cgroup of the sandbox is left" ||
		fail "rm: no cgroup of the sandbox is left" "$(cg_dirs "$R" | tr '\n' ' ')"
	[ -z "$(find "$(runtime_dir)/sandboxes" -maxdepth 1 -name "$R" 2>/dev/null)" ] &&
		pass "rm: no record of the sandbox is left" || fail "rm: no record of the sandbox is left" "$(runtime_dir)/sandboxes/$R"
	expect_status "rm: the sandbox is gone for exec" 2 "$WARREN" sandbox exec "$R" -- true
else
	fail "set up: create $R" "$("$WARREN" sandbox create --name "$R" 2>&1)"
fi

# --- one-off sandboxes: the end of the command is the end of everything
S="$(uniq_secs)"
ran="$(sb -- sh -c "setsid sleep $S >/dev/null 2>&1 </dev/null & (sleep $S >/dev/null 2>&1 &); sleep 0.3; pgrep -c -f '^sleep $S'" 2>&1)"
sleep 0.2
[ "$ran" = 2 ] && [ -z "$(pgrep -f "sleep $S")" ] && pass "run: daemons started by the command die when it exits" ||
	fail "run: daemons started by the command die when it exits" "inside: '$ran'; left: $(pgrep -af "sleep $S" | tr '\n' ' ')"

# --- killing warren kills its one-off sandbox
S="$(uniq_secs)"
# started from a subshell: not a job of ours, so no "Killed" notice
(setsid "$WARREN" sandbox run -- sleep "$S" >/dev/null 2>&1 &
	echo $! >"$TEST_TMP/warren.pid")
wpid="$(cat "$TEST_TMP/warren.pid")"
# the sandbox on the host: its command, or under gVisor its Sentry and
# gofer
running() { if gvisor; then gvisor_procs "run-$wpid-"; else pgrep -f "^sleep $S\$"; fi; }
on_exit 'for p in $(pgrep -f "^sleep '"$S"'\$"); do kill -9 $p; done'
for _ in $(seq 50); do
	running >/dev/null && break
	sleep 0.1
done
if running >/dev/null; then
	[ -n "$(find /sys/fs/cgroup -mindepth 2 -maxdepth 3 -type d -path "*/warren/run-$wpid-*")" ] ||
		fail "set up: the one-off sandbox's cgroup is run-$wpid-*" "not found"
	kill -9 "$wpid"
	gone=0
	for _ in $(seq 30); do
		running >/dev/null || {
			gone=1
			break
		}
		sleep 0.1
	done
	[ "$gone" = 1 ] && pass "run: SIGKILL to warren takes its sandbox down" ||
		fail "run: SIGKILL to warren takes its sandbox down" "still running: $(running | tr '\n' ' ')"
	# the next warren cleans what the killed one left
	sb -- true >/dev/null 2>&1
	left="$(find /sys/fs/cgroup -mindepth 2 -maxdepth 3 -type d -path "*/warren/run-$wpid-*" 2>/dev/null)"
	[ -z "$left" ] && pass "run: a later warren removes a killed warren's cgroups" ||
		fail "run: a later warren removes a killed warren's cgroups" "$left"
else
	fail "set up: one-off sandbox running sleep" "not found"
	kill -9 "$wpid" 2>/dev/null
fi

# --- the runtime directory (records, exec sockets, seccomp cache, base
# layer) must be root's own: one prepared by another user, a symlink, or a
# world-writable directory is refused before anything is written into it
RT="$TEST_TMP/rt"
mkdir -p "$RT/user" "$RT/open"
chown 65534:65534 "$RT/user"
chmod 777 "$RT/open"
ln -s "$RT/target" "$RT/link"
mkdir -m 755 "$RT/target"
for kind in user open link; do
	out="$(WARREN_RUNTIME_DIR="$RT/$kind" "$WARREN" sandbox run --timeout 60s -- echo RAN 2>&1)"
	rc=$?
	if [ "$rc" != 0 ] && ! echo "$out" | grep -q '^RAN$' && [ -z "$(ls -A "$RT/$kind/" 2>/dev/null)" ]; then
		pass "a runtime directory that is not root's own ($kind) is refused, nothing written into it"
	else
		fail "a runtime directory that is not root's own ($kind) is refused, nothing written into it" \
			"exit $rc: $out; contents: $(ls -A "$RT/$kind/" 2>/dev/null | tr '\n' ' ')"
	fi
done
