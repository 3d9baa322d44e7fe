#!/bin/bash
# API tokens and roles against a real warren serve (docs/api.md "Roles"):
# `warren token create|ls|revoke`; two submitters and a reviewer on the
# real routes of a session that reached review (a submitter finds nothing
# of another's, a reviewer reads and decides but neither messages nor
# cancels it, only an admin adds or refreshes repositories and handles
# tokens); a revoked token refused on its very next request (inside the
# server's token cache window); an expired token refused; an admin
# revoking its own token; a restart with every admin token revoked making
# a new one; and no plain token in the server's log, its database or the
# token list.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"

# --- a repository: a tiny project with a test script -----------------------
R="$TEST_TMP/proj"
mkdir -p "$R"
cat >"$R/warren.json" <<'EOF'
{"customizations": {"warren": {"verify": ["sh", "test.sh"]}}}
EOF
printf 'hello\n' >"$R/greeting.txt"
printf '#!/bin/sh\ngrep -q hello greeting.txt\n' >"$R/test.sh"
git -C "$R" init -q -b main
git -C "$R" -c user.email=t@warren -c user.name=test add -A
git -C "$R" -c user.email=t@warren -c user.name=test commit -q -m initial

D="$TEST_TMP/data"
server_start "$D"
ADMIN="$TOKEN"
[ -n "$ADMIN" ] && pass "server started, admin token" || fail "server started, admin token" "$(tail -5 "$SERVER_LOG")"

# W ARGS...: the client as the admin
W() { "$WARREN" "$@" --server "$URL" --token "$ADMIN"; }
# as TOKEN METHOD PATH [BODY]: api (control_lib.sh) with another token
as() {
	local tok="$1"
	shift
	TOKEN="$tok" api "$@"
}
# expect NAME WANT-CODE TOKEN METHOD PATH [BODY]
expect() {
	local name="$1" want="$2"
	shift 2
	as "$@"
	[ "$CODE" = "$want" ] && pass "$name" || fail "$name" "got $CODE, want $want: $BODY"
}

# --- tokens: create -------------------------------------------------------------
SAM="$(W token create --user sam --role submitter --name sam-laptop 2>"$TEST_TMP/create.err")"
SUE="$(W token create --user sue --role submitter --name sue-ci 2>/dev/null)"
RITA="$(W token create --user rita --role reviewer --name rita 2>/dev/null)"
case "$SAM$SUE$RITA" in
wr_*wr_*wr_*) [ "$(printf '%s\n' "$SAM" "$SUE" "$RITA" | sort -u | wc -l)" = 3 ] &&
	pass "token create prints three new tokens" || fail "token create prints three new tokens" "$SAM $SUE $RITA" ;;
*) fail "token create prints three new tokens" "'$SAM' '$SUE' '$RITA' $(cat "$TEST_TMP/create.err")" ;;
esac
grep -q "^token sam-laptop for sam (role submitter); it will not be shown again" "$TEST_TMP/create.err" &&
	pass "token create says its name on stderr" || fail "token create says its name on stderr" "$(cat "$TEST_TMP/create.err")"
expect_output "token create of a name that is taken: 409" "HTTP 409 conflict" W token create --user x --role admin --name rita
expect_status "token create of a name that is taken: exit 1" 1 W token create --user x --role admin --name rita
expect_status "token create --expires 5x: exit 2" 2 W token create --user x --role admin --expires 5x
expect_status "token ls --user: exit 2" 2 W token ls --user x
expect_status "token revoke without a name: exit 2" 2 W token revoke
out="$(W token create --user json --role submitter --name json-1 --expires 1h --json 2>&1)"
[ "$(echo "$out" | jq -r '.name + " " + .user + " " + .role + " " + (.expires_ms > 0 | tostring) + " " + (.token | startswith("wr_") | tostring)')" = "json-1 json submitter true true" ] &&
	pass "token create --json: name, user, role, expires_ms, token" || fail "token create --json: name, user, role, expires_ms, token" "$out"
JSON_TOKEN="$(echo "$out" | jq -r .token)"

