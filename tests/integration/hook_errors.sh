#!/bin/bash
# A failing hook is reported with its own output: a parallel hook's failing
# member ("updateContentCommand.docs", status 127) with its own lines, never
# with the other member's; every member's output is in the log, each line
# behind its name.
. "$(dirname "$0")/../lib.sh"

export WARREN_HOME="$TEST_TMP/data"
R="$TEST_TMP/par"
mkdir -p "$R"
cat >"$R/warren.json" <<'EOF2'
{"updateContentCommand": {"docs": "echo docs-says-why; no-such-command-here",
                          "lib": "echo lib-line-1; echo lib-line-2"}}
EOF2
git -C "$R" init -q -b main
git -C "$R" -c user.email=t@warren -c user.name=test add -A
git -C "$R" -c user.email=t@warren -c user.name=test commit -q -m initial
out="$("$WARREN" snapshot build "$R" 2>&1)"
rc=$?
err="$(echo "$out" | sed -n '/^warren snapshot build:/,$p')"
[ "$rc" != 0 ] && echo "$err" | grep -q 'hook updateContentCommand.docs failed with status 127' &&
	pass "the failing member is named with its status" || fail "the failing member is named with its status" "rc=$rc $err"
echo "$err" | grep -q '\[docs\] docs-says-why' && ! echo "$err" | grep -q 'lib-line' &&
	pass "the error's tail is the failing member's own output, not the other's" || fail "the error's tail is the failing member's own output, not the other's" "$err"
log="$(cat "$WARREN_HOME"/logs/build-*.log)"
echo "$log" | grep -q '^\[lib\] lib-line-1' && echo "$log" | grep -q '^\[lib\] lib-line-2' && echo "$log" | grep -q '^\[docs\] docs-says-why' &&
	pass "every member's output is in the log, behind its name" || fail "every member's output is in the log, behind its name" "$(echo "$log" | grep '^\[' )"
