#!/bin/bash
# Security: processes, IPC and network. A sandbox sees no host process and
# cannot signal one (nor another sandbox's); it has new namespaces of every
# kind and an unprivileged uid range of its own; its network is a lone
# loopback - no route out, no host service (TCP on the host's loopback or
# address, abstract unix sockets), no raw sockets, no socket family beyond
# unix, inet, inet6 and NETLINK_ROUTE (vsock would reach the VM host); SysV
# IPC, POSIX shm and the hostname are its own.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/sec_lib.sh"

# --- namespaces and identity
ns_args=""
for ns in user mnt pid uts ipc net cgroup; do
	ns_args="$ns_args $ns:$(stat -L -c %i /proc/self/ns/$ns)"
done
# shellcheck disable=SC2086
expect_probe "new user/mnt/pid/uts/ipc/net/cgroup namespaces; pid 1 is warren-init; few pids" \
	sbp -- /probe ns $ns_args
expect_probe "root inside maps to an unprivileged slot range (never host root or the store range)" \
	sbp -- /probe idmap
# shellcheck disable=SC2086
expect_probe_sees "probe sees shared namespaces and host processes (host)" "$HOSTPROBE" ns $ns_args
expect_output "/proc/self/cgroup shows only the sandbox's own cgroup root" "^[0-9]+:[^:]*:/$" \
	sb -- cat /proc/self/cgroup
expect_none "/proc/self/cgroup names no host cgroup path" "warren|/user|/system" \
	sb -- sh -c 'cat /proc/self/cgroup; echo __END__'

# --- host processes: invisible, unsignalable
S="$(uniq_secs)"
sleep "$S" &
hostpid=$!
on_exit kill "$hostpid"
host_init="$(cat /proc/1/comm)"
expect_none "host processes are invisible (ps -e)" "sleep $S|$host_init|^ *$hostpid " \
	sb -- sh -c 'ps -eo pid,args; echo __END__'
expect_none "the host pid of a host process does not exist inside" "EXISTS" \
	sb -- sh -c "[ -e /proc/$hostpid ] && [ \"\$(cat /proc/$hostpid/cmdline 2>/dev/null | tr '\\0' ' ')\" = 'sleep $S ' ] && echo EXISTS; echo __END__"
ran="$(sb -- sh -c "kill -9 $hostpid; kill -9 -- -$hostpid; sleep 30 & kill -9 -1; echo __END__" 2>&1)"
sleep 0.2
if ! echo "$ran" | grep -q '^__END__$'; then
	fail "a host process survives kill -9 PID, kill -9 -1 and kill -9 -PGID from inside" "the sandbox did not run: $ran"
elif kill -0 "$hostpid" 2>/dev/null; then
	pass "a host process survives kill -9 PID, kill -9 -1 and kill -9 -PGID from inside"
else
	fail "a host process survives kill -9 PID, kill -9 -1 and kill -9 -PGID from inside" "host pid $hostpid is gone"
fi

# --- another sandbox's processes
A="sec-pn-$$-a"
S2="$(uniq_secs)"
if "$WARREN" sandbox create --name "$A" --bind "$PROBE_BIND" >/dev/null 2>&1; then
	on_exit "'$WARREN' sandbox rm '$A'"
	"$WARREN" sandbox exec "$A" -- sh -c "setsid sleep $S2 >/dev/null 2>&1 </dev/null &"
	sleep 0.3
	apid="$(pgrep -f "^sleep $S2\$" | head -1)"
	# gVisor: A's processes are its Sentry's, not the host's; B's kill
	# aims at the number of A's Sentry instead
	gvisor && apid="$(gvisor_procs "$A" | head -1)"
	if [ -z "$apid" ]; then
		fail "set up: a process in sandbox A" "no 'sleep $S2' on the host"
	else
		expect_none "another sandbox's processes are invisible" "sleep $S2" \
			sb -- sh -c 'ps -eo pid,args; echo __END__'
		ran="$(sb -- sh -c "kill -9 $apid; kill -9 -1; echo __END__" 2>&1)"
		sleep 0.2
		echo "$ran" | grep -q '^__END__$' && kill -0 "$apid" 2>/dev/null && pass "another sandbox's process survives kill -9 from a sandbox" ||
			fail "another sandbox's process survives kill -9 from a sandbox" "pid $apid gone"
		# and the two run as disjoint host uid ranges
		a_base="$(awk '{print $2}' "/proc/$apid/uid_map")"
		b_base="$(sb -- cat /proc/self/uid_map | awk '{print $2}')"
		if [ -n "$a_base" ] && [ -n "$b_base" ] &&
			{ [ $((a_base + 65536)) -le "$b_base" ] || [ $((b_base + 65536)) -le "$a_base" ]; }; then
			pass "two sandboxes run as disjoint host uid ranges"
		else
			fail "two sandboxes run as disjoint host uid ranges" "A $a_base, B $b_base"
		fi
		# a service on A's loopback is A's alone
		aport=$((20000 + RANDOM % 20000))
		"$WARREN" sandbox exec "$A" -- sh -c "/probe tcp-listen 127.0.0.1 $aport 30 >/tmp/l.out 2>&1 &
			for i in \$(seq 50); do grep -q ready /tmp/l.out && break; sleep 0.1; done"
		expect_probe_sees "probe sees a service on sandbox A's loopback (from A)" \
			"$WARREN" sandbox exec "$A" -- /probe connect 127.0.0.1 "$aport"
		expect_probe "another sandbox's loopback services are unreachable" \
			sbp -- /probe connect 127.0.0.1 "$aport"
		if gvisor; then
			out="$(gvisor_uids_ok "$A")" &&
				pass "gvisor: A's host processes run as nobody or its slot range" ||
				fail "gvisor: A's host processes run as nobody or its slot range" "$out"
		else
			uid="$(awk '/^Uid:/{print $3}' "/proc/$apid/status")"
			[ -n "$uid" ] && [ "$uid" -ge 1000065536 ] &&
				pass "root inside is an unprivileged uid on the host ($uid)" ||
				fail "root inside is an unprivileged uid on the host" "euid $uid"
		fi
	fi
