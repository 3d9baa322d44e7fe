#!/bin/bash
# Nothing left behind, on every path: normal exit, a failing set-up step,
# SIGKILL of warren, a killed init, rm. A crashed warren leaves at most a
# record that the next warren finds and removes.
. "$(dirname "$0")/../lib.sh"

leftovers_of() { # NAME -> what remains of that sandbox
	warren_cgroups | grep "/$1\$"
	warren_records | grep "/$1\$"
	grep -F "$1" /proc/self/mountinfo
}

# SIGKILL of `warren sandbox run` mid-command
"$WARREN" sandbox run -- sleep 777 &
wpid=$!
sleep 1
name="$(warren_records | xargs -n1 basename | grep "^run-$wpid-" | head -1)"
[ -n "$name" ] && pass "a running one-off sandbox has a record" || fail "a running one-off sandbox has a record" "none for $wpid"
kill -9 "$wpid"
wait "$wpid" 2>/dev/null
sleep 0.5
expect_no_output "SIGKILL of warren kills the sandbox's processes" "sleep 777" pgrep -af 'sleep 777'
"$WARREN" sandbox ls >/dev/null 2>&1
[ -z "$(leftovers_of "$name")" ] && pass "the next warren removes what a killed one left" || fail "the next warren removes what a killed one left" "$(leftovers_of "$name")"

# SIGKILL of init of a long-lived sandbox
N="cl-$$"
"$WARREN" sandbox create --name "$N" >/dev/null
"$WARREN" sandbox exec "$N" -- sh -c 'sleep 888 >/dev/null 2>&1 &'
ipid="$("$WARREN" sandbox ls | awk -v n="$N" '$1==n {print $3}')"
kill -9 "$ipid"
sleep 0.5
expect_no_output "killing init kills everything inside" "sleep 888" pgrep -af 'sleep 888'
expect_no_output "ls cleans a sandbox whose init died" "^$N " "$WARREN" sandbox ls
[ -z "$(leftovers_of "$N")" ] && pass "nothing remains of a sandbox whose init died" || fail "nothing remains of a sandbox whose init died" "$(leftovers_of "$N")"

# set-up failures at different steps leave nothing
for args in "--cwd /does/not/exist" "--bind $TEST_TMP:/proc/x" "--layer $TEST_TMP --upper $TEST_TMP/in"; do
	before="$(warren_records | wc -l) $(warren_cgroups | wc -l)"
	# shellcheck disable=SC2086
	"$WARREN" sandbox run $args -- true >/dev/null 2>&1
	rc=$?
	after="$(warren_records | wc -l) $(warren_cgroups | wc -l)"
	[ "$rc" != 0 ] && [ "$before" = "$after" ] && pass "failed set-up ($args) leaves nothing" || fail "failed set-up ($args) leaves nothing" "rc=$rc before=$before after=$after"
done

# SIGKILL of warren while a create is in its set-up
for i in 1 2 3; do
	"$WARREN" sandbox create --name "race-$$-$i" >/dev/null 2>&1 &
	cpid=$!
	sleep 0.00$i
	kill -9 "$cpid" 2>/dev/null
	wait "$cpid" 2>/dev/null
	"$WARREN" sandbox rm "race-$$-$i" >/dev/null 2>&1
done
"$WARREN" sandbox ls >/dev/null 2>&1
left=""
for i in 1 2 3; do left="$left$(leftovers_of "race-$$-$i")"; done
[ -z "$left" ] && pass "a create killed at any point is fully removable" || fail "a create killed at any point is fully removable" "$left"

# the scratch layer and staging mounts live only in the sandbox's namespace
expect_no_output "no staging or overlay mount on the host" "warren-stage|/warren/stage|overlay.*warren" cat /proc/self/mountinfo
