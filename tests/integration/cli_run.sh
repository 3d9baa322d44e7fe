#!/bin/bash
# `warren sandbox run`: exit status, stdio, environment, working directory,
# hostname and the --json result.
. "$(dirname "$0")/../lib.sh"

expect_status "exit 0 passes through" 0 sb -- true
expect_status "exit status passes through" 7 sb -- sh -c 'exit 7'
expect_status "killed by signal N exits 128+N" 143 sb -- sh -c 'kill -TERM $$'
expect_status "killed by SIGKILL exits 137" 137 sb -- sh -c 'kill -KILL $$'
expect_status "command not found exits 127" 127 sb -- /no/such/command
expect_output "command not found is explained" "no/such/command: No such file" sb -- /no/such/command
expect_status "--timeout stops the sandbox and exits 124" 124 sb --timeout 1s -- sleep 30
expect_output "stdout and stderr pass through" "^out$" sb -- sh -c 'echo out; echo err >&2'
got="$(sb -- sh -c 'echo err >&2' 2>&1 >/dev/null)"
[ "$got" = "err" ] && pass "stderr stays stderr" || fail "stderr stays stderr" "got '$got'"
got="$(echo piped | sb -- cat)"
[ "$got" = "piped" ] && pass "stdin passes through" || fail "stdin passes through" "got '$got'"
expect_output "default working directory is /workspace" "^/workspace$" sb -- pwd
expect_output "--cwd sets the working directory" "^/tmp$" sb --cwd /tmp -- pwd
expect_output "--env sets a variable" "^FOO=bar baz$" sb --env 'FOO=bar baz' -- sh -c 'echo "FOO=$FOO"'
expect_output "--env overrides a default" "^HOME=/home/x$" sb --env HOME=/home/x -- sh -c 'echo "HOME=$HOME"'
export WARREN_TEST_SECRET=s3cr3t-host-value
expect_no_output "the caller's environment never enters" "s3cr3t-host-value" sb -- sh -c 'env; cat /proc/1/environ 2>/dev/null'
unset WARREN_TEST_SECRET
expect_output "default hostname" "^warren$" sb -- hostname
expect_output "--hostname sets the hostname" "^box1$" sb --hostname box1 -- hostname
expect_output "--hostname is in /etc/hostname" "^box1$" sb --hostname box1 -- cat /etc/hostname
expect_output "root inside is uid 0" "^uid=0\(root\) gid=0\(root\)" sb -- id
expect_output "/tmp is writable" "^ok$" sb -- sh -c 'echo ok > /tmp/f && cat /tmp/f'
expect_output "/workspace is writable" "^ok$" sb -- sh -c 'echo ok > /workspace/f && cat /workspace/f'
expect_output "a scratch sandbox starts empty" "^absent$" sb -- sh -c 'test -e /workspace/f && echo present || echo absent'
expect_output "/etc is writable inside (copy-up) " "^1$" sb -- sh -c 'echo x >> /etc/hosts && grep -c "^x$" /etc/hosts'
expect_output "the host's /etc/hosts is untouched" "^0$" grep -c '^x$' /etc/hosts

json="$(sb --json -- sh -c 'exit 3' | tail -1)"
for field in '"exit_code":3' '"timed_out":false' '"oom_killed":false' '"start_total":' '"destroy":' '"name":"run-'; do
	case "$json" in
	*"$field"*) pass "--json has $field" ;;
	*) fail "--json has $field" "$json" ;;
	esac
done
expect_status "--json keeps the command's status" 3 sb --json -- sh -c 'exit 3'
json="$(sb --json --timeout 1s -- sleep 10 | tail -1)"
case "$json" in *'"timed_out":true'*) pass "--json reports the timeout" ;; *) fail "--json reports the timeout" "$json" ;; esac

# signals sent to warren reach the command
out="$TEST_TMP/sig.out"
"$WARREN" sandbox run -- sh -c 'trap "echo got-term; exit 5" TERM; sleep 30 & wait' >"$out" 2>&1 &
wpid=$!
sleep 1
kill -TERM "$wpid"
wait "$wpid"
rc=$?
if [ "$rc" = 5 ] && grep -q got-term "$out"; then
	pass "SIGTERM to warren is forwarded to the command"
else
	fail "SIGTERM to warren is forwarded to the command" "rc=$rc $(cat "$out")"
fi

# a command that ignores SIGTERM is killed after init's grace (2 s), with
# everything it started: a SIGTERM always ends the sandbox
"$WARREN" sandbox run -- sh -c 'trap "" TERM; sleep 300 & sleep 300' >"$out" 2>&1 &
wpid=$!
sleep 1
t0=$(date +%s%N)
kill -TERM "$wpid"
wait "$wpid"
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
if [ "$rc" = 143 ] && [ $ms -lt 10000 ] && grep -q "after SIGTERM, killing" "$out" &&
	! pgrep -f "^sleep 300$" >/dev/null; then
	pass "a command ignoring SIGTERM is killed after the grace ($ms ms)"
else
	fail "a command ignoring SIGTERM is killed after the grace" "rc=$rc after $ms ms: $(cat "$out"); $(pgrep -af 'sleep 300')"
fi