else
	fail "set up: create sandbox A" "$("$WARREN" sandbox create --name "$A" 2>&1)"
fi

# --- network
host_addrs="$(hostname -I 2>/dev/null)"
gateway="$(ip route 2>/dev/null | awk '/^default/{print $3; exit}')"
# shellcheck disable=SC2086
expect_probe "net: only lo; no route to internet, host or gateway; no raw/packet sockets; no ifconfig" \
	sbp -- /probe net $host_addrs $gateway
expect_probe_sees "probe sees host interfaces and routes (host)" "$HOSTPROBE" net
expect_probe "socket families: unix, inet, inet6, NETLINK_ROUTE only; vsock, packet, other netlink, alg, xdp... EAFNOSUPPORT (also with high bits)" \
	sbp -- /probe families
expect_probe_sees "probe sees socket families the filter refuses (host, uid 65534)" \
	as_nobody "$HOSTPROBE" families

listening=0
for _ in 1 2 3; do
	port=$((20000 + RANDOM % 20000))
	"$HOSTPROBE" tcp-listen 0.0.0.0 "$port" 40 >"$TEST_TMP/tcp.out" 2>&1 &
	on_exit kill $!
	if wait_for "$TEST_TMP/tcp.out" '^ready$' 20; then
		listening=1
		break
	fi
done
if [ "$listening" = 1 ]; then
	expect_probe_sees "probe sees a host TCP service (host)" "$HOSTPROBE" connect 127.0.0.1 "$port"
	expect_probe "a service on the host's 127.0.0.1 is unreachable" \
		sbp -- /probe connect 127.0.0.1 "$port"
	for a in $host_addrs; do
		case "$a" in *:*) continue ;; esac
		expect_probe "a service on the host's address $a is unreachable" \
			sbp -- /probe connect "$a" "$port"
	done
else
	fail "set up: host TCP listener" "$(cat "$TEST_TMP/tcp.out")"
fi

sock="warren-sec-$$"
"$HOSTPROBE" listen-abstract "$sock" 40 >"$TEST_TMP/abs.out" 2>&1 &
on_exit kill $!
if wait_for "$TEST_TMP/abs.out" '^ready$'; then
	expect_probe_sees "probe sees a host abstract unix socket (host)" "$HOSTPROBE" abstract "$sock"
	expect_probe "a host abstract unix socket is unreachable" sbp -- /probe abstract "$sock"
else
	fail "set up: host abstract socket" "$(cat "$TEST_TMP/abs.out")"
fi

# --- IPC, hostname
key=$((0x5ec00000 + ($$ & 0xffff)))
if "$HOSTPROBE" ipc-create "$key" >/dev/null; then
	on_exit "'$HOSTPROBE' ipc-remove $key"
	expect_probe_sees "probe sees host SysV IPC objects (host)" "$HOSTPROBE" ipc "$key"
	expect_probe "host SysV shm, message queues, semaphores are invisible" sbp -- /probe ipc "$key"
else
	fail "set up: host SysV IPC objects" "ipc-create $key failed"
fi
echo "x" >"/dev/shm/.warren-sec-$$"
on_exit rm -f "/dev/shm/.warren-sec-$$"
expect_none "host POSIX shm (/dev/shm) is invisible" "warren-sec" \
	sb -- sh -c 'ls -a /dev/shm; echo __END__'

host_name="$(hostname)"
expect_none "the hostname inside is not the host's" "^$host_name\$" \
	sb -- sh -c 'hostname; echo __END__'
ran="$(sb -- sh -c 'hostname evil-warren-sec; echo evil-warren-sec > /proc/sys/kernel/hostname; echo __END__' 2>&1)"
echo "$ran" | grep -q '^__END__$' && [ "$(hostname)" = "$host_name" ] && pass "the host's hostname is unchanged after attempts inside" ||
	fail "the host's hostname is unchanged after attempts inside" "now $(hostname)"