# --- repositories: the admin's ---------------------------------------------------
expect "a submitter cannot add a repository" 403 "$SAM" POST /api/v1/repositories "{\"url\": \"$R\", \"name\": \"proj\"}"
expect "a reviewer cannot add a repository" 403 "$RITA" POST /api/v1/repositories "{\"url\": \"$R\", \"name\": \"proj\"}"
expect "the admin adds a repository" 201 "$ADMIN" POST /api/v1/repositories "{\"url\": \"$R\", \"name\": \"proj\"}"
RID="$(jget .id)"
expect "a submitter cannot refresh a repository" 403 "$SAM" POST "/api/v1/repositories/$RID/refresh"
expect "a reviewer cannot refresh a repository" 403 "$RITA" POST "/api/v1/repositories/$RID/refresh"
expect "a submitter lists the repositories" 200 "$SAM" GET /api/v1/repositories
expect "a submitter cannot register a repository by a session" 403 "$SAM" POST /api/v1/sessions "{\"repo\": \"$TEST_TMP\", \"prompt\": \"x\", \"agent\": \"true\"}"
expect "a reviewer lists the snapshots" 200 "$RITA" GET /api/v1/snapshots

# --- sessions: sam's, in review ------------------------------------------------------
S="$(TOKEN="$SAM" submit proj "change the greeting" 'echo "hello, world" >greeting.txt')"
[ -n "$S" ] && pass "sam submits a session" || fail "sam submits a session" "$CODE $BODY"
TOKEN="$SAM" wait_state "$S" review 120 && pass "sam's session reaches review" || fail "sam's session reaches review" "$STATE"
SUE_S="$(TOKEN="$SUE" submit proj "sue's" 'sleep 60')"

# sue, a submitter: another user's session does not exist; deciding is not hers
expect "sue: GET another's session: 404" 404 "$SUE" GET "/api/v1/sessions/$S"
expect "sue: its events (json): 404" 404 "$SUE" GET "/api/v1/sessions/$S/events?format=json"
code="$(curl -s -o /dev/null -w '%{http_code}' -m 5 -H "Authorization: Bearer $SUE" "$URL/api/v1/sessions/$S/events")"
[ "$code" = 404 ] && pass "sue: its event stream: 404" || fail "sue: its event stream: 404" "got $code"
expect "sue: a message to it: 404" 404 "$SUE" POST "/api/v1/sessions/$S/messages" '{"text": "hi"}'
expect "sue: cancel it: 404" 404 "$SUE" POST "/api/v1/sessions/$S/cancel"
expect "sue: approve it: 403" 403 "$SUE" POST "/api/v1/sessions/$S/approve"
expect "sue: reject it: 403" 403 "$SUE" POST "/api/v1/sessions/$S/reject" '{"reason": "no"}'
expect "sue: its diff: 404" 404 "$SUE" GET "/api/v1/sessions/$S/diff"
expect "sue: its artifacts: 404" 404 "$SUE" GET "/api/v1/sessions/$S/artifacts"
expect "sue: its diff.patch artifact: 404" 404 "$SUE" GET "/api/v1/sessions/$S/artifacts/diff.patch"
expect "sue: sam's sessions by user: 403" 403 "$SUE" GET "/api/v1/sessions?user=sam"
as "$SUE" GET "/api/v1/sessions?limit=500"
[ "$(echo "$BODY" | jq -r '[.sessions[].user] | unique | join(",")')" = sue ] &&
	pass "sue's list holds only sue's sessions" || fail "sue's list holds only sue's sessions" "$BODY"
TOKEN="$SAM" api GET "/api/v1/sessions/$S"
[ "$CODE" = 200 ] && [ "$(jget .state)" = review ] && pass "nothing sue tried changed sam's session" || fail "nothing sue tried changed sam's session" "$CODE $BODY"

# sam, its owner: reads it, may not decide on it
expect "sam: GET its own session" 200 "$SAM" GET "/api/v1/sessions/$S"
expect "sam: its own diff" 200 "$SAM" GET "/api/v1/sessions/$S/diff"
expect "sam: approve its own: 403" 403 "$SAM" POST "/api/v1/sessions/$S/approve"
expect "sam: sue's session: 404" 404 "$SAM" GET "/api/v1/sessions/$SUE_S"

