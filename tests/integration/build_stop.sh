#!/bin/bash
# A build never outlives the server: stopping `warren serve` (SIGTERM) in the
# middle of a hung snapshot build leaves nothing behind - no hook process,
# no sandbox (record, init, cgroup), no builder.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"

HUNG="$TEST_TMP/hung"
mkdir -p "$HUNG"
# a hook that hangs: a sleep of a length no other process here has
SECS=$((3000 + $$ % 1000))
MARK="sleep $SECS"
echo "{\"onCreateCommand\": \"$MARK\"}" >"$HUNG/warren.json"
g -C "$HUNG" init -q -b main
g -C "$HUNG" add -A
g -C "$HUNG" commit -q -m initial
echo "{\"repositories\": [{\"name\": \"hung\", \"url\": \"$HUNG\"}]}" >"$TEST_TMP/serve.json"
server_start "$TEST_TMP/data" "$TEST_TMP/serve.json"
for _ in $(seq 1 100); do
	pgrep -f "$MARK" >/dev/null && break
	sleep 0.1
done
pgrep -f "$MARK" >/dev/null && pass "the hung build's hook runs" || fail "the hung build's hook runs" "$(tail -5 "$SERVER_LOG")"
before_sb="$(warren_records | wc -l)"
server_stop
gone=0
for _ in $(seq 1 100); do
	if ! pgrep -f "$MARK" >/dev/null && [ -z "$(pgrep -f 'warren snapshot refresh')" ] &&
		[ -z "$(warren_records)" ]; then
		gone=1
		break
	fi
	sleep 0.1
done
[ "$gone" = 1 ] && pass "after the server's stop: no hook, no builder, no sandbox record (of $before_sb)" ||
	fail "after the server's stop: no hook, no builder, no sandbox record" "hook: $(pgrep -af "$MARK") builder: $(pgrep -af 'snapshot refresh') records: $(warren_records)"
"$WARREN" sandbox ls >/dev/null 2>&1
live=""
for p in $(pgrep -f warren-init); do
	[ "$(awk '/^State:/ {print $2}' "/proc/$p/status" 2>/dev/null)" != Z ] && live="$live $p"
done
[ -z "$live" ] && [ -z "$(warren_cgroups)" ] && pass "no sandbox init or cgroup left" || fail "no sandbox init or cgroup left" "$live $(warren_cgroups)"
