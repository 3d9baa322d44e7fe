#!/bin/bash
# The web UI in a real browser: a warren serve whose model is a recorded
# transcript (replay) and whose repository's remote is a bare repository;
# tokens for alice and carol (submitters) and bob (a reviewer); then
# tests/browser/web.test.mjs drives Debian's Chromium through playwright-core
# (headless, off the network): sign-in, the live list, a session started
# from the form and followed to review, its diff, verification and
# screenshot, what each role may do, approval (the branch checked on the
# remote with git here), rejection, the repositories and stats pages, a
# phone's width. One result line per check of the script; screenshots and
# timings in $BUILD/test-artifacts/web/.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"

BROWSER_DIR="$ROOT_DIR/tests/browser"
OUT="$ROOT_DIR/$BUILD/test-artifacts/web"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
rm -rf "$OUT"
mkdir -p "$OUT"

# --- what the browser test needs: node, Chromium, playwright-core --------------
missing=""
command -v node >/dev/null 2>&1 || missing="$missing node (Debian package nodejs)"
[ -x "$CHROMIUM" ] || missing="$missing $CHROMIUM (Debian package chromium)"
if [ -n "$missing" ]; then
	fail "the browser test can run" "missing:$missing; 'make check' as root installs them"
	exit 0
fi
want="$(jq -r '.dependencies["playwright-core"]' "$BROWSER_DIR/package.json")"
have="$(jq -r .version "$BROWSER_DIR/node_modules/playwright-core/package.json" 2>/dev/null)"
if [ "$have" != "$want" ]; then
	if ! command -v npm >/dev/null 2>&1; then
		fail "playwright-core $want is installed" "npm is missing (Debian package npm) and tests/browser/node_modules lacks playwright-core"
		exit 0
	fi
	if ! (cd "$BROWSER_DIR" && npm ci --no-audit --no-fund --loglevel=error) >"$TEST_TMP/npm.log" 2>&1; then
		fail "playwright-core $want is installed" "npm ci in tests/browser failed: $(tail -3 "$TEST_TMP/npm.log" | tr '\n' ' ')"
		exit 0
	fi
fi
have="$(jq -r .version "$BROWSER_DIR/node_modules/playwright-core/package.json" 2>/dev/null)"
[ "$have" = "$want" ] && pass "playwright-core $want is installed (tests/browser, from its lockfile)" ||
	{ fail "playwright-core $want is installed" "found '$have'"; exit 0; }

# --- a project whose remote is a bare repository --------------------------------
greeter_remote

# and one whose snapshot build fails: its hook prints in colour, then exits 3
BROKEN="$TEST_TMP/broken"
mkdir -p "$BROKEN"
cat >"$BROKEN/warren.json" <<'JSON'
{"onCreateCommand": "printf 'step one\\n\\033[0;31mBUILD-BOOM\\033[0m at the end\\n'; exit 3"}
JSON
g -C "$BROKEN" init -q -b main
g -C "$BROKEN" add -A
g -C "$BROKEN" commit -q -m initial

D="$TEST_TMP/data"
cat >"$TEST_TMP/config.json" <<EOF
{"model": {"provider": "replay", "replay": "$BROWSER_DIR/replay.json", "prices": {"prompt": 1.0, "completion": 2.0}},
 "verify": {"retries": 2},
 "repositories": [{"name": "greeter", "url": "$REMOTE"}, {"name": "broken", "url": "$BROKEN"}]}
EOF
export WARREN_WEB_DIR="$ROOT_DIR/web"
server_start "$D" "$TEST_TMP/config.json"

hdr="$(curl -s -D - -o "$TEST_TMP/index.html" "$URL/")"
echo "$hdr" | grep -qi "^content-security-policy: default-src 'self'; script-src 'self'; style-src 'self'" &&
	grep -q 'js/app.js' "$TEST_TMP/index.html" &&
	pass "GET / serves web/index.html with the Content-Security-Policy" ||
	fail "GET / serves web/index.html with the Content-Security-Policy" "$(echo "$hdr" | head -3 | tr '\r\n' '  ')"
# every file the page loads is served from here, with its media type
bad=""
for f in $(cd "$ROOT_DIR/web" && find . -type f \( -name '*.js' -o -name '*.css' -o -name '*.svg' \) | sed 's|^\./||'); do
	type="$(curl -s -o /dev/null -w '%{http_code} %{content_type}' "$URL/$f")"
	case "$f:$type" in
	*.js:"200 text/javascript"* | *.css:"200 text/css"* | *.svg:"200 image/svg+xml"*) ;;
	*) bad="$bad $f($type)" ;;
	esac
