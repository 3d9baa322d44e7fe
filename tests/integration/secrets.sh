#!/bin/bash
# Secrets end to end: set over the API and with `warren secret`, encrypted
# on disk; a repository whose spec declares REGISTRY_TOKEN gets it in its
# onCreateCommand and updateContentCommand (the hook proves it has the exact
# value by its hash, never writing the value), not in its services; while
# the build runs no process has the value on its command line and no
# warren process in its environment; afterwards the value is nowhere in the
# data directory (layers, snapshots, sessions, logs, audit, database), in
# no process's environment, and a session from the snapshot sees no trace
# of it; a hook that leaves the value in a layer fails the build and
# publishes nothing; a spec naming a secret the server does not have fails
# with a message naming it; submitters and reviewers cannot list, set or
# delete secrets (403).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"

D="$TEST_TMP/data"
VALUE="reg-$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')-tok"
PAT="$TEST_TMP/value.pattern" # grep -f: the value never on a command line
printf '%s\n' "$VALUE" >"$PAT"
HASH="$(printf %s "$VALUE" | sha256sum | cut -d' ' -f1)"

git_init() { # DIR: a repository of what DIR holds
	git -C "$1" init -q -b main
	git -C "$1" -c user.email=t@warren -c user.name=test add -A
	git -C "$1" -c user.email=t@warren -c user.name=test commit -q -m initial
}

# --- the repository: hooks that use the secret, a service that must not ----
R="$TEST_TMP/proj"
mkdir -p "$R"
cat >"$R/warren.json" <<'EOF'
{
  // the hooks check that the secret is there and record its hash only
  "onCreateCommand": "test -n \"${REGISTRY_TOKEN:-}\" || { echo no token in onCreate; exit 3; }; printf %s \"$REGISTRY_TOKEN\" | sha256sum | cut -d' ' -f1 > /workspace/.token-hash; sleep 3",
  "updateContentCommand": "test -n \"${REGISTRY_TOKEN:-}\" || exit 4; printf %s \"$REGISTRY_TOKEN\" | sha256sum | cut -d' ' -f1 > /workspace/.token-hash2; echo \"printed: $REGISTRY_TOKEN\"",
  "postCreateCommand": "if [ -n \"${REGISTRY_TOKEN:-}\" ]; then touch /workspace/.post-leak; fi",
  "customizations": {"warren": {
    "secrets": ["REGISTRY_TOKEN"],
    "services": [{"name": "svc",
                  "start": "if [ -n \"${REGISTRY_TOKEN:-}${warren_secret_REGISTRY_TOKEN:-}\" ]; then touch /workspace/.svc-leak; fi; touch /tmp/svc-up; sleep 60",
                  "ready": "test -f /tmp/svc-up"}]
  }}
}
EOF
printf 'hello\n' >"$R/greeting.txt"
git_init "$R"

server_start "$D"
[ -n "$TOKEN" ] && pass "server started" || fail "server started" "$(tail -5 "$SERVER_LOG")"

# --- roles: only an admin manages secrets -----------------------------------
api POST /api/v1/tokens '{"user": "sue", "role": "submitter", "name": "sue"}'
SUE="$(jget .token)"
api POST /api/v1/tokens '{"user": "rita", "role": "reviewer", "name": "rita"}'
RITA="$(jget .token)"
as() { # TOKEN METHOD PATH [BODY]: sets CODE
	CODE="$(curl -s -o /dev/null -w '%{http_code}' -X "$2" -H "Authorization: Bearer $1" \
		${4:+-H 'Content-Type: application/json' --data-binary "$4"} "$URL$3")"
}
for who in SUE:submitter RITA:reviewer; do
	role="${who#*:}" who="${who%:*}"
	as "${!who}" GET /api/v1/secrets
	c1="$CODE"
	as "${!who}" PUT /api/v1/secrets/REGISTRY_TOKEN '{"value": "nope-nope-nope"}'
	c2="$CODE"
	as "${!who}" DELETE /api/v1/secrets/REGISTRY_TOKEN
	[ "$c1 $c2 $CODE" = "403 403 403" ] && pass "a $role cannot list, set or delete secrets (403)" ||
		fail "a $role cannot list, set or delete secrets (403)" "$c1 $c2 $CODE"
