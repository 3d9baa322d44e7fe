#!/bin/bash
# Snapshot builds with egress: a Node project whose onCreateCommand is
# `npm ci` against an npm registry (the stand-in tests/tools/npm_registry.py,
# on loopback) reaches it through the build's own egress proxy
# (warren-egress), for the hosts its spec names (buildEgress), under the
# server's deny rules; sessions from the snapshot get no network; a spec
# without the host, or the default rules (no loopback), fail the build and
# publish nothing; an unchanged lockfile reuses the dependencies layer
# without a request; nothing is left behind.
. "$(dirname "$0")/../lib.sh"

export WARREN_HOME="$TEST_TMP/data"
FIX="$ROOT_DIR/tests/fixtures"
snap() { "$WARREN" snapshot "$@"; }
REG_PID=""
cleanup_registry() { [ -n "$REG_PID" ] && kill "$REG_PID" 2>/dev/null; wait "$REG_PID" 2>/dev/null; }
trap 'cleanup_registry; rm -rf "$TEST_TMP"' EXIT

if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
	fail "node and npm are installed" "$(command -v node) $(command -v npm)"
	exit 0
fi

APP="$TEST_TMP/node-app"
cp -a "$FIX/node-app" "$APP"
REG_LOG="$TEST_TMP/registry.log"
python3 "$ROOT_DIR/tests/tools/npm_registry.py" --packages "$FIX/npm-registry" \
	--port 0 --lock "$APP" --public-host registry.warren.test --log "$REG_LOG" \
	>"$TEST_TMP/registry.port" 2>"$TEST_TMP/registry.err" &
REG_PID=$!
for _ in $(seq 1 50); do [ -s "$TEST_TMP/registry.port" ] && break; sleep 0.1; done
PORT="$(head -1 "$TEST_TMP/registry.port")"
if [ -z "$PORT" ]; then
	fail "the registry stand-in starts" "$(cat "$TEST_TMP/registry.err")"
	exit 0
fi
sed -i "s/\"registry.warren.test\"/\"registry.warren.test:$PORT\"/" "$APP/warren.json"
git -C "$APP" init -q -b main
git -C "$APP" -c user.email=t@warren -c user.name=test add -A
git -C "$APP" -c user.email=t@warren -c user.name=test commit -q -m "initial"

# the server's rules, as warren serve writes them: the test's loopback
# registry allowed by address, its name mapped there
RULES="$TEST_TMP/egress.json"
cat >"$RULES" <<EOF
{"allow_addresses": ["127.0.0.1/32"], "hosts": {"registry.warren.test": "127.0.0.1"}, "self": "127.0.0.1:9"}
EOF

out="$(snap build --json --egress-config "$RULES" "$APP" 2>"$TEST_TMP/build.err")"
rc=$?
[ $rc = 0 ] && pass "npm ci at snapshot time, through the build's proxy" || fail "npm ci at snapshot time, through the build's proxy" "rc=$rc $(tail -8 "$TEST_TMP/build.err" | tr '\n' ' ')"
id="$(echo "$out" | jq -r .id 2>/dev/null)"
grep -q "egress 1 host through the build's proxy" "$TEST_TMP/build.err" && pass "the build says it has egress" || fail "the build says it has egress" "$(head -5 "$TEST_TMP/build.err")"
grep -q "^GET /wr-greet/-/wr-greet-1.0.0.tgz$" "$REG_LOG" && grep -q "^GET /wr-left-pad/-/wr-left-pad-1.0.0.tgz$" "$REG_LOG" \
	&& pass "the registry served both tarballs" || fail "the registry served both tarballs" "$(cat "$REG_LOG" 2>/dev/null)"
LOG="$(ls -t "$WARREN_HOME"/logs/build-*.log 2>/dev/null | head -1)"
grep -q '^egress: {"decision":"allowed","kind":"http","method":"GET","host":"registry.warren.test","port":'"$PORT"'.*"bytes_down":[1-9]' "$LOG" \
	&& pass "each request is in the build log with its bytes" || fail "each request is in the build log with its bytes" "$(grep egress "$LOG" | head -3)"

