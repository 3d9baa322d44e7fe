#!/bin/bash
# The agents layer (src/agents/layer.c, through the test hook
# build/tests/agents_layer_build): a preset's CLI installed from an npm
# registry - the stand-in tests/tools/npm_registry.py serving the real
# tarballs that scripts/fetch-agent-packages.sh fetched (make test-deps) -
# in a build sandbox whose only way out is the build's egress proxy
# allowing the registry's host. The layer has the CLI and it runs, in a
# sandbox too; it is read-only and marked complete; a second call reuses
# it without a request; two at once build once; a bad spec is refused by
# name; a failing registry gives npm's error and leaves nothing; a
# tarball on another host is refused by the proxy; a stale stage is
# removed; nothing is left behind.
. "$(dirname "$0")/../lib.sh"

AGENT_PACKAGES="${WARREN_AGENT_PACKAGES:-/var/cache/warren-test/agents}"
HOOK="$ROOT_DIR/$BUILD/tests/agents_layer_build"
CODEX_TGZ="$AGENT_PACKAGES/openai-codex-0.171.0.tgz"
CODEX_X64_TGZ="$AGENT_PACKAGES/openai-codex-0.171.0-linux-x64.tgz"
if [ ! -s "$CODEX_TGZ" ] || [ ! -s "$CODEX_X64_TGZ" ]; then
	echo "SKIP agents_layer: the agent packages are not in $AGENT_PACKAGES (make test-deps fetches them: scripts/fetch-agent-packages.sh)" >&2
	exit 0
fi
if [ ! -x "$HOOK" ]; then
	fail "the test hook is built" "no $HOOK (make $BUILD/tests/agents_layer_build)"
	exit 0
fi

DATA="$TEST_TMP/data"
mkdir -p "$DATA"
PIDS=""
stop_all() { for p in $PIDS; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; }
trap 'stop_all; rm -rf "$TEST_TMP"' EXIT

# start_registry NAME DIR PUBLIC_HOST: a stand-in on loopback; sets
# PORT_<NAME> and PID_<NAME>, logs to $TEST_TMP/NAME.log
start_registry() {
	local name="$1" dir="$2" host="$3"
	python3 "$ROOT_DIR/tests/tools/npm_registry.py" --tarballs "$dir" --port 0 \
		--public-host "$host" --log "$TEST_TMP/$name.log" \
		>"$TEST_TMP/$name.port" 2>"$TEST_TMP/$name.err" &
	local pid=$!
	PIDS="$PIDS $pid"
	for _ in $(seq 1 300); do [ -s "$TEST_TMP/$name.port" ] && break; sleep 0.1; done
	eval "PORT_$name=\"\$(head -1 \"\$TEST_TMP/\$name.port\")\"; PID_$name=$pid"
	touch "$TEST_TMP/$name.log"
}

# the real tarballs: codex and its linux-x64 package (the smallest preset)
mkdir -p "$TEST_TMP/real"
ln -s "$CODEX_TGZ" "$CODEX_X64_TGZ" "$TEST_TMP/real/"
start_registry real "$TEST_TMP/real" registry.warren.test
# tiny packages of our own, for the fast cases
mk_tiny() { # NAME VERSION: a package with a bin
	local d="$TEST_TMP/pkg-$1/package"
	mkdir -p "$d/bin" "$TEST_TMP/tiny"
	printf '{"name": "%s", "version": "%s", "bin": {"%s": "bin/%s"}}\n' "$1" "$2" "$1" "$1" >"$d/package.json"
	printf '#!/bin/sh\necho %s %s\n' "$1" "$2" >"$d/bin/$1"
	chmod +x "$d/bin/$1"
	tar -C "$TEST_TMP/pkg-$1" -czf "$TEST_TMP/tiny/$1-$2.tgz" package
}
mk_tiny wr-tiny-a 1.0.0
mk_tiny wr-tiny-b 2.0.0
mk_tiny wr-tiny-c 3.0.0
start_registry tiny "$TEST_TMP/tiny" registry.warren.test
# the same packages, their tarballs on another host (the packument from
# the registry's host)
start_registry other "$TEST_TMP/tiny" other.warren.test
if [ -z "${PORT_real:-}" ] || [ -z "${PORT_tiny:-}" ] || [ -z "${PORT_other:-}" ]; then
	fail "the registry stand-ins start" "$(cat "$TEST_TMP"/*.err)"
	exit 0