# rita, a reviewer: reads anyone's, decides; messages and cancels only its own
expect "rita: GET sam's session" 200 "$RITA" GET "/api/v1/sessions/$S"
expect "rita: its events" 200 "$RITA" GET "/api/v1/sessions/$S/events?format=json"
expect "rita: its diff" 200 "$RITA" GET "/api/v1/sessions/$S/diff"
echo "$BODY" | grep -q '^+hello, world' && pass "rita: the diff is the change" || fail "rita: the diff is the change" "$BODY"
expect "rita: its artifacts" 200 "$RITA" GET "/api/v1/sessions/$S/artifacts"
expect "rita: sam's sessions by user" 200 "$RITA" GET "/api/v1/sessions?user=sam"
expect "rita: a message to sam's session: 403" 403 "$RITA" POST "/api/v1/sessions/$S/messages" '{"text": "hi"}'
expect "rita: cancel sam's session: 403" 403 "$RITA" POST "/api/v1/sessions/$S/cancel"
expect "rita: cancel sue's session: 403" 403 "$RITA" POST "/api/v1/sessions/$SUE_S/cancel"
expect "rita: reject sam's session" 200 "$RITA" POST "/api/v1/sessions/$S/reject" '{"reason": "not this way"}'
[ "$(jget .state)" = rejected ] && [ "$(jget .outcome.decision.by)" = rita ] &&
	pass "rita's rejection is recorded as hers" || fail "rita's rejection is recorded as hers" "$BODY"
# the admin: anyone's
expect "the admin cancels sue's session" 200 "$ADMIN" POST "/api/v1/sessions/$SUE_S/cancel"

# --- tokens: the admin's --------------------------------------------------------------
expect "sam: GET /tokens: 403" 403 "$SAM" GET /api/v1/tokens
expect "rita: GET /tokens: 403" 403 "$RITA" GET /api/v1/tokens
expect "rita: POST /tokens: 403" 403 "$RITA" POST /api/v1/tokens '{"user": "rita", "role": "admin"}'
expect "sam: DELETE /tokens/rita: 403" 403 "$SAM" DELETE /api/v1/tokens/rita
expect "rita: DELETE /tokens/sue-ci: 403" 403 "$RITA" DELETE /api/v1/tokens/sue-ci
expect "GET /tokens" 200 "$ADMIN" GET /api/v1/tokens
[ "$(echo "$BODY" | jq -r '[.tokens[].name] | sort | join(" ")')" = "admin json-1 rita sam-laptop sue-ci" ] &&
	pass "GET /tokens lists every token by name" || fail "GET /tokens lists every token by name" "$BODY"
[ "$(echo "$BODY" | jq -r '[.tokens[] | select(has("token") or has("hash"))] | length')" = 0 ] &&
	pass "GET /tokens has no token or hash field" || fail "GET /tokens has no token or hash field" "$BODY"

# --- revoke: refused on the next request --------------------------------------------
expect "sue's token works (and is now in the server's cache)" 200 "$SUE" GET /api/v1/sessions
out="$(W token revoke sue-ci 2>&1)"
[ "$out" = "sue-ci revoked" ] && pass "token revoke" || fail "token revoke" "$out"
expect "a revoked token: 401 at once (inside the cache window)" 401 "$SUE" GET /api/v1/sessions
expect_output "a revoked token: the CLI says 401" "HTTP 401 unauthorized" "$WARREN" sessions --server "$URL" --token "$SUE"
expect "the other tokens still work" 200 "$SAM" GET /api/v1/sessions
out="$(W token revoke sue-ci --json 2>&1)"
[ "$(echo "$out" | jq -r '.name + " " + (.revoked_ms > 0 | tostring)')" = "sue-ci true" ] &&
	pass "token revoke again: --json, the same revocation" || fail "token revoke again: --json, the same revocation" "$out"
expect_output "token revoke of an unknown name: 404" "HTTP 404 not_found" W token revoke nobody
expect_status "token revoke of an unknown name: exit 1" 1 W token revoke nobody

# --- expiry -----------------------------------------------------------------------------
SHORT="$(W token create --user temp --role submitter --name short --expires 2s 2>/dev/null)"
expect "a token with an expiry works before it" 200 "$SHORT" GET /api/v1/sessions
sleep 2.5
expect "an expired token: 401" 401 "$SHORT" GET /api/v1/sessions

# --- token ls: names, not secrets -----------------------------------------------------
LS="$(W token ls 2>&1)"
echo "$LS" | head -1 | grep -Eq '^NAME +USER +ROLE +CREATED +EXPIRES +REVOKED *$' &&
	pass "token ls: the table's columns" || fail "token ls: the table's columns" "$(echo "$LS" | head -1)"