done
[ ! -e "$D/secrets/REGISTRY_TOKEN.enc" ] && pass "...and nothing was stored" || fail "...and nothing was stored" "$(ls "$D/secrets")"

# --- set, list, delete over the API -----------------------------------------
api PUT /api/v1/secrets/REGISTRY_TOKEN "{\"value\": \"first-value-123\"}"
[ "$CODE" = 200 ] && [ "$(jget .name)" = REGISTRY_TOKEN ] && [ -n "$(jget .updated_ms)" ] &&
	pass "PUT /secrets/NAME: 200 {name, updated_ms}" || fail "PUT /secrets/NAME: 200 {name, updated_ms}" "$CODE $BODY"
echo "$BODY" | grep -q first-value && fail "the answer never echoes the value" "$BODY" || pass "the answer never echoes the value"
api GET /api/v1/secrets
[ "$CODE" = 200 ] && [ "$(jget '.secrets[0].name')" = REGISTRY_TOKEN ] && ! echo "$BODY" | grep -q first-value &&
	pass "GET /secrets lists names, never values" || fail "GET /secrets lists names, never values" "$CODE $BODY"
api PUT /api/v1/secrets/lower_case '{"value": "x-value-123"}'
c1="$CODE"
api PUT /api/v1/secrets/OK_NAME '{"value": ""}'
c2="$CODE"
api PUT /api/v1/secrets/OK_NAME '{"value": "v", "other": 1}'
c3="$CODE"
api DELETE /api/v1/secrets/NOT_THERE
c4="$CODE"
api DELETE /api/v1/secrets/bad-name
[ "$c1 $c2 $c3 $c4 $CODE" = "400 400 400 404 404" ] && pass "bad name, empty value, unknown key: 400; no such secret: 404" ||
	fail "bad name, empty value, unknown key: 400; no such secret: 404" "$c1 $c2 $c3 $c4 $CODE"

# --- the CLI: the value from stdin -------------------------------------------
W() { "$WARREN" "$@" --server "$URL" --token "$TOKEN"; }
out="$(printf '%s\n' "$VALUE" | W secret set REGISTRY_TOKEN 2>&1)"
[ $? = 0 ] && [ "$out" = "secret REGISTRY_TOKEN set" ] && pass "warren secret set NAME reads the value from stdin" ||
	fail "warren secret set NAME reads the value from stdin" "$out"
printf 'other-secret-value\n' | W secret set OTHER_ONE >/dev/null 2>&1
out="$(W secret ls 2>&1)"
echo "$out" | grep -q '^REGISTRY_TOKEN ' && echo "$out" | grep -q '^OTHER_ONE ' && ! grep -qF -f "$PAT" <<<"$out" &&
	pass "warren secret ls: names and times" || fail "warren secret ls: names and times" "$out"
out="$(W secret rm OTHER_ONE 2>&1)"
[ "$out" = "secret OTHER_ONE deleted" ] && [ ! -e "$D/secrets/OTHER_ONE.enc" ] && pass "warren secret rm" || fail "warren secret rm" "$out"
expect_status "warren secret set with a bad name: usage error" 2 W secret set bad-name </dev/null
out="$(printf 'nope\n' | "$WARREN" secret set X_Y --server "$URL" --token "$SUE" 2>&1)"
[ $? = 1 ] && echo "$out" | grep -q "needs the admin role" && pass "warren secret set as a submitter: refused" || fail "warren secret set as a submitter: refused" "$out"