fi

# the server's rules, as warren serve writes them: loopback allowed by
# address, both names mapped there (so only the allowlist tells them apart)
RULES="$TEST_TMP/egress.json"
cat >"$RULES" <<EOF
{"allow_addresses": ["127.0.0.1/32"], "hosts": {"registry.warren.test": "127.0.0.1", "other.warren.test": "127.0.0.1"}, "self": "127.0.0.1:9"}
EOF
layer() { # REGISTRY_PORT SPEC...
	local port="$1"
	shift
	"$HOOK" --data "$DATA" --warren "$WARREN" --registry "http://registry.warren.test:$port/" \
		--egress-config "$RULES" --timeout-ms 300000 "$@"
}

# ---- a real CLI ----
t0=$(date +%s%N)
path="$(layer "$PORT_real" @openai/codex@0.171.0 2>"$TEST_TMP/codex.err")"
rc=$?
t1=$(date +%s%N)
echo "$path" | grep -Eq "^$DATA/agents/[0-9a-f]{64}$" && [ $rc = 0 ] \
	&& pass "codex's layer is built under DATA/agents/<id> ($(((t1 - t0) / 1000000)) ms)" \
	|| fail "codex's layer is built under DATA/agents/<id>" "rc=$rc path=$path $(tail -12 "$TEST_TMP/codex.err" | tr '\n' ' ')"
BIN=node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex
expect_output "the layer's codex runs" "^codex-cli 0.171.0$" "$path/$BIN" --version
expect_output "it runs in a sandbox, the layer bound read-only" "^codex-cli 0.171.0$" \
	sb --bind "$path:/opt/warren/agents:ro" -- /opt/warren/agents/$BIN --version
grep -q '"packages": \[' "$path/warren-agents-layer.json" 2>/dev/null && grep -q '@openai/codex@0.171.0' "$path/warren-agents-layer.json" \
	&& pass "the layer is marked complete" || fail "the layer is marked complete" "$(ls -la "$path" 2>&1 | head -5)"
writable="$(find "$path" -perm /222 ! -type l 2>/dev/null | head -3)"
[ -d "$path/node_modules" ] && [ -z "$writable" ] && pass "the layer is read-only (a-w)" || fail "the layer is read-only (a-w)" "writable: $writable"
grep -q "^GET /@openai/codex/-/codex-0.171.0-linux-x64.tgz$" "$TEST_TMP/real.log" \
	&& pass "the platform package came from the stand-in" || fail "the platform package came from the stand-in" "$(cat "$TEST_TMP/real.log")"

# a second call: the same layer, no request, fast
before="$(wc -l <"$TEST_TMP/real.log")"
t0=$(date +%s%N)
again="$(layer "$PORT_real" @openai/codex@0.171.0 2>&1)"
t1=$(date +%s%N)
ms=$(((t1 - t0) / 1000000))
after="$(wc -l <"$TEST_TMP/real.log")"
[ "$again" = "$path" ] && [ "$before" = "$after" ] && [ $ms -lt 2000 ] \
	&& pass "a second call reuses it: no request ($ms ms)" \
	|| fail "a second call reuses it: no request" "got $again, requests $before -> $after, $ms ms"

# ---- an interrupted build: its builder killed mid-install ----
# (the platform package alone: another id, the same 170 MB tarball)
# (the hook itself in the background, not the function's subshell: $! is
# the builder that the kill must hit)
"$HOOK" --data "$DATA" --warren "$WARREN" --registry "http://registry.warren.test:$PORT_real/" \
	--egress-config "$RULES" --timeout-ms 300000 @openai/codex@0.171.0-linux-x64 >/dev/null 2>&1 &
