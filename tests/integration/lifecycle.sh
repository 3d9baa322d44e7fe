#!/bin/bash
# Long-lived sandboxes: create, exec (status, stdio, cwd, env, tty,
# signals, concurrency), ls, rm, lifetime; and the idle cost of init.
. "$(dirname "$0")/../lib.sh"

N="lc-$$"
expect_output "create prints the name" "^$N$" "$WARREN" sandbox create --name "$N"
expect_status "a second create with the same name is refused" 2 "$WARREN" sandbox create --name "$N"
expect_output "ls shows it running" "^$N +running" "$WARREN" sandbox ls
expect_output "ls --json shows it" "\"name\": \"$N\"" "$WARREN" sandbox ls --json
# ls shows its own data directory's sandboxes; --all the host's
O="lc-other-$$"
mkdir "$TEST_TMP/other"
trap '"$WARREN" sandbox rm "$O" >/dev/null 2>&1; rm -rf "$TEST_TMP"' EXIT
"$WARREN" sandbox create --name "$O" --data "$TEST_TMP/other" >/dev/null
expect_no_output "ls leaves out another data directory's sandbox" "^$O " "$WARREN" sandbox ls
expect_no_output "ls --data leaves out the default directory's" "^$N " "$WARREN" sandbox ls --data "$TEST_TMP/other"
expect_output "ls --data lists that directory's" "^$O +running" "$WARREN" sandbox ls --data "$TEST_TMP/other"
expect_output "WARREN_HOME is the default data directory of ls" "^$O +running" env WARREN_HOME="$TEST_TMP/other" "$WARREN" sandbox ls
expect_output "ls --all lists both" "^$N .*$(pwd -P)/.warren$" "$WARREN" sandbox ls --all
expect_output "ls --all shows each one's data directory" "^$O .* $TEST_TMP/other$" "$WARREN" sandbox ls --all
expect_output "ls --json says the data directory" "\"data_dir\": \"$TEST_TMP/other\"" "$WARREN" sandbox ls --data "$TEST_TMP/other" --json
expect_status "ls: --all and --data exclude each other" 2 "$WARREN" sandbox ls --all --data "$TEST_TMP/other"
"$WARREN" sandbox rm "$O"
"$WARREN" sandbox run --data "$TEST_TMP/other" -- sleep 3 &
rp=$!
for _ in $(seq 1 50); do "$WARREN" sandbox ls --data "$TEST_TMP/other" | grep -q "^run-$rp-" && break; sleep 0.1; done
expect_output "a one-off sandbox is listed under its --data" "^run-$rp-" "$WARREN" sandbox ls --data "$TEST_TMP/other"
expect_no_output "and not under another data directory" "^run-$rp-" "$WARREN" sandbox ls
wait "$rp"
expect_status "exec returns the exit status" 9 "$WARREN" sandbox exec "$N" -- sh -c 'exit 9'
expect_status "exec: killed by signal N is 128+N" 137 "$WARREN" sandbox exec "$N" -- sh -c 'kill -9 $$'
expect_status "exec: command not found is 127" 127 "$WARREN" sandbox exec "$N" -- /nope
expect_output "exec: stdout streams" "^hello$" "$WARREN" sandbox exec "$N" -- echo hello
got="$(echo in | "$WARREN" sandbox exec "$N" -- cat)"
[ "$got" = in ] && pass "exec: stdin passes through" || fail "exec: stdin passes through" "got '$got'"
got="$("$WARREN" sandbox exec "$N" -- sh -c 'echo e >&2' 2>&1 >/dev/null)"
[ "$got" = e ] && pass "exec: stderr stays stderr" || fail "exec: stderr stays stderr" "got '$got'"
expect_output "exec: --cwd" "^/tmp$" "$WARREN" sandbox exec "$N" --cwd /tmp -- pwd
expect_output "exec: --env" "^V=1$" "$WARREN" sandbox exec "$N" --env V=1 -- sh -c 'echo V=$V'
expect_output "exec: state persists between execs" "^kept$" sh -c "'$WARREN' sandbox exec '$N' -- sh -c 'echo kept > /workspace/x' && '$WARREN' sandbox exec '$N' -- cat /workspace/x"
expect_output "exec: the command's pid 1 is warren-init" "warren-init" "$WARREN" sandbox exec "$N" -- sh -c 'tr "\\0" " " < /proc/1/cmdline'
expect_output "exec: init's environment is unreadable inside" "^denied$" "$WARREN" sandbox exec "$N" -- sh -c 'cat /proc/1/environ >/dev/null 2>&1 && echo readable || echo denied'