# --- at rest -----------------------------------------------------------------
[ "$(stat -c %a "$D/secrets")" = 700 ] && [ "$(stat -c '%a %s %u' "$D/secrets.key")" = "400 32 0" ] &&
	[ "$(stat -c %a "$D/secrets/REGISTRY_TOKEN.enc")" = 600 ] &&
	pass "secrets/ 0700, secrets.key 0400 root 32 bytes, files 0600" ||
	fail "secrets/ 0700, secrets.key 0400 root 32 bytes, files 0600" "$(ls -la "$D" "$D/secrets")"
grep -qF -f "$PAT" "$D/secrets/REGISTRY_TOKEN.enc" && fail "the secret's file does not hold the value in clear" ||
	pass "the secret's file does not hold the value in clear"

# --- the build: the hooks get it, nothing else -------------------------------
api POST /api/v1/repositories "{\"url\": \"$R\", \"name\": \"proj\"}"
[ "$CODE" = 201 ] && pass "register the repository" || fail "register the repository" "$CODE $BODY"
REPO_ID="$(jget .id)"
# while the build runs: no command line anywhere holds the value; in
# environments, only the hook's processes (never warren's own) do
cmdline_hits=0 warren_env_hits=0 hook_env_seen=0
for _ in $(seq 1 300); do
	for p in /proc/[0-9]*; do
		[ -r "$p/cmdline" ] || continue
		grep -qF -f "$PAT" "$p/cmdline" 2>/dev/null && cmdline_hits=$((cmdline_hits + 1))
		if grep -qF -f "$PAT" "$p/environ" 2>/dev/null; then
			case "$(cat "$p/comm" 2>/dev/null)" in
			warren*) warren_env_hits=$((warren_env_hits + 1)) ;;
			*) hook_env_seen=1 ;;
			esac
		fi
	done
	api GET /api/v1/snapshots
	[ "$(jget '.snapshots | length')" -ge 1 ] 2>/dev/null && break
	sleep 0.1
done
[ "$(jget '.snapshots[0].commit')" = "$(git -C "$R" rev-parse HEAD)" ] && pass "the build with a secret succeeds" ||
	fail "the build with a secret succeeds" "$BODY $(tail -5 "$D/logs/build-$REPO_ID.log" 2>/dev/null)"
[ "$hook_env_seen" = 1 ] && pass "during the build the hook's processes have it in their environment" ||
	fail "during the build the hook's processes have it in their environment" "never seen"
[ "$cmdline_hits" = 0 ] && pass "during the build no process has it on its command line" || fail "during the build no process has it on its command line" "$cmdline_hits"
[ "$warren_env_hits" = 0 ] && pass "during the build no warren process has it in its environment" || fail "during the build no warren process has it in its environment" "$warren_env_hits"

SNAP="$(jget '.snapshots[0].id')"
layer_file() { find "$D/layers" -path "*/workspace/$1" 2>/dev/null | head -1; }
[ "$(cat "$(layer_file .token-hash)" 2>/dev/null)" = "$HASH" ] && pass "onCreateCommand got the exact value (its hash)" ||
	fail "onCreateCommand got the exact value (its hash)" "$(layer_file .token-hash)"
[ "$(cat "$(layer_file .token-hash2)" 2>/dev/null)" = "$HASH" ] && pass "updateContentCommand got the exact value (its hash)" ||
	fail "updateContentCommand got the exact value (its hash)" "$(layer_file .token-hash2)"
[ -z "$(layer_file .svc-leak)" ] && pass "the services of the build do not get it" || fail "the services of the build do not get it" "$(layer_file .svc-leak)"
grep -q 'printed: \*\*\*' "$D"/logs/build-*.log && pass "a hook that prints it: redacted in the build log" ||
	fail "a hook that prints it: redacted in the build log" "$(grep -h printed "$D"/logs/*.log)"

