#!/bin/bash
# Security: the filesystem boundary. Host files outside what the sandbox is
# given stay invisible (/root, /work, /tmp, /dev/shm, /etc/shadow, other
# sandboxes' layers); what it is given read-only stays unchanged on the host
# (host /usr, --layer, the host base layer, ro binds); nothing can be mounted,
# no device node created or opened; no path leads above the sandbox's root;
# mountinfo gives no host path away.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/sec_lib.sh"

MARK="warren-sec-mark-$$-$RANDOM"

# --- host files outside the sandbox are invisible
echo "$MARK" >"/root/.$MARK"
on_exit rm -f "/root/.$MARK"
echo "$MARK" >"/tmp/.$MARK"
on_exit rm -f "/tmp/.$MARK"
echo "$MARK" >"/dev/shm/.$MARK"
on_exit rm -f "/dev/shm/.$MARK"
echo "$MARK" >"$TEST_TMP/$MARK"
expect_none "host /root, /tmp, /dev/shm, the test dir and /work are invisible" "VISIBLE" \
	sb -- sh -c "for f in /root/.$MARK /tmp/.$MARK /dev/shm/.$MARK $TEST_TMP/$MARK $ROOT_DIR/Makefile /work; do [ -e \$f ] && echo VISIBLE \$f; done; echo __END__"
expect_none "a search of the whole sandbox tree finds no host marker" "$MARK" \
	sb -- sh -c "find / -path /proc -prune -o -path /usr -prune -o -name '*warren-sec-mark-$$*' -print 2>/dev/null; grep -rls -D skip --exclude-dir=proc --exclude-dir=usr -e '$MARK' / 2>/dev/null | grep -v '^/proc'; echo __END__"

# nothing of the host's shadow file (password hashes) is readable inside
inside="$(sb -- sh -c 'cat /etc/shadow 2>/dev/null; echo __END__' 2>&1)"
hashes="$(cut -d: -f2 /etc/shadow /etc/gshadow 2>/dev/null | grep -E '^.{3,}$' | grep -vE '^[*!]')"
if ! echo "$inside" | grep -q '^__END__$'; then
	fail "host /etc/shadow is not readable inside" "the sandbox did not run: $inside"
elif [ -n "$(echo "$inside" | sed '/^__END__$/d')" ] &&
	[ "$(echo "$inside" | sed '/^__END__$/d')" = "$(cat /etc/shadow)" ]; then
	fail "host /etc/shadow is not readable inside" "identical to the host's"
elif [ -n "$hashes" ] && echo "$inside" | grep -qFf <(echo "$hashes"); then
	fail "host /etc/shadow is not readable inside" "a host password hash is visible"
else
	pass "host /etc/shadow is not readable inside"
fi
host_users="$(cut -d: -f1 /etc/passwd | grep -vxE 'root|nobody' | paste -sd'|')"
expect_none "host user names are not disclosed in /etc/passwd" "^($host_users):" \
	sb -- sh -c 'cat /etc/passwd; echo __END__'
host_groups="$(cut -d: -f1 /etc/group | grep -vxE 'root|tty|users|nogroup' | paste -sd'|')"
expect_none "host group names are not disclosed in /etc/group" "^($host_groups):" \
	sb -- sh -c 'cat /etc/group; echo __END__'

# Host mode copies a few /etc entries into its base layer, owned by the store
# range, i.e. by root inside. What the host keeps from other users (mode
# o-r: TLS private keys in /etc/ssl/private are the usual case) must not
# become readable by sandbox root. A fresh base (own runtime directory) is
# built while a marker key sits in /etc/ssl/private; the marker is removed
# when this file exits.
if [ -d /etc/ssl/private ]; then
	key="/etc/ssl/private/warren-sec-test-$$.key"
	on_exit rm -f "$key"
	(umask 077 && echo "PRIVATE-KEY-$MARK" >"$key")
	rt="$TEST_TMP/runtime"
	mkdir -m 755 "$rt"
	on_exit "WARREN_RUNTIME_DIR='$rt' '$WARREN' sandbox ls"
	expect_none "host secrets in /etc (0600 /etc/ssl/private/*.key) are not readable inside" "PRIVATE-KEY" \
		env WARREN_RUNTIME_DIR="$rt" "$WARREN" sandbox run --timeout 60s -- sh -c "cat /etc/ssl/private/* 2>&1; echo __END__"
	rm -f "$key"