# a terminal: `script` gives us a pty on this side
if command -v script >/dev/null; then
	out="$(script -qec "'$WARREN' sandbox exec --tty '$N' -- sh -c 'tty; test -t 0 && echo is-a-tty'" /dev/null 2>&1 | tr -d '\r\000' | sed 's/\^@//g')"
	# (a NUL the terminal echoes as ^@ under load is not the command's)
	echo "$out" | grep -q '^/dev/pts/[0-9]' && pass "exec --tty: a pty inside" || fail "exec --tty: a pty inside" "$out"
	echo "$out" | grep -q '^is-a-tty$' && pass "exec --tty: stdin is a terminal" || fail "exec --tty: stdin is a terminal" "$out"
	code="$(script -qec "'$WARREN' sandbox exec --tty '$N' -- sh -c 'exit 4'; echo code=\$?" /dev/null 2>&1 | tr -d '\r\000' | grep -o 'code=[0-9]*' | cut -d= -f2)"
	[ "$code" = 4 ] && pass "exec --tty: exit status" || fail "exec --tty: exit status" "got '$code'"
fi

# SIGTERM to the exec client reaches the command
out="$TEST_TMP/term.out"
"$WARREN" sandbox exec "$N" -- sh -c 'trap "echo trapped; exit 3" TERM; sleep 30 & wait' >"$out" 2>&1 &
cpid=$!
sleep 1
kill -TERM "$cpid"
wait "$cpid"
rc=$?
[ "$rc" = 3 ] && grep -q trapped "$out" && pass "exec: SIGTERM is forwarded" || fail "exec: SIGTERM is forwarded" "rc=$rc $(cat "$out")"

# killing the exec client kills its command (the connection is its lifetime)
"$WARREN" sandbox exec "$N" -- sleep 1234 &
cpid=$!
sleep 1
kill -9 "$cpid"
sleep 0.5
expect_no_output "exec: a vanished client's command is killed" "sleep 1234" "$WARREN" sandbox exec "$N" -- ps -eo args

# concurrent execs
for i in 1 2 3 4 5 6 7 8; do "$WARREN" sandbox exec "$N" -- sh -c "sleep 0.3; exit $i" & done
ok=0
i=0
for job in $(jobs -p); do
	i=$((i + 1))
	wait "$job" && true
done
codes="$(for i in 1 2 3 4 5 6 7 8; do ("$WARREN" sandbox exec "$N" -- sh -c "exit $i"; echo $?) & done; wait)"
[ "$(echo "$codes" | sort -n | tr '\n' ' ')" = "1 2 3 4 5 6 7 8 " ] && pass "exec: concurrent commands keep their statuses" || fail "exec: concurrent commands keep their statuses" "$codes"

# idle cost: init's resident memory
pid="$("$WARREN" sandbox ls --json | tr -d ' \n' | grep -o "\"init_pid\":[0-9]*,\"name\":\"$N\"" | grep -o '[0-9]*' | head -1)"
[ -z "$pid" ] && pid="$("$WARREN" sandbox ls | awk -v n="$N" '$1==n {print $3}')"
rss="$(awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null)"
if [ -n "$rss" ] && [ "$rss" -le 1024 ]; then pass "idle init RSS <= 1 MiB (${rss} KiB)"; else fail "idle init RSS <= 1 MiB" "pid=$pid rss=$rss"; fi

# rm: everything goes
"$WARREN" sandbox exec "$N" -- sh -c 'sleep 4321 >/dev/null 2>&1 &'
expect_status "rm succeeds" 0 "$WARREN" sandbox rm "$N"
sleep 0.2
expect_no_output "rm kills every process" "sleep 4321|warren-init serve" pgrep -af 'sleep 4321'
[ -z "$(warren_cgroups | grep "/$N\$")" ] && pass "rm removes the cgroups" || fail "rm removes the cgroups" "$(warren_cgroups | grep "/$N\$")"
[ -z "$(warren_records | grep "/$N\$")" ] && pass "rm removes the record" || fail "rm removes the record" "left"
expect_no_output "ls no longer shows it" "^$N " "$WARREN" sandbox ls
expect_status "exec after rm fails" 2 "$WARREN" sandbox exec "$N" -- true

# lifetime: --timeout on a long-lived sandbox
T="lt-$$"
"$WARREN" sandbox create --name "$T" --timeout 1s >/dev/null
sleep 2.5
expect_no_output "an expired sandbox is gone from ls" "^$T " "$WARREN" sandbox ls
[ -z "$(warren_cgroups | grep "/$T\$")" ] && pass "an expired sandbox leaves no cgroup" || fail "an expired sandbox leaves no cgroup" "left"

# a persistent upper survives rm
U="$TEST_TMP/up"
"$WARREN" sandbox create --name "$T" --upper "$U" >/dev/null
"$WARREN" sandbox exec "$T" -- sh -c 'echo saved > /workspace/keep'
"$WARREN" sandbox rm "$T"
[ "$(cat "$U/upper/workspace/keep" 2>/dev/null)" = saved ] && pass "rm keeps the persistent upper" || fail "rm keeps the persistent upper" "missing"
[ ! -e "$U/work" ] && pass "rm removes the overlay work dir" || fail "rm removes the overlay work dir" "left"