# --- a session from that snapshot ---------------------------------------------
AGENT='n=0; for f in /proc/[0-9]*/environ; do tr "\0" "\n" <"$f" 2>/dev/null | grep -q "^REGISTRY_TOKEN=" && n=$((n+1)); done; echo "environ-hits=$n"; echo "env-hits=$(env | grep -c -e REGISTRY_TOKEN -e warren_secret)"; ls -a /workspace | tr "\n" " "; echo'
S1="$(submit proj "look around" "$AGENT")"
wait_state "$S1" review 60
log="$(session_log "$S1")"
echo "$log" | grep -q 'stdout environ-hits=0' && echo "$log" | grep -q 'stdout env-hits=0' &&
	pass "a session: no REGISTRY_TOKEN in env or in any /proc/*/environ" || fail "a session: no REGISTRY_TOKEN in env or in any /proc/*/environ" "$STATE $(echo "$log" | tail -5)"
echo "$log" | grep -q '\.token-hash ' && ! echo "$log" | grep -q -e '\.post-leak' -e '\.svc-leak' &&
	pass "a session: postCreateCommand and services ran without it" || fail "a session: postCreateCommand and services ran without it" "$(echo "$log" | grep token-hash)"
inside="$(sandbox_exec_in "$S1" sh -c 'cat /proc/[0-9]*/environ 2>/dev/null | tr "\0" "\n" | grep -c -e REGISTRY_TOKEN -e warren_secret' 2>&1)"
[ "$inside" = 0 ] && pass "exec into the session: no process has it in its environment" || fail "exec into the session: no process has it in its environment" "$inside"
# the value itself, searched for from inside (the pattern comes on stdin
# into a tmpfs; the host's /usr is left out)
hits="$(sandbox_exec_in "$S1" sh -c 'cat >/dev/shm/pattern; grep -rlsF -f /dev/shm/pattern / --exclude-dir=proc --exclude-dir=usr --exclude-dir=dev | head -3' <"$PAT")"
[ -z "$hits" ] && pass "the value is in no file the session can read" || fail "the value is in no file the session can read" "$hits"

# --- on the host, after the build ---------------------------------------------
hits="$(grep -rlsF -f "$PAT" "$D" | head -5)"
[ -z "$hits" ] && pass "the value is nowhere in the data directory (layers, snapshots, sessions, logs, audit, database)" ||
	fail "the value is nowhere in the data directory (layers, snapshots, sessions, logs, audit, database)" "$hits"
[ -n "$(ls "$D"/logs/*.log 2>/dev/null)" ] && [ -n "$(ls "$D/layers" 2>/dev/null)" ] &&
	pass "...which holds build logs and layers to search" || fail "...which holds build logs and layers to search" "$(ls "$D")"
hits="$(grep -lsF -f "$PAT" /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | grep -v "^/proc/$$/" | head -3)"
[ -z "$hits" ] && pass "after the build no process on the host has it in its environment or command line" ||
	fail "after the build no process on the host has it in its environment or command line" "$hits"
grep -qF -f "$PAT" "$SERVER_LOG" && fail "the server's log does not hold the value" "$SERVER_LOG" || pass "the server's log does not hold the value"

# --- a spec naming a secret the server does not have ---------------------------
R2="$TEST_TMP/proj2"
mkdir -p "$R2"
cat >"$R2/warren.json" <<'EOF'
{"onCreateCommand": "true", "customizations": {"warren": {"secrets": ["REGISTRY_TOKEN", "NOT_SET_ANYWHERE"]}}}
EOF
git_init "$R2"
api POST /api/v1/repositories "{\"url\": \"$R2\", \"name\": \"proj2\"}"
R2_ID="$(jget .id)"
S2="$(submit proj2 "anything" "true")"
wait_state "$S2" failed 60
grep -q "secret NOT_SET_ANYWHERE is declared by the spec but not set on the server" "$D/logs/build-$R2_ID.log" 2>/dev/null &&
	[ "$STATE" = failed ] && pass "a spec naming an unknown secret: the build fails, naming it" ||
	fail "a spec naming an unknown secret: the build fails, naming it" "$STATE $(tail -3 "$D/logs/build-$R2_ID.log" 2>/dev/null)"
api GET "/api/v1/snapshots?repo=proj2"
[ "$(jget '.snapshots | length')" = 0 ] && pass "...and publishes nothing" || fail "...and publishes nothing" "$BODY"