for n in admin sam-laptop sue-ci rita short json-1; do
	echo "$LS" | grep -q "^$n " || fail "token ls shows $n" "$LS"
done
echo "$LS" | grep -Eq '^sue-ci +sue +submitter +[0-9]+[smh] ago +never +[0-9]+s ago *$' &&
	pass "token ls: a revoked token says when" || fail "token ls: a revoked token says when" "$LS"
echo "$LS" | grep -Eq '^short +temp +submitter +[0-9]+s ago +[0-9]+s ago +- *$' &&
	pass "token ls: an expired token says when" || fail "token ls: an expired token says when" "$LS"
echo "$LS" | grep -Eq '^sam-laptop +sam +submitter +[0-9]+[smh] ago +never +- *$' &&
	pass "token ls: an active token" || fail "token ls: an active token" "$LS"
LS_JSON="$(W token ls --json 2>&1)"
leaks=""
for t in "$ADMIN" "$SAM" "$SUE" "$RITA" "$SHORT" "$JSON_TOKEN"; do
	case "$LS$LS_JSON" in *"$t"*) leaks="$leaks ${t:0:8}…" ;; esac
done
[ -z "$leaks" ] && pass "token ls shows no token" || fail "token ls shows no token" "$leaks"

# --- an admin revokes its own token -----------------------------------------------------
OPS="$(W token create --user ops --role admin --name ops 2>/dev/null)"
out="$("$WARREN" token revoke ops --server "$URL" --token "$OPS" 2>&1)"
[ "$out" = "ops revoked" ] && pass "an admin revokes the token it uses" || fail "an admin revokes the token it uses" "$out"
expect "... which then stops working" 401 "$OPS" GET /api/v1/tokens

# --- no plain token in the log or the database ------------------------------------------
server_stop
leaks=""
for t in "$ADMIN" "$SAM" "$SUE" "$RITA" "$SHORT" "$JSON_TOKEN" "$OPS"; do
	grep -qF -- "$t" "$SERVER_LOG" && leaks="$leaks log:${t:0:8}…"
	# the data directory: the database (and its WAL), artifacts, ...;
	# admin.token holds the admin's token by design
	grep -rqF -D skip --exclude=admin.token -- "$t" "$D" && leaks="$leaks data:${t:0:8}…"
	sqlite3 "$D/warren.db" .dump 2>/dev/null | grep -qF -- "$t" && leaks="$leaks dump:${t:0:8}…"
done
[ -z "$leaks" ] && pass "no plain token in the server's log or data directory" || fail "no plain token in the server's log or data directory" "$leaks"
[ "$(sqlite3 "$D/warren.db" "SELECT COUNT(*) FROM tokens WHERE length(hash) = 64 AND hash NOT GLOB '*[^0-9a-f]*'")" = 7 ] &&
	pass "the database holds 7 tokens, as SHA-256 hashes" || fail "the database holds 7 tokens, as SHA-256 hashes" "$(sqlite3 "$D/warren.db" 'SELECT name, length(hash) FROM tokens')"

# --- every admin token revoked: the next start makes a new one ------------------------------
server_start "$D"
[ "$TOKEN" = "$ADMIN" ] && pass "a restart keeps the admin token" || fail "a restart keeps the admin token" "changed"
api DELETE /api/v1/tokens/admin
[ "$CODE" = 200 ] && pass "the admin revokes the first admin token" || fail "the admin revokes the first admin token" "$CODE $BODY"
server_stop
server_start "$D"
[ -n "$TOKEN" ] && [ "$TOKEN" != "$ADMIN" ] && grep -q "every admin token was revoked or has expired: a new one is written to $D/admin.token" "$SERVER_LOG" &&
	pass "no usable admin token: a start writes a new one" || fail "no usable admin token: a start writes a new one" "$(tail -3 "$SERVER_LOG")"
api GET /api/v1/tokens
[ "$CODE" = 200 ] && [ "$(echo "$BODY" | jq -r '[.tokens[] | select(.role == "admin" and .active)] | length')" = 1 ] &&
	pass "the new admin token works, and is the one active admin token" || fail "the new admin token works, and is the one active admin token" "$CODE $BODY"
expect "the revoked first admin token stays revoked" 401 "$ADMIN" GET /api/v1/healthz
server_stop