fi

# --- read-only things stay unchanged on the host
n=".warren-sec-$$"
env_mtime="$(stat -c %Y /usr/bin/env)"
expect_none "host /usr is read-only inside" "WROTE" \
	sb -- sh -c "touch /usr/$n && echo WROTE; touch /usr/bin/$n && echo WROTE; mkdir /usr/lib/$n && echo WROTE; touch -c -d 2001-01-01 /usr/bin/env && echo WROTE; echo __END__"
if [ -e "/usr/$n" ] || [ -e "/usr/bin/$n" ] || [ -e "/usr/lib/$n" ] ||
	[ "$(stat -c %Y /usr/bin/env)" != "$env_mtime" ]; then
	rm -rf "/usr/${n:?}" "/usr/bin/${n:?}" "/usr/lib/${n:?}"
	fail "host /usr unchanged after write attempts" "a file appeared or /usr/bin/env changed"
else
	pass "host /usr unchanged after write attempts"
fi

L="$TEST_TMP/layer"
mkdir -p "$L/data"
echo orig >"$L/data/f"
echo keep >"$L/data/g"
chmod 755 "$L/data"
before="$(cd "$L" && find . -printf '%p %m %u %s\n' | sort; cat data/f data/g)"
expect_output "--layer: writes inside go to the sandbox's own upper" "^evil$" \
	sb --layer "$L" -- sh -c 'echo evil > /data/f; rm -f /data/g; touch /data/new; chmod 700 /data; cat /data/f'
after="$(cd "$L" && find . -printf '%p %m %u %s\n' | sort; cat data/f data/g)"
[ "$before" = "$after" ] && pass "--layer: the host directory is unchanged after writes, deletes, chmod" ||
	fail "--layer: the host directory is unchanged after writes, deletes, chmod" "$(diff <(echo "$before") <(echo "$after") | tr '\n' ' ')"

rt_dir="$(runtime_dir)"
expect_output "host base layer: /etc is writable inside (copy-up)" "^$MARK$" \
	sb -- sh -c "echo '$MARK:x:0:0::/:/bin/sh' >> /etc/passwd && echo $MARK > /etc/$n && cat /etc/$n"
expect_none "host base layer: a change to /etc in one sandbox is not seen by the next" "$MARK" \
	sb -- sh -c "cat /etc/passwd; cat /etc/$n 2>/dev/null; echo __END__"
if grep -rqs -e "$MARK" "$rt_dir/base" 2>/dev/null; then
	fail "host base layer on disk is unchanged" "marker found under $rt_dir/base"
else
	pass "host base layer on disk is unchanged"
fi

# --- another sandbox's writable layer
A="sec-fs-$$-a"
SECRET="SECRET-$MARK-A"
if "$WARREN" sandbox create --name "$A" --upper "$TEST_TMP/upper-a" >/dev/null 2>&1; then
	on_exit "'$WARREN' sandbox rm '$A'"
	"$WARREN" sandbox exec "$A" -- sh -c "echo $SECRET > /workspace/secret.txt; echo $SECRET > /root/secret.txt; echo $SECRET > /etc/secret.conf"
	expect_none "another sandbox cannot find a sandbox's upper layer files" "$SECRET|secret\\.(txt|conf)" \
		sb -- sh -c "grep -rls -D skip --exclude-dir=proc --exclude-dir=usr -e '$SECRET' / 2>/dev/null | grep -v ^/proc; ls /workspace /root /etc | grep secret; echo __END__"
	expect_output "an upper layer in use cannot be mounted by a second sandbox" "in use" \
		sb --upper "$TEST_TMP/upper-a" -- cat /workspace/secret.txt
	f="$(find "$TEST_TMP/upper-a" -name secret.txt -path '*workspace*' | head -1)"
	owner="$(stat -c %u "$f" 2>/dev/null)"
	if [ -n "$owner" ] && [ "$owner" -ge 1000000000 ] && [ "$owner" -lt 1000065536 ]; then
		pass "files written by root inside land on disk owned by the store range"
	else
		fail "files written by root inside land on disk owned by the store range" "$f owned by '$owner'"
	fi