# --- a secret for some repositories only ----------------------------------------
printf 'scoped-%s-value\n' "$$" | W secret set SCOPED_TOKEN --repo proj >/dev/null 2>&1
api GET /api/v1/secrets
[ "$(jraw '.secrets[] | select(.name == "SCOPED_TOKEN") | .repositories | join(",")')" = proj ] &&
	[ "$(jraw '.secrets[] | select(.name == "REGISTRY_TOKEN") | .repositories')" = null ] &&
	pass "secrets are listed with their repositories (null: any)" || fail "secrets are listed with their repositories (null: any)" "$BODY"
out="$(W secret ls 2>&1)"
echo "$out" | grep -q '^SCOPED_TOKEN  *proj ' && echo "$out" | grep -q '^REGISTRY_TOKEN  *any ' &&
	pass "warren secret ls shows them" || fail "warren secret ls shows them" "$out"
R5="$TEST_TMP/proj5"
mkdir -p "$R5"
cat >"$R5/warren.json" <<'EOF'
{"onCreateCommand": "test -n \"$SCOPED_TOKEN\"", "customizations": {"warren": {"secrets": ["SCOPED_TOKEN"]}}}
EOF
git_init "$R5"
api POST /api/v1/repositories "{\"url\": \"$R5\", \"name\": \"proj5\"}"
R5_ID="$(jget .id)"
S5="$(submit proj5 "anything" "true")"
wait_state "$S5" failed 60
grep -q "secret SCOPED_TOKEN is for the builds of proj only, not of proj5" "$D/logs/build-$R5_ID.log" 2>/dev/null &&
	[ "$STATE" = failed ] && pass "another repository's build does not get it: it fails, saying so" ||
	fail "another repository's build does not get it: it fails, saying so" "$STATE $(tail -3 "$D/logs/build-$R5_ID.log" 2>/dev/null)"
out="$("$WARREN" snapshot build --quiet --data "$D" "$R5" 2>&1)"
rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "and this build names no repository" &&
	pass "warren snapshot build without --repo-name does not get it either" || fail "warren snapshot build without --repo-name does not get it either" "rc=$rc $out"
printf 'scoped-%s-value\n' "$$" | W secret set SCOPED_TOKEN --repo proj --repo proj5 >/dev/null 2>&1
out="$("$WARREN" snapshot build --quiet --data "$D" --repo-name proj5 "$R5" 2>&1)"
[ $? = 0 ] && pass "granted to it too: its build gets it" || fail "granted to it too: its build gets it" "$out"
printf 'scoped-%s-value\n' "$$" | W secret set SCOPED_TOKEN >/dev/null 2>&1
api GET /api/v1/secrets
[ "$(jraw '.secrets[] | select(.name == "SCOPED_TOKEN") | .repositories | join(",")')" = "proj,proj5" ] &&
	pass "a new value without --repo keeps the list" || fail "a new value without --repo keeps the list" "$BODY"
for bad in '[]' '"proj"' '[1]' '["a", "../b"]'; do
	api PUT /api/v1/secrets/SCOPED_TOKEN "{\"value\": \"v-$$\", \"repositories\": $bad}"
	[ "$CODE" = 400 ] && echo "$BODY" | grep -q "repositories" || { fail "PUT with repositories $bad: 400" "$CODE $BODY"; continue; }
	pass "PUT with repositories $bad: 400"
done
api GET /api/v1/secrets
[ "$(jraw '.secrets[] | select(.name == "SCOPED_TOKEN") | .repositories | join(",")')" = "proj,proj5" ] &&
	pass "...and the refused requests changed nothing" || fail "...and the refused requests changed nothing" "$BODY"
