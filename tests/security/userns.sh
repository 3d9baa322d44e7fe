#!/bin/bash
# Security: user namespaces. Refused by default (a nested user namespace
# hands back every capability over new namespaces: a large kernel surface);
# allowed with --allow-userns, and then only that: the rest of the filter,
# mount included, still holds inside the nested namespace, and its root is
# nobody on the host.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/sec_lib.sh"

# --- default: refused
expect_output "default: unshare -U is refused (EPERM)" "Operation not permitted" \
	sb -- unshare -U true
expect_status "default: unshare -U fails" 1 sb -- unshare -U true
expect_output "default: unshare -r (userns as non-root helper path) is refused" "Operation not permitted" \
	sb -- setpriv --reuid=1000 --regid=1000 --clear-groups unshare -r true
expect_probe "default: clone/unshare with CLONE_NEWUSER EPERM, clone3 ENOSYS (probe)" \
	sbp -- /probe syscalls

# --- --allow-userns: allowed...
expect_status "--allow-userns: unshare -U works" 0 sb --allow-userns -- unshare -U true
expect_output "--allow-userns: root in the nested namespace" "^0$" \
	sb --allow-userns -- unshare -r id -u
expect_probe "--allow-userns: only userns creation allowed, every other rule holds (probe)" \
	sbp --allow-userns -- /probe syscalls --userns-allowed
# ...and nothing more: inside the nested namespace (full capabilities there)
expect_probe "--allow-userns: the filter still holds inside the nested namespace" \
	sbp --allow-userns -- unshare -r /probe syscalls --userns-allowed
expect_none "--allow-userns: mount refused inside the nested namespace" "MOUNTED" \
	sb --allow-userns -- unshare -r sh -c \
	'mount -t tmpfs none /mnt && echo MOUNTED; mount --bind /usr /mnt && echo MOUNTED; mount -o remount,rw /usr && echo MOUNTED; echo __END__'
expect_probe "--allow-userns: still no device nodes from the nested namespace" \
	sbp --allow-userns -- unshare -r /probe mknod
mark="/usr/.warren-userns-$$"
out="$(sb --allow-userns -- unshare -r sh -c "touch $mark && echo WROTE; echo __END__" 2>&1)"
if [ -e "$mark" ] || echo "$out" | grep -q WROTE || ! echo "$out" | grep -q '^__END__$'; then
	rm -f "$mark"
	fail "--allow-userns: nested root cannot write host /usr" "$out"
else
	pass "--allow-userns: nested root cannot write host /usr"
fi
expect_output "--allow-userns: a nested namespace maps only ids of the sandbox's range" \
	"^ +0 +0 +1$" sb --allow-userns -- unshare -r cat /proc/self/uid_map