else
	fail "create a sandbox with --upper" "$("$WARREN" sandbox create --name "$A" --upper "$TEST_TMP/upper-a" 2>&1)"
fi

# Overlay keeps its own metadata in user.overlay.* xattrs (userxattr), and an
# --upper directory becomes a lower layer of later sandboxes. Metadata forged
# from inside (an opaque /etc, a redirect) must not be obeyed there: a layer
# must not hide or redirect what lies below it.
OV="$TEST_TMP/upper-ovl"
out="$(sbp --upper "$OV" -- sh -c 'mkdir -p /workspace/d && touch /etc/.copy-up && /probe ovl-forge /etc /workspace/d' 2>&1)"
if echo "$out" | grep -q '^RESULT ovl-forge DONE$'; then
	expect_output "forged overlay xattrs in an --upper are not obeyed when it is a --layer (/etc not hidden)" \
		"^passwd$" sb --layer "$OV" -- ls -A /etc
	expect_output "forged overlay xattrs in an --upper are not obeyed when it is the --upper again" \
		"^passwd$" sb --upper "$OV" -- ls -A /etc
else
	fail "set up: forge overlay xattrs in an --upper" "$(echo "$out" | tail -3 | tr '\n' ' ')"
fi

# --- no mounting
expect_none "mount: tmpfs, proc, bind, remount rw, umount all refused" "MOUNTED" \
	sb -- sh -c 'mount -t tmpfs none /mnt && echo MOUNTED; mount -t proc proc /mnt && echo MOUNTED; mount --bind /usr /mnt && echo MOUNTED; mount -o remount,rw /usr && echo MOUNTED; umount -l /dev && echo MOUNTED; echo __END__'

# --- devices
expect_probe "mknod: no char or block device node anywhere writable" sbp -- /probe mknod
if gvisor; then
	# the Sentry's /dev: its own devices (fuse and net/tun are the
	# Sentry's implementations, no host device behind them) and Warren's
	# .warren (init, its filter, its socket); writable, as a tmpfs of the
	# Sentry's where no device node can be made (the mknod checks)
	expect_output "/dev holds only the Sentry's standard nodes and Warren's own" \
		"^\.warren fd full fuse net null ptmx pts random shm stderr stdin stdout tty urandom zero$" \
		sb -- sh -c 'echo $(ls -A /dev)'
	devs='1:3|1:5|1:7|1:8|1:9|5:0|5:2|a:e5|a:c8'
else
	expect_output "/dev holds only the standard nodes" \
		"^fd full null ptmx pts random shm stderr stdin stdout tty urandom zero$" \
		sb -- sh -c 'echo $(ls -A /dev)'
	devs='1:3|1:5|1:7|1:8|1:9|5:0|5:2'
	expect_none "/dev is read-only" "WROTE" sb -- sh -c 'touch /dev/x && echo WROTE; mkdir /dev/d && echo WROTE; ln -s /proc/1/root /dev/l && echo WROTE; echo __END__'