out="$(printf 'x\n' | W secret set SCOPED_TOKEN --repo 'no/such name' 2>&1)"
[ $? = 1 ] && echo "$out" | grep -q "is not a repository name" && pass "a bad repository name is refused" || fail "a bad repository name is refused" "$out"
printf 'scoped-%s-value\n' "$$" | W secret set SCOPED_TOKEN --any-repo >/dev/null 2>&1
api GET /api/v1/secrets
[ "$(jraw '.secrets[] | select(.name == "SCOPED_TOKEN") | .repositories')" = null ] && [ ! -e "$D/secrets/SCOPED_TOKEN.repos" ] &&
	pass "--any-repo opens it to any repository again" || fail "--any-repo opens it to any repository again" "$BODY"
W secret set SCOPED_TOKEN --repo proj </dev/null >/dev/null 2>&1 <<<"scoped-value"
W secret rm SCOPED_TOKEN >/dev/null 2>&1
[ ! -e "$D/secrets/SCOPED_TOKEN.repos" ] && [ ! -e "$D/secrets/SCOPED_TOKEN.enc" ] &&
	pass "rm removes its list too" || fail "rm removes its list too" "$(ls "$D/secrets")"

# --- a hook that leaves the value in a layer -----------------------------------
R3="$TEST_TMP/proj3"
mkdir -p "$R3"
cat >"$R3/warren.json" <<'EOF'
{"onCreateCommand": "echo \"//registry.example/:_authToken=$REGISTRY_TOKEN\" > /root/.npmrc",
 "customizations": {"warren": {"secrets": ["REGISTRY_TOKEN"]}}}
EOF
git_init "$R3"
n_layers="$(ls "$D/layers" | wc -l)"
out="$("$WARREN" snapshot build --quiet --data "$D" "$R3" 2>&1)"
rc=$?
[ $rc = 125 ] && echo "$out" | grep -q "secret REGISTRY_TOKEN was left in the dependencies layer, in /root/.npmrc" &&
	pass "a hook that leaves it in a layer (~/.npmrc): the build fails, naming file and secret" ||
	fail "a hook that leaves it in a layer (~/.npmrc): the build fails, naming file and secret" "rc=$rc $out"
[ "$(ls "$D/layers" | wc -l)" = "$n_layers" ] && [ -z "$(grep -rlsF -f "$PAT" "$D" | head -1)" ] &&
	pass "...publishes no layer and leaves the value nowhere" || fail "...publishes no layer and leaves the value nowhere" "$(grep -rlsF -f "$PAT" "$D" | head -3)"
echo "$out" | grep -qF -f "$PAT" && fail "...and its message does not hold the value" "$out" || pass "...and its message does not hold the value"

# the same through the CLI builder directly: a missing secret
R4="$TEST_TMP/proj4"
mkdir -p "$R4"
printf '{"customizations": {"warren": {"secrets": ["NOPE_ONE", "NOPE_TWO"]}}}\n' >"$R4/warren.json"
git_init "$R4"
out="$("$WARREN" snapshot build --quiet --data "$D" "$R4" 2>&1)"
rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "secrets NOPE_ONE, NOPE_TWO are declared by the spec but not set on the server" &&
	pass "warren snapshot build: missing secrets named, usage error" || fail "warren snapshot build: missing secrets named, usage error" "rc=$rc $out"

# --- the key file: refused when others may read it ------------------------------
chmod 0644 "$D/secrets.key"
api GET /api/v1/secrets
c1="$CODE"
out="$("$WARREN" snapshot build --quiet --data "$D" "$R" 2>&1)"
rc=$?
chmod 0400 "$D/secrets.key"
[ "$c1" = 200 ] && [ $rc = 125 ] && echo "$out" | grep -q "secrets.key: the key has mode 0644" &&
	pass "a key file readable by others is refused (listing needs no key)" || fail "a key file readable by others is refused (listing needs no key)" "$c1 rc=$rc $out"

api POST "/api/v1/sessions/$S1/cancel"
server_stop
left=""
for s in "$S1" "$S2" "$S5"; do "$WARREN" sandbox ls --all 2>/dev/null | grep -q "ws-$s" && left="$left $s"; done
[ -z "$left" ] && pass "no sandbox left" || fail "no sandbox left" "$left"
