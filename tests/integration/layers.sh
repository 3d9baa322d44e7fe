#!/bin/bash
# Layers: a writable layer kept with --upper becomes a read-only --layer for
# the next sandbox (in any slot); lower layers are never modified; the top
# layer wins; --rootfs images keep their owners inside.
. "$(dirname "$0")/../lib.sh"

L1="$TEST_TMP/l1" L2="$TEST_TMP/l2"
expect_status "build a layer with --upper" 0 sb --upper "$L1" -- sh -c 'mkdir -p /workspace/src && echo one > /workspace/src/a && echo base > /workspace/which && chown 1000:1000 /workspace/src/a'
owner="$(stat -c %u "$L1/upper/workspace/src/a")"
[ "$owner" = 1000001000 ] && pass "layer files are owned by the store range on the host" || fail "layer files are owned by the store range on the host" "uid $owner"
[ "$(stat -c %u "$L1")" = 1000000000 ] && pass "the layer root is owned by store root" || fail "the layer root is owned by store root" "$(stat -c %u "$L1")"
[ ! -e "$L1/work" ] && pass "the overlay work dir is removed after exit" || fail "the overlay work dir is removed after exit" "left"
expect_status "build a second layer on top" 0 sb --layer "$L1" --upper "$L2" -- sh -c 'echo top > /workspace/which'
expect_output "the layer's files are visible" "^one$" sb --layer "$L1" -- cat /workspace/src/a
expect_output "--layer also takes the layer itself" "^one$" sb --layer "$L1/upper" -- cat /workspace/src/a
expect_output "ownership carries across sandboxes" "^1000 1000$" sb --layer "$L1" -- stat -c '%u %g' /workspace/src/a
expect_output "the top layer wins" "^top$" sb --layer "$L1" --layer "$L2" -- cat /workspace/which
expect_output "order matters" "^base$" sb --layer "$L2" --layer "$L1" -- cat /workspace/which
expect_output "a lower layer is writable through the overlay" "^changed$" sb --layer "$L1" -- sh -c 'echo changed > /workspace/src/a && cat /workspace/src/a'
[ "$(cat "$L1/upper/workspace/src/a")" = one ] && pass "writes never reach a lower layer" || fail "writes never reach a lower layer" "$(cat "$L1/upper/workspace/src/a")"
expect_output "deleting a lower file hides it" "^gone$" sb --layer "$L1" -- sh -c 'rm /workspace/src/a; test -e /workspace/src/a || echo gone'
[ -e "$L1/upper/workspace/src/a" ] && pass "deletion does not touch the lower layer" || fail "deletion does not touch the lower layer" "file removed"

# a persistent upper keeps state across sandboxes
U="$TEST_TMP/u"
sb --upper "$U" -- sh -c 'echo 1 >> /workspace/count' >/dev/null
sb --upper "$U" -- sh -c 'echo 2 >> /workspace/count' >/dev/null
expect_output "--upper persists across runs" "^1 2$" sb --upper "$U" -- sh -c 'cat /workspace/count | tr "\n" " " | sed "s/ $//"'
sb --upper "$U" -- sh -c 'echo x > /tmp/t' >/dev/null
[ ! -e "$U/upper/tmp/t" ] && pass "/tmp does not persist in --upper" || fail "/tmp does not persist in --upper" "found $U/upper/tmp/t"
expect_output "/tmp is fresh each time" "^absent$" sb --upper "$U" -- sh -c 'test -e /tmp/t && echo present || echo absent'

# one upper, one sandbox at a time
"$WARREN" sandbox create --name layers-busy --upper "$U" >/dev/null
expect_status "an upper in use by a live sandbox is refused" 2 sb --upper "$U" -- true
expect_output "the refusal names the user" "in use by sandbox layers-busy" sb --upper "$U" -- true
"$WARREN" sandbox rm layers-busy

# --rootfs: an image whose files belong to root keep that owner inside
if command -v gcc >/dev/null; then
	R="$TEST_TMP/rootfs"
	mkdir -p "$R/bin" "$R/etc"
	printf '#include <stdio.h>\nint main(void){FILE*f=fopen("/etc/secret","r");char b[64]={0};if(!f){perror("open");return 3;}fgets(b,sizeof b,f);printf("read:%%s",b);return 0;}\n' >"$TEST_TMP/hello.c"
	gcc -static -O1 -o "$R/bin/hello" "$TEST_TMP/hello.c" 2>/dev/null
	echo image-secret >"$R/etc/secret"
	chmod 600 "$R/etc/secret"
	expect_output "--rootfs runs from the image" "^read:image-secret$" sb --rootfs "$R" --cwd / -- /bin/hello
	expect_status "--rootfs has no host /usr" 127 sb --rootfs "$R" --cwd / -- /usr/bin/true
fi
