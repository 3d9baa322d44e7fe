#!/bin/bash
# Bad input: a clear message, exit status 2, and nothing left behind.
. "$(dirname "$0")/../lib.sh"

before_cg="$(warren_cgroups | wc -l)"
before_rec="$(warren_records | wc -l)"

expect_status "unknown option" 2 sb --frobnicate -- true
expect_output "unknown option is named" "unknown option '--frobnicate'" sb --frobnicate -- true
expect_status "option without a value" 2 sb --memory
expect_status "bad size" 2 sb --memory 12Q -- true
expect_output "bad size is explained" "--memory '12Q'" sb --memory 12Q -- true
expect_status "size overflow" 2 sb --memory 99999999999999999999T -- true
expect_status "bad cpus" 2 sb --cpus zero -- true
expect_status "zero cpus" 2 sb --cpus 0 -- true
expect_status "bad pids" 2 sb --pids -5 -- true
expect_status "bad duration" 2 sb --timeout 5x -- true
expect_status "missing --layer directory" 2 sb --layer /no/such/dir -- true
expect_output "missing directory is named" "--layer /no/such/dir: No such file" sb --layer /no/such/dir -- true
expect_status "--rootfs that is a file" 2 sb --rootfs /etc/hostname -- true
expect_status "--rootfs given twice" 2 sb --rootfs /tmp --rootfs /tmp -- true
expect_status "bad --bind spec" 2 sb --bind /tmp -- true
expect_status "--bind with relative destination" 2 sb --bind /tmp:rel -- true
expect_status "--bind source missing" 2 sb --bind /no/such:/x -- true
expect_status "--bind over /" 2 sb --bind /tmp:/ -- true
expect_status "--net other than none" 2 sb --net host -- true
expect_status "--env without =" 2 sb --env FOO -- true
expect_status "--cwd relative" 2 sb --cwd tmp -- true
expect_status "--hostname invalid" 2 sb --hostname 'a b' -- true
expect_status "--name is for create" 2 sb --name x -- true
expect_status "no command" 2 sb
expect_status "--inodes without --upper and --disk is refused" 2 sb --inodes 1000 -- true
expect_status "--inodes 0 is refused" 2 sb --upper "$TEST_TMP/u0" --disk 8M --inodes 0 -- true
# a layer directory made without --disk has no image: --disk cannot cap it
sb --upper "$TEST_TMP/plain" -- true >/dev/null 2>&1
expect_status "--disk on a layer directory made without it is refused" 2 sb --upper "$TEST_TMP/plain" --disk 8M -- true
expect_status "--upper inside a --layer" 2 sb --layer "$TEST_TMP" --upper "$TEST_TMP/inner" -- true
mkdir -p "$TEST_TMP/foreign" && echo x >"$TEST_TMP/foreign/file"
expect_status "--upper on a populated foreign directory" 2 sb --upper "$TEST_TMP/foreign" -- true
expect_output "foreign --upper is explained" "not empty and not a Warren layer" sb --upper "$TEST_TMP/foreign" -- true
[ "$(stat -c %u "$TEST_TMP/foreign/file")" = 0 ] && pass "a refused --upper is not modified" || fail "a refused --upper is not modified" "owner changed"
expect_status "create without --name" 2 "$WARREN" sandbox create
expect_status "create with a bad name" 2 "$WARREN" sandbox create --name '../x'
expect_status "create with extra argument" 2 "$WARREN" sandbox create --name ok1 extra
expect_status "exec into a missing sandbox" 2 "$WARREN" sandbox exec no-such-box -- true
expect_status "exec without a command" 2 "$WARREN" sandbox exec no-such-box
expect_status "rm of a missing sandbox" 1 "$WARREN" sandbox rm no-such-box
expect_status "unknown sandbox subcommand" 2 "$WARREN" sandbox frob
expect_status "unknown command" 2 "$WARREN" frob
expect_status "ls rejects unknown arguments" 2 "$WARREN" sandbox ls --frob

# a failing set-up step names the step and errno, exits 125, leaves nothing
expect_status "set-up failure exits 125" 125 sb --cwd /no/such/dir -- true
expect_output "set-up failure names the step" "sandbox setup: chdir to /no/such/dir inside the sandbox: No such file or directory" sb --cwd /no/such/dir -- true

[ "$(warren_cgroups | wc -l)" = "$before_cg" ] && pass "bad input leaves no cgroup" || fail "bad input leaves no cgroup" "$(warren_cgroups)"
[ "$(warren_records | wc -l)" = "$before_rec" ] && pass "bad input leaves no record" || fail "bad input leaves no record" "$(warren_records)"