killed=$!
for _ in $(seq 1 100); do
	ls -d "$DATA"/agents/.build-* >/dev/null 2>&1 && [ "$(wc -l <"$TEST_TMP/real.log")" -gt "$after" ] && break
	sleep 0.1
done
sleep 0.5
kill -9 $killed; wait $killed 2>/dev/null
n_layers="$(ls "$DATA/agents" | grep -Ec '^[0-9a-f]{64}$')"
stale="$(ls -d "$DATA"/agents/.build-* 2>/dev/null | wc -l)"
[ "$n_layers" = 1 ] && [ "$stale" = 1 ] \
	&& pass "a killed build leaves no layer (only its stage)" \
	|| fail "a killed build leaves no layer (only its stage)" "layers $n_layers, stages $stale: $(ls -a "$DATA/agents")"
# at once, while the killed build's sandbox is still going down (SIGTERM
# through --die-with-parent, then init's grace) and its npm may still
# write into the stage: its `warren sandbox run` holds the id's lock until
# the sandbox's last process is gone, so the next call waits for that,
# then removes the stage and builds
p_x64="$(layer "$PORT_real" @openai/codex@0.171.0-linux-x64 2>"$TEST_TMP/x64.err")"
rc=$?
[ $rc = 0 ] && [ -x "$p_x64/node_modules/@openai/codex/vendor/x86_64-unknown-linux-musl/bin/codex" ] \
	&& [ -z "$(ls -d "$DATA"/agents/.build-* 2>/dev/null)" ] \
	&& pass "the next call builds it and removes the stale stage" \
	|| fail "the next call builds it and removes the stale stage" "rc=$rc $(tail -5 "$TEST_TMP/x64.err" | tr '\n' ' ') $(ls -a "$DATA/agents" | tr '\n' ' '); stage: $(find "$DATA"/agents/.build-* -maxdepth 3 2>/dev/null | head -20 | tr '\n' ' ')"
expect_no_output "the killed build's sandbox is gone" "^run-" "$WARREN" sandbox ls --data "$DATA"

# ---- two at once: one build ----
layer "$PORT_tiny" wr-tiny-a@1.0.0 wr-tiny-b@2.0.0 >"$TEST_TMP/c1.out" 2>"$TEST_TMP/c1.err" &
c1=$!
layer "$PORT_tiny" wr-tiny-b@2.0.0 wr-tiny-a@1.0.0 >"$TEST_TMP/c2.out" 2>"$TEST_TMP/c2.err" &
c2=$!
wait $c1; r1=$?
wait $c2; r2=$?
p1="$(cat "$TEST_TMP/c1.out")"
p2="$(cat "$TEST_TMP/c2.out")"
n="$(grep -c "^GET /wr-tiny-a/-/wr-tiny-a-1.0.0.tgz$" "$TEST_TMP/tiny.log")"
[ $r1 = 0 ] && [ $r2 = 0 ] && [ -n "$p1" ] && [ "$p1" = "$p2" ] && [ "$n" = 1 ] \
	&& pass "two calls at once (specs in any order): one layer, built once" \
	|| fail "two calls at once (specs in any order): one layer, built once" "rc $r1 $r2, paths '$p1' '$p2', tarball fetched $n times; $(cat "$TEST_TMP/c1.err" "$TEST_TMP/c2.err" | tail -4 | tr '\n' ' ')"
expect_output "the tiny layer has its bin" "^wr-tiny-a 1.0.0$" "$p1/node_modules/.bin/wr-tiny-a"

