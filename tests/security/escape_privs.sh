#!/bin/bash
# Security: privilege inside and its worth outside. setuid binaries and file
# capabilities give nothing (no_new_privs); init cannot be traced or
# killed; root inside is an unprivileged host uid, so what it creates in a
# writable host bind belongs to nobody real on the host.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/sec_lib.sh"

# --- escalation through exec
expect_probe "setuid-root binary run by uid 1000 keeps euid 1000 (/tmp)" \
	sbp -- /probe setuid /tmp
expect_probe "setuid-root binary run by uid 1000 keeps euid 1000 (/workspace)" \
	sbp -- /probe setuid /workspace
expect_probe "file capabilities (security.capability xattr) give uid 1000 nothing" \
	sbp -- /probe fcaps /tmp
expect_none "host setuid binaries (su, newgrp) do not make uid 1000 root" "^0$|^uid=0" \
	sb -- setpriv --reuid=1000 --regid=1000 --clear-groups sh -c \
	'su -c "id -u" root </dev/null 2>&1; newgrp root </dev/null 2>&1; id -u; echo __END__'
# the probe can fail: on the host, without no_new_privs, the same setuid copy is root again
expect_probe_sees "probe sees a setuid binary raise uid 1000 to root (host)" "$HOSTPROBE" setuid "$TEST_TMP"

# --- init
expect_probe "pid 1 cannot be traced, read, robbed of fds or killed from inside" \
	sbp -- /probe ptrace1

# --- root inside, seen from the host
if gvisor; then
	# the sandbox's processes are the Sentry's; on the host run only the
	# Sentry (nobody, no capability) and the gofer (the slot range)
	S="$(uniq_secs)"
	(sb -- sleep "$S" >/dev/null 2>&1 &)
	for _ in $(seq 50); do
		[ -n "$(gvisor_procs run-)" ] && break
		sleep 0.1
	done
	sleep 0.5
	out="$(gvisor_uids_ok run-)" && pass "gvisor: the sandbox's host processes run as nobody or its slot range" ||
		fail "gvisor: the sandbox's host processes run as nobody or its slot range" "$out"
	for p in $(gvisor_procs run-); do kill -9 "$p"; done
fi
S="$(uniq_secs)"
gvisor && S=""
[ -n "$S" ] && (sb -- sleep "$S" >/dev/null 2>&1 &)
for _ in $(seq 50); do
	[ -n "$S" ] || break
	pid="$(pgrep -f "^sleep $S\$" | head -1)"
	[ -n "$pid" ] && break
	sleep 0.1
done
if gvisor; then
	: # above
elif [ -n "$pid" ]; then
	uids="$(awk '/^Uid:/{print $2, $3, $4, $5}' "/proc/$pid/status")"
	ok=1
	for u in $uids; do [ "$u" -ge 1000065536 ] || ok=0; done
	[ "$ok" = 1 ] && pass "root inside runs as an unprivileged host uid ($uids)" ||
		fail "root inside runs as an unprivileged host uid" "uids $uids"
	# on the host that uid is nobody in particular: root's files are
	# closed to it (its capabilities count only in its own namespace)
	out="$(setpriv --reuid="$(echo "$uids" | cut -d' ' -f2)" --regid="$(echo "$uids" | cut -d' ' -f2)" --clear-groups \
		cat /etc/shadow 2>&1)"
	echo "$out" | grep -q "Permission denied" && pass "that host uid cannot read host root's files (/etc/shadow)" ||
		fail "that host uid cannot read host root's files (/etc/shadow)" "$out"
	kill -9 "$pid"
else
	fail "set up: a sandbox running sleep" "not found"
fi

# --- a writable host bind: what root inside creates is owned by its slot uid
W="$TEST_TMP/rw"
mkdir -p "$W"
chmod 1777 "$W"
out="$(sb --bind "$W:/mnt/rw" -- sh -c 'touch /mnt/rw/made-inside && chmod 4755 /mnt/rw/made-inside; echo __END__' 2>&1)"
if [ -e "$W/made-inside" ]; then
	owner="$(stat -c %u "$W/made-inside")"
	[ "$owner" -ge 1000065536 ] && pass "a file created in a rw bind is owned by the sandbox's host uid ($owner), not root" ||
		fail "a file created in a rw bind is owned by the sandbox's host uid, not root" "owner $owner"
else
	fail "a file created in a rw bind is owned by the sandbox's host uid, not root" "not created: $out"
fi
if gvisor; then
	# the Sentry's mountinfo shows no flags: the kernel enforces them on
	# the launcher's mount of the source; a setuid-root copy in the bind
	# gives uid 1000 nothing (device nodes in binds: escape_fs.sh)
	expect_probe "binds are mounted nosuid (a setuid-root binary in a rw bind keeps euid 1000)" \
		sbp --bind "$W:/mnt/rw" -- /probe setuid /mnt/rw
else
expect_none "binds are mounted nosuid and nodev" "MISSING" \
	sb --bind "$W:/mnt/rw" -- sh -c 'l="$(grep " /mnt/rw " /proc/self/mountinfo)"; [ -n "$l" ] || echo MISSING mount; echo "$l" | grep -q nosuid || echo MISSING nosuid; echo "$l" | grep -q nodev || echo MISSING nodev; echo __END__'
fi

# --- a persistent --upper on the host: what a sandbox leaves there must not
# hand a host user the store uid, which owns every layer and upper of every
# sandbox (docs/security.md: setuid to 1000000000, "an id nothing runs as").
U="sec-pv-$$-up"
if "$WARREN" sandbox create --name "$U" --bind "$PROBE_BIND" --upper "$TEST_TMP/up-suid" >/dev/null 2>&1; then
	on_exit "'$WARREN' sandbox rm '$U'"
	"$WARREN" sandbox exec "$U" -- sh -c 'cp /probe /workspace/suid && chmod 4755 /workspace/suid; cp /probe /workspace/sgid && chmod 2755 /workspace/sgid'
	"$WARREN" sandbox rm "$U" >/dev/null 2>&1
	for f in suid sgid; do
		path="$(find "$TEST_TMP/up-suid" -name "$f" -type f 2>/dev/null | head -1)"
		if [ -z "$path" ]; then
			fail "set up: $f file in the persistent upper" "not found under $TEST_TMP/up-suid"
			continue
		fi
		out="$(as_nobody "$path" cred-child 2>&1)"
		if echo "$out" | grep -Eq "e[ug]id 10000[0-9]{5}"; then
			fail "a ${f} file left in a persistent --upper gives no host user the store uid/gid" \
				"$(ls -ln "$path" | cut -d' ' -f1,3,4) $path run by uid 65534: $(echo "$out" | grep child:)"
		else
			pass "a ${f} file left in a persistent --upper gives no host user the store uid/gid"
		fi
	done
else
	fail "set up: create $U with --upper" "$("$WARREN" sandbox create --name "$U" --upper "$TEST_TMP/up-suid" 2>&1)"
fi