# the snapshot holds the dependencies; a session from it has no network
if [ -n "$id" ]; then
	expect_output "the dependencies are in the snapshot" "^hello,   ada$" sb --snapshot "$id" -- node index.js ada
	expect_output "the project's tests pass from the snapshot" "^ok   banner$" sb --snapshot "$id" -- npm test --silent
	expect_output "a session has no proxy variables" "^none$" sb --snapshot "$id" -- sh -c 'env | grep -i _proxy || echo none'
	expect_status "a session cannot reach the registry" 7 sb --snapshot "$id" -- \
		curl -sS --max-time 5 -o /dev/null "http://127.0.0.1:$PORT/wr-greet"
	expect_output "no proxy setting is left in the layers" "^clean$" sh -c \
		"grep -rlsI -e '127.0.0.1:3128' -e 'warren-egress' '$WARREN_HOME/layers' || echo clean"
else
	fail "the dependencies are in the snapshot" "no snapshot id: $out"
fi

# an unchanged lockfile: the dependencies layer is reused, no request
before="$(wc -l <"$REG_LOG")"
echo "// touched" >>"$APP/index.js"
git -C "$APP" -c user.email=t@warren -c user.name=test commit -q -am "touch"
snap build --egress-config "$RULES" "$APP" >/dev/null 2>"$TEST_TMP/build2.err"
rc=$?
after="$(wc -l <"$REG_LOG")"
[ $rc = 0 ] && grep -q "dependencies layer .* reused" "$TEST_TMP/build2.err" && [ "$before" = "$after" ] \
	&& pass "an unchanged lockfile reuses the dependencies layer, no request" \
	|| fail "an unchanged lockfile reuses the dependencies layer, no request" "rc=$rc requests $before -> $after $(grep -i install "$TEST_TMP/build2.err")"

n_before="$(snap list --json | jq 'length')"
# the server's deny rules win: without allow_addresses, loopback is denied
# (the name still maps to the registry's address)
DENY="$TEST_TMP/egress-deny.json"
echo '{"hosts": {"registry.warren.test": "127.0.0.1"}}' >"$DENY"
out="$(snap build --rebuild-deps --egress-config "$DENY" "$APP" 2>&1)"
rc=$?
[ $rc != 0 ] && echo "$out" | grep -q "onCreateCommand" && pass "deny rules (no loopback): the hook fails, named" || fail "deny rules (no loopback): the hook fails, named" "rc=$rc $(echo "$out" | tail -4 | tr '\n' ' ')"
LOG="$(ls -t "$WARREN_HOME"/logs/build-*.log | head -1)"
grep -q '^egress: {"decision":"denied".*"host":"registry.warren.test".*an address of this host' "$LOG" \
	&& pass "the denial is in the build log with its reason" || fail "the denial is in the build log with its reason" "$(grep egress "$LOG" | head -3)"

# a host the spec does not name is refused, whatever the rules allow
sed -i "s/registry.warren.test:$PORT/other.warren.test:$PORT/" "$APP/warren.json"
git -C "$APP" -c user.email=t@warren -c user.name=test commit -q -am "another host"
out="$(snap build --egress-config "$RULES" "$APP" 2>&1)"
rc=$?
LOG="$(ls -t "$WARREN_HOME"/logs/build-*.log | head -1)"
[ $rc != 0 ] && grep -q '^egress: {"decision":"denied".*"host":"registry.warren.test".*not in the allowlist' "$LOG" \
	&& pass "a host outside the spec's list is refused" || fail "a host outside the spec's list is refused" "rc=$rc $(grep egress "$LOG" | head -2)"
n_after="$(snap list --json | jq 'length')"
[ "$n_before" = "$n_after" ] && pass "a failed build publishes nothing" || fail "a failed build publishes nothing" "$n_before -> $n_after"

# nothing left behind: no proxy, no socket directory
pgrep -f "warren-egress --dir $WARREN_HOME" >/dev/null && fail "no build proxy is left running" "$(pgrep -af warren-egress)" || pass "no build proxy is left running"
ls -d "$WARREN_HOME"/build-egress.* >/dev/null 2>&1 && fail "no build socket directory is left" "$(ls -d "$WARREN_HOME"/build-egress.*)" || pass "no build socket directory is left"