done
[ -z "$bad" ] && pass "every file under web/ is served with its media type" || fail "every file under web/ is served with its media type" "$bad"
grep -rEl 'https?://' "$ROOT_DIR/web" --include='*.html' --include='*.js' --include='*.css' | xargs -r grep -EHn "(src|href|url|import)[ (=:'\"]*https?://" >"$TEST_TMP/cdn.txt" 2>/dev/null
[ ! -s "$TEST_TMP/cdn.txt" ] && pass "nothing is loaded from another host (no CDN)" || fail "nothing is loaded from another host (no CDN)" "$(head -2 "$TEST_TMP/cdn.txt")"

token_for() { # USER ROLE: prints a new token
	api POST /api/v1/tokens "{\"user\": \"$1\", \"role\": \"$2\"}"
	[ "$CODE" = 201 ] && jget .token
}
ALICE_TOKEN="$(token_for alice submitter)"
CAROL_TOKEN="$(token_for carol submitter)"
BOB_TOKEN="$(token_for bob reviewer)"
if [ -z "$ALICE_TOKEN" ] || [ -z "$CAROL_TOKEN" ] || [ -z "$BOB_TOKEN" ]; then
	fail "tokens for alice, carol and bob" "$CODE $BODY"
	exit 0
fi
# the first snapshot, so that the timings measure sessions, not the build
for _ in $(seq 1 300); do
	api GET "/api/v1/snapshots?repo=greeter"
	[ "$(jget '.snapshots | length')" -ge 1 ] 2>/dev/null && break
	sleep 0.1
done

# and the broken repository's build has failed
for _ in $(seq 1 300); do
	api GET /api/v1/repositories
	[ "$(jget '.repositories[] | select(.name == "broken") | .build.state')" = failed ] && break
	sleep 0.1
done
[ "$(jget '.repositories[] | select(.name == "broken") | .build.hook')" = onCreateCommand ] &&
	pass "set-up: the broken repository's build failed in its hook" ||
	fail "set-up: the broken repository's build failed in its hook" "$(jget '.repositories[] | select(.name == "broken") | .build')"

# --- the browser ------------------------------------------------------------------
# TMPDIR and HOME in the scratch directory: Chromium's profile and anything it
# writes go there, and go with it
mkdir -p "$TEST_TMP/home"
(cd "$BROWSER_DIR" && HOME="$TEST_TMP/home" TMPDIR="$TEST_TMP" WARREN_URL="$URL" ADMIN_TOKEN="$TOKEN" \
	ALICE_TOKEN="$ALICE_TOKEN" CAROL_TOKEN="$CAROL_TOKEN" BOB_TOKEN="$BOB_TOKEN" \
	REMOTE="$REMOTE" REPO=greeter BROKEN_REPO=broken OUT_DIR="$OUT" CHROMIUM="$CHROMIUM" \
	timeout -k 10 280 node web.test.mjs) >"$TEST_TMP/browser.out" 2>"$TEST_TMP/browser.err"
rc=$?
sed -n -E 's/^(PASS|FAIL) /\1 web: /p' "$TEST_TMP/browser.out" >>"$WARREN_RESULTS"
grep '^TIME ' "$TEST_TMP/browser.out"
if [ "$rc" != 0 ] && ! grep -q '^FAIL ' "$TEST_TMP/browser.out"; then
	fail "the browser test runs to the end" "exit $rc: $(tail -3 "$TEST_TMP/browser.err" | tr '\n' ' ')"
fi
cp "$TEST_TMP/browser.out" "$OUT/browser.log"
cp "$TEST_TMP/browser.err" "$OUT/browser.stderr.log"

api GET "/api/v1/sessions?limit=100"
ids="$(jget '.sessions[].id')"
server_stop
cp "$SERVER_LOG" "$OUT/serve.log" 2>/dev/null

# --- nothing left behind ------------------------------------------------------------
left="$(pgrep -f -- "$TEST_TMP" 2>/dev/null | grep -vx "$$")"
if [ -z "$left" ]; then
	pass "the browser is closed (no process left)"
else
	fail "the browser is closed (no process left)" "$(ps -o pid=,args= -p "$(echo $left | tr ' ' ',')" | cut -c1-120 | head -3 | tr '\n' ' ')"
	kill -9 $left 2>/dev/null
fi
profiles="$(find "$TEST_TMP" -maxdepth 1 -name 'playwright*' 2>/dev/null)"
[ -z "$profiles" ] && pass "the browser's profile is removed" || fail "the browser's profile is removed" "$profiles"
stale=""
for s in $ids; do "$WARREN" sandbox ls --all 2>/dev/null | grep -q "ws-$s" && stale="$stale $s"; done
[ -z "$stale" ] && pass "no sandbox left" || fail "no sandbox left" "$stale"
shots="$(find "$OUT" -name '*.png' | wc -l)"
[ "$shots" -ge 10 ] && pass "screenshots saved in $BUILD/test-artifacts/web ($shots)" || fail "screenshots saved in $BUILD/test-artifacts/web" "$shots found"