# ---- refused specs ----
for spec in 'git+https://github.com/x/y.git' 'file:../x' 'left-pad@^1.0.0' 'http://evil.test/x.tgz' \
	'--registry=http://evil.test/' '-g@1.0.0' 'left-pad' '../x@1.0.0' 'Left-Pad@1.0.0' 'x@npm:y@1'; do
	out="$(layer "$PORT_tiny" wr-tiny-a@1.0.0 "$spec" 2>&1)"
	rc=$?
	if [ $rc = 2 ] && echo "$out" | grep -qF -- "'$spec' is not a plain npm spec"; then
		pass "spec '$spec' is refused, named"
	else
		fail "spec '$spec' is refused, named" "rc=$rc $out"
	fi
done

# ---- a stale stage from a killed builder is removed ----
STALE_ID="$(printf '%064d' 0 | tr 0 a)"
mkdir -p "$DATA/agents/.build-$STALE_ID.XyZ123/upper/opt" "$DATA/agents/.build-$STALE_ID.XyZ123/work/work"
chmod 0 "$DATA/agents/.build-$STALE_ID.XyZ123/work/work"
: >"$DATA/agents/$STALE_ID.lock"
layer "$PORT_tiny" wr-tiny-a@1.0.0 >/dev/null 2>&1
[ -e "$DATA/agents/.build-$STALE_ID.XyZ123" ] && fail "a stale stage (no builder holds its lock) is removed" "still there" \
	|| pass "a stale stage (no builder holds its lock) is removed"

# ---- the proxy allows the registry's host only ----
out="$(layer "$PORT_other" wr-tiny-c@3.0.0 2>&1)"
rc=$?
LOG="$(ls -t "$DATA"/logs/agents-*.log | head -1)"
grep -q "^GET /wr-tiny-c$" "$TEST_TMP/other.log"; got_packument=$?
[ $rc = 1 ] && [ $got_packument = 0 ] && grep -q '^egress: {"decision":"denied".*"host":"other.warren.test".*not in the allowlist' "$LOG" \
	&& pass "a tarball on another host is refused by the build's proxy" \
	|| fail "a tarball on another host is refused by the build's proxy" "rc=$rc packument=$got_packument $(grep egress "$LOG" | tail -2) $out"
bad="$(cat "$DATA"/logs/agents-*.log | grep '^egress: {"decision":"allowed"' | grep -v '"host":"registry.warren.test"')"
[ -z "$bad" ] && grep -q '^egress: {"decision":"allowed"' "$DATA"/logs/agents-*.log \
	&& pass "every request allowed went to the registry's host" || fail "every request allowed went to the registry's host" "$bad"
id_c="$(ls "$DATA/agents" | grep -E '^[0-9a-f]{64}$' | wc -l)"

# ---- a registry that fails ----
kill "$PID_tiny"; wait "$PID_tiny" 2>/dev/null
out="$(layer "$PORT_tiny" wr-tiny-c@3.0.0 2>&1)"
rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "npm install wr-tiny-c@3.0.0 failed with status" && echo "$out" | grep -q "npm error" \
	&& pass "a failing registry: the error names npm's output" \
	|| fail "a failing registry: the error names npm's output" "rc=$rc $out"
n_after="$(ls "$DATA/agents" | grep -E '^[0-9a-f]{64}$' | wc -l)"
[ "$id_c" = "$n_after" ] && [ "$n_after" = 4 ] && pass "failed builds leave no layer" \
	|| fail "failed builds leave no layer" "layers $id_c -> $n_after: $(ls "$DATA/agents")"

# ---- nothing left behind ----
left="$(ls -d "$DATA"/agents/.build-* 2>/dev/null)"
[ -z "$left" ] && pass "no stage directory is left" || fail "no stage directory is left" "$left"
ls -d "$DATA"/build-egress.* >/dev/null 2>&1 && fail "no proxy socket directory is left" "$(ls -d "$DATA"/build-egress.*)" \
	|| pass "no proxy socket directory is left"
pgrep -f "warren-egress --dir $DATA" >/dev/null && fail "no build proxy is left running" "$(pgrep -af warren-egress)" \
	|| pass "no build proxy is left running"
expect_no_output "no build sandbox is left" "^run-" "$WARREN" sandbox ls --data "$DATA"