fi
# (stdin, stdout, stderr: symlinks to the command's own descriptors)
expect_none "/dev nodes are only null zero full random urandom tty and the own ptmx" "BAD" \
	sb -- sh -c 'for f in /dev/* /dev/net/*; do [ -L "$f" ] && continue; [ -c "$f" ] || [ -b "$f" ] || continue; case "$(stat -L -c %t:%T "$f")" in '"$devs"') ;; *) echo BAD $f $(stat -L -c %t:%T "$f");; esac; done; echo __END__'
expect_output "/dev/pts is the sandbox's own instance (no host terminals)" "^ptmx$" \
	sb -- ls /dev/pts
root_dev="$(stat -c '%Hd %Ld' /)"
DL="$TEST_TMP/devlayer"
mkdir -p "$DL/devs"
mknod "$DL/devs/null" c 1 3
# shellcheck disable=SC2086 # "MAJOR MINOR"
mknod "$DL/devs/disk" b $root_dev
expect_probe "device nodes planted in a --layer (host disk, null) cannot be opened" \
	sbp --layer "$DL" -- /probe opendev /devs/disk /devs/null
expect_probe "device nodes in a bound host directory cannot be opened" \
	sbp --bind "$DL/devs:/mnt/devs:ro" -- /probe opendev /mnt/devs/disk /mnt/devs/null

# a --rootfs image is mapped host 0-65535 onto the sandbox: its root-owned
# nodes belong to root inside, so only nodev stands in the way
RF="$TEST_TMP/rootfs"
mkdir -p "$RF/devs"
cp "$PROBE" "$RF/probe"
# shellcheck disable=SC2086
mknod -m 600 "$RF/devs/disk" b $root_dev
mknod -m 600 "$RF/devs/mem" c 1 1
expect_probe "--rootfs: device nodes in the image (root-owned inside) cannot be opened" \
	sb --rootfs "$RF" -- /probe opendev /devs/disk /devs/mem
expect_probe "--rootfs: mknod refused" sb --rootfs "$RF" -- /probe mknod
expect_probe "--rootfs: mountinfo reveals no host path" sb --rootfs "$RF" -- /probe mounts "$TEST_TMP" "$ROOT_DIR"

# --- binds keep the host's permissions and read-only-ness
B="$TEST_TMP/bindsrc"
mkdir -p "$B/private"
echo "$MARK-bind" >"$B/file"
echo "$MARK-private" >"$B/private/key"
chmod 700 "$B/private"
chmod 600 "$B/private/key"
expect_output "--bind :ro works (the host file is readable inside)" "^$MARK-bind$" \
	sb --bind "$B:/mnt/b:ro" -- cat /mnt/b/file
expect_none "--bind :ro cannot be written or remounted rw" "WROTE|MOUNTED" \
	sb --bind "$B:/mnt/b:ro" -- sh -c 'echo x > /mnt/b/file && echo WROTE; touch /mnt/b/new && echo WROTE; mount -o remount,rw /mnt/b && echo MOUNTED; echo __END__'
[ "$(cat "$B/file")" = "$MARK-bind" ] && [ ! -e "$B/new" ] &&
	pass "--bind :ro: the host directory is unchanged" ||
	fail "--bind :ro: the host directory is unchanged" "$(ls "$B")"
expect_none "--bind: root inside is not root over bound host files (0600 root key unreadable)" "$MARK-private" \
	sb --bind "$B:/mnt/b" -- sh -c 'cat /mnt/b/private/key 2>&1; echo __END__'

# --- no way above the root; no host path in mountinfo
expect_probe "chroot trick and .. walks end at the sandbox's root (CAP_SYS_CHROOT kept)" \
	sbp -- /probe chroot
expect_probe "mountinfo reveals no host path (layers, upper, runtime dir, /work, /root)" \
	sbp --layer "$L" --upper "$TEST_TMP/upper-m" -- /probe mounts "$TEST_TMP" "$ROOT_DIR"
expect_probe "mountinfo reveals no host path (host mode, scratch upper)" \
	sbp -- /probe mounts "$TEST_TMP" "$ROOT_DIR"
