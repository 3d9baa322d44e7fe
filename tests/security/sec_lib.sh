# tests/security/sec_lib.sh - helpers shared by the security tests.
#
# Sourced after tests/lib.sh:
#   . "$(dirname "$0")/../lib.sh"
#   . "$(dirname "$0")/sec_lib.sh"
#
#   sb [warren options] -- CMD...             sandbox run, with --timeout 60s
#   sbp [warren options] -- /probe CHECK...   the same with the probe at /probe
#   expect_probe NAME CMD...        CMD (a probe run) must print
#                                   "RESULT <check> HELD" and exit 0
#   expect_probe_sees NAME CMD...   the same probe check run where the
#                                   sandbox is absent (on the host) must
#                                   report ESCAPE: proves the check can fail
#   on_exit CMD                     cleanup run when the test file exits
#   HOSTPROBE                       a copy of the probe runnable by any user
#   PROBE_BIND                      "HOSTPROBE:/probe:ro", for --bind
#   as_nobody CMD...                CMD as uid/gid 65534, no capabilities
#   expect_none NAME REGEX CMD...   CMD must run to its end (print __END__)
#                                   and its output must not match REGEX
#   runtime_dir, wait_for FILE REGEX, uniq_secs   small utilities (below)
#
# The probe is bound in read-only at /probe (--bind PROBE_BIND), as a
# static binary it needs nothing else inside.

# run as a test file by tests/run.sh: nothing to do on its own
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	exit 0
fi

_sec_cleanups=()
on_exit() { _sec_cleanups+=("$*"); }
_sec_cleanup() {
	local i
	for ((i = ${#_sec_cleanups[@]} - 1; i >= 0; i--)); do
		eval "${_sec_cleanups[$i]}" >/dev/null 2>&1
	done
	rm -rf "$TEST_TMP"
}
trap _sec_cleanup EXIT

if [ ! -x "$PROBE" ]; then
	fail "probe" "$PROBE missing: make $BUILD/tests/probe"
	exit 0
fi

# our own scratch dir: let the unprivileged helpers below in
chmod 711 "$TEST_TMP"
# A private copy: a rebuild of $PROBE during the run changes nothing here.
HOSTPROBE="$TEST_TMP/probe"
cp "$PROBE" "$HOSTPROBE"
chmod 755 "$HOSTPROBE"
PROBE_BIND="$HOSTPROBE:/probe:ro"

# Is this file's pass under gVisor (tests/run.sh's second pass of the
# escape probes, WARREN_SANDBOX_BACKEND=gvisor)? The few checks that look
# at a mechanism gVisor replaces (its Sentry is a kernel of its own; the
# sandbox's processes are not host processes) prove the same property
# its way there, said at each.
gvisor() { [ "${WARREN_SANDBOX_BACKEND:-}" = gvisor ]; }
# gvisor_procs NAME: the host processes of a gvisor sandbox (its Sentry and
# gofer, whose command lines name its bundle), one pid a line; NAME may
# be a prefix ("run-PID-")
gvisor_procs() { pgrep -f "runsc-(sandbox|gofer) .*sandboxes/$1[^/]*/bundle"; }
# gvisor_uids_ok NAME: the Sentry runs as host nobody with no capability,
# the gofer as the sandbox's slot range: no host process of the sandbox
# is root or the store range
gvisor_uids_ok() {
	local p u ok=0
	for p in $(gvisor_procs "$1"); do
		u="$(awk '/^Uid:/{print $3}' "/proc/$p/status")"
		ok=1
		if [ "$u" != 65534 ] && [ "$u" -lt 1000065536 ]; then
			echo "pid $p: host uid $u"
			return 1
		fi
	done
	[ "$ok" = 1 ] || { echo "no process of $1 found"; return 1; }
}

# Every sandbox of these tests has a wall-clock bound, so that a hang fails
# one check instead of the whole file (a later --timeout replaces it).
sb() { "$WARREN" sandbox run --timeout 60s "$@"; }
sbp() { "$WARREN" sandbox run --timeout 60s --bind "$PROBE_BIND" "$@"; }

# Through a shell running as nobody: setpriv resolves and executes the
# program it is given while it still holds root's privileges, so a path
# behind a 0700 directory would be reachable by setpriv but not by a user.
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups /bin/sh -c 'exec "$0" "$@"' "$@"; }

# Last lines worth showing from a probe run.
_probe_summary() {
	echo "$1" | grep -E 'ESCAPE|ERROR|RESULT|warren' | head -5 | tr '\n' ' '
}

expect_probe() {
	local name="$1"
	shift
	local out rc
	out="$("$@" 2>&1)"
	rc=$?
	out="${out//$'\r'/}"
	if [ "$rc" = 0 ] && echo "$out" | grep -Eq '^RESULT [^ ]+ HELD$'; then
		pass "$name"
	else
		fail "$name" "exit $rc: $(_probe_summary "$out")"
	fi
}

expect_probe_sees() {
	local name="$1"
	shift
	local out rc
	out="$("$@" 2>&1)"
	rc=$?
	out="${out//$'\r'/}"
	if [ "$rc" = 1 ] && echo "$out" | grep -Eq '^RESULT [^ ]+ ESCAPE'; then
		pass "$name"
	else
		fail "$name" "the probe did not see it: exit $rc: $(_probe_summary "$out")"
	fi
}

# expect_none NAME REGEX CMD...: CMD (a script ending in `echo __END__`)
# must run to its end - a sandbox that failed to start proves nothing - and
# its output must not match REGEX.
expect_none() {
	local name="$1" re="$2"
	shift 2
	local out rc
	out="$("$@" 2>&1)"
	rc=$?
	if ! echo "$out" | grep -q '^__END__$'; then
		fail "$name" "did not run to the end (exit $rc): $(echo "$out" | tail -3 | tr '\n' ' ')"
	elif echo "$out" | grep -Eq -- "$re"; then
		fail "$name" "output matched /$re/: $(echo "$out" | grep -E -- "$re" | head -3 | tr '\n' ' ')"
	else
		pass "$name"
	fi
}

# The runtime directory warren uses on this host (runtime.c).
runtime_dir() {
	if [ -n "${WARREN_RUNTIME_DIR:-}" ]; then
		echo "$WARREN_RUNTIME_DIR"
	elif [ "$(stat -f -c %T /run 2>/dev/null)" = tmpfs ]; then
		echo /run/warren
	else
		echo /dev/shm/warren
	fi
}

# wait_for FILE REGEX [TRIES]: until FILE matches (a helper said "ready").
wait_for() {
	local i
	for ((i = 0; i < ${3:-50}; i++)); do
		grep -Eq "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# A number unlikely to appear in anyone else's command line, so that
# `pgrep -f "sleep $(uniq_secs)"` finds only our processes.
uniq_secs() { echo "$((86400 + (RANDOM << 8) + ($$ & 255))).$((RANDOM % 10))"; }
