#!/bin/bash
# Security: the kernel surface a sandbox keeps - capabilities, the seccomp
# filter and no_new_privs, foreign syscall ABIs, kernel modules, terminal
# input injection, and the global knobs in /proc and /sys.
#
# Each check runs the posture probe (tests/security/probe.c) inside a
# sandbox; the "probe sees" checks run the same probe on the host, where
# nothing stops it, and require it to report the escape: they prove the
# in-sandbox checks are able to fail.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/sec_lib.sh"

# --- capabilities, no_new_privs, seccomp
expect_probe "caps: root inside holds exactly the kept set (prm/eff/bnd), nothing inheritable or ambient" \
	sbp -- /probe caps
expect_probe "seccomp: every thread has Seccomp 2 and NoNewPrivs 1" \
	sbp -- /probe seccomp
expect_probe "seccomp: each denied syscall gets EPERM (clone3 ENOSYS), incl. CLONE_NEWUSER in clone/unshare" \
	sbp -- /probe syscalls
expect_probe "modules: init_module/finit_module with a real image and fd are refused" \
	sbp -- /probe module
expect_probe "seccomp: i386 (int 0x80) and x32 syscalls kill the process" \
	sbp -- /probe badarch
expect_probe "the same filter holds for a command started as a non-root user" \
	sbp -- setpriv --reuid=1000 --regid=1000 --clear-groups /probe syscalls

# --- terminals
expect_probe "TIOCSTI/TIOCLINUX refused on a pty the sandbox controls (also with high cmd bits)" \
	sbp -- /probe tiocsti
if command -v script >/dev/null; then
	# script(1) gives warren a real terminal on fd 0, as a user's shell would
	expect_probe "no keystroke injection into, or theft of, the caller's terminal" \
		script -qec "'$WARREN' sandbox run --bind '$PROBE_BIND' -- /probe tiocsti-fd0" /dev/null
fi

# --- /proc and /sys
expect_probe "core_pattern, modprobe, sysrq, drop_caches, kcore, kmsg, uevent_helper out of reach" \
	sbp -- /probe procfs
expect_none "no sysfs: /sys has nothing of the host's devices or cgroups" "^[a-z]" \
	sb -- sh -c 'ls /sys 2>/dev/null; echo __END__'

# --- the probe can fail: on the host (no filter, no namespaces) it must see it
expect_probe_sees "probe sees a syscall the filter would deny (host, uid 65534)" \
	as_nobody "$HOSTPROBE" syscalls
expect_probe_sees "probe sees extra capabilities (host root)" "$HOSTPROBE" caps
expect_probe_sees "probe sees a thread without seccomp (host)" "$HOSTPROBE" seccomp
expect_probe_sees "probe sees foreign-ABI syscalls that are not killed (host)" \
	as_nobody "$HOSTPROBE" badarch
if [ "$(cat /proc/sys/dev/tty/legacy_tiocsti 2>/dev/null)" = 1 ]; then
	expect_probe_sees "probe sees TIOCSTI allowed (host, uid 65534, legacy_tiocsti=1)" \
		as_nobody "$HOSTPROBE" tiocsti
fi
