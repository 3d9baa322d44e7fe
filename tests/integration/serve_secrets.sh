#!/bin/bash
# Secrets across hosts (docs/deploy.md, "Secrets and the secrets key"): on
# one PostgreSQL store (a server of the test's own), an API server (--role
# api) and workers (--role worker), each with its data directory, the API
# server and worker 1 sharing one key file (secrets_key_file), worker 2
# with a key of its own:
#   - a secret set through the API server appears in worker 1's data
#     directory, the same bytes, 0600 in a 0700 directory, and decrypts
#     there (its GET /secrets says so); its list of repositories too;
#   - an update replaces it there, a delete removes it there;
#   - a secret of worker 1's data directory made before the store kept
#     secrets (by a single-host server on SQLite) is imported into the
#     store at its start and reaches the API server;
#   - worker 2 gets the files but says in its log, and in its GET
#     /secrets, that they do not decrypt with its key; it does not crash.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"
. "$(dirname "$0")/../pg_server.sh"
RT="/run/warren-test-secrets-$$"
. "$ROOT_DIR/tests/workers_lib.sh"
cleanup() {
	for w in w1 w2; do w_stop $w; done
	server_stop
	pg_server_stop
	rm -rf "$TEST_TMP" "$RT-w1" "$RT-w2" "$RT-old"
}
trap cleanup EXIT

if ! pg_server_bin >/dev/null; then
	echo "SKIP $TEST_FILE: no PostgreSQL server binaries (install postgresql-15)" >&2
	exit 0
fi
if ! workers_store; then
	fail "a PostgreSQL server of the test's own" "$WORKERS_WHY"
	exit 0
fi

# the keys: one for the API server and worker 1, another for worker 2
mkdir -p "$TEST_TMP/keys"
head -c 32 /dev/urandom >"$TEST_TMP/keys/shared.key"
head -c 32 /dev/urandom >"$TEST_TMP/keys/other.key"
chmod 0400 "$TEST_TMP/keys/shared.key" "$TEST_TMP/keys/other.key"

# wait_for SECONDS COMMAND...: until COMMAND succeeds (1) or time is up (0)
wait_for() {
	local t="$1"
	shift
	for _ in $(seq 1 $((t * 5))); do "$@" && return 0; sleep 0.2; done
	return 1
}
# sget URL NAME FIELD: FIELD of NAME in URL's GET /api/v1/secrets
sget() {
	curl -s -H "Authorization: Bearer $TOKEN" "$1/api/v1/secrets" |
		jq -r --arg n "$2" ".secrets[] | select(.name == \$n) | .$3 | tostring" 2>/dev/null
}

# --- a secret of worker 1's made before: a single-host server (SQLite) ---
printf '{"secrets_key_file": "%s"}\n' "$TEST_TMP/keys/shared.key" >"$TEST_TMP/old.json"
WARREN_RUNTIME_DIR="$RT-old" server_start "$TEST_TMP/w1" "$TEST_TMP/old.json"
api PUT /api/v1/secrets/OLD_TOKEN '{"value": "old-value-1234567"}'
[ "$CODE" = 200 ] && [ -f "$TEST_TMP/w1/secrets/OLD_TOKEN.enc" ] && [ ! -e "$TEST_TMP/w1/secrets.key" ] &&
	pass "a single-host server keeps a secret in its data directory, under secrets_key_file" ||
	fail "a single-host server keeps a secret in its data directory, under secrets_key_file" "$CODE $BODY $(ls -la "$TEST_TMP/w1")"
api GET /api/v1/secrets
[ "$(jget '.secrets[0].decrypts')" = true ] && pass "its list says the secret decrypts" ||
	fail "its list says the secret decrypts" "$BODY"
server_stop
OLD_TOKEN_SQLITE="$TOKEN"

# --- the API server ------------------------------------------------------
api_serve api "$(printf '{"store": "%s", "secrets_key_file": "%s"}' "$STORE" "$TEST_TMP/keys/shared.key")"
[ -n "$TOKEN" ] && pass "an API server on the store (--role api)" || fail "an API server on the store" "$(tail -5 "$SERVER_LOG")"

w_start() { # NAME KEYFILE
	worker_serve "$1" "$(printf '{"store": "%s", "secrets_key_file": "%s", "worker": {"id": "%s"}}' "$STORE" "$2" "$1")"
}
w_start w1 "$TEST_TMP/keys/shared.key"
grep -q "role worker" "$TEST_TMP/w1.log" && pass "worker 1 on the store (--role worker)" ||
	fail "worker 1 on the store (--role worker)" "$(tail -5 "$TEST_TMP/w1.log")"

# the old secret was imported at worker 1's start, and reaches the API server
[ "$(psql_q "SELECT count(*) FROM secrets WHERE name = 'OLD_TOKEN' AND deleted_ms IS NULL")" = 1 ] &&
	grep -q "secret OLD_TOKEN of this data directory imported" "$TEST_TMP/w1.log" &&
	pass "a worker's secret made before the store kept them is imported at its start" ||
	fail "a worker's secret made before the store kept them is imported at its start" "$(grep secret "$TEST_TMP/w1.log")"
wait_for 15 cmp -s "$TEST_TMP/w1/secrets/OLD_TOKEN.enc" "$TEST_TMP/api/secrets/OLD_TOKEN.enc" &&
	[ "$(sget "$URL" OLD_TOKEN decrypts)" = true ] &&
	pass "the imported secret reaches the API server and decrypts there" ||
	fail "the imported secret reaches the API server and decrypts there" "$(ls -l "$TEST_TMP/api/secrets" 2>&1)"

# --- set through the API server: on worker 1 within the sync's period -----
api PUT /api/v1/secrets/NPM_TOKEN '{"value": "npm-value-first-1234", "repositories": ["app"]}'
[ "$CODE" = 200 ] && pass "a secret set through the API server" || fail "a secret set through the API server" "$CODE $BODY"
# the store holds the file's bytes, never the value
[ "$(psql_q "SELECT count(*) FROM secrets WHERE name = 'NPM_TOKEN'")" = 1 ] &&
	! psql_q "SELECT file, repos FROM secrets" | base64 -d 2>/dev/null | grep -aq "npm-value-first" &&
	! psql_q "SELECT * FROM secrets" | grep -q "npm-value-first" &&
	pass "the store holds the secret's file, not its value" ||
	fail "the store holds the secret's file, not its value" "$(psql_q "SELECT name, length(file) FROM secrets")"
W1S="$TEST_TMP/w1/secrets"
if wait_for 15 cmp -s "$TEST_TMP/api/secrets/NPM_TOKEN.enc" "$W1S/NPM_TOKEN.enc"; then
	pass "the secret appears in worker 1's data directory, the same bytes"
else
	fail "the secret appears in worker 1's data directory, the same bytes" "$(ls -la "$W1S" 2>&1; grep secret "$TEST_TMP/w1.log")"
fi
[ "$(stat -c %a "$W1S")" = 700 ] && [ "$(stat -c %a "$W1S/NPM_TOKEN.enc")" = 600 ] &&
	[ "$(stat -c %a "$W1S/NPM_TOKEN.repos")" = 600 ] &&
	pass "on worker 1: the directory 0700, the files 0600" ||
	fail "on worker 1: the directory 0700, the files 0600" "$(stat -c '%a %n' "$W1S" "$W1S"/*)"
[ "$(sget "${WURL[w1]}" NPM_TOKEN decrypts)" = true ] && [ "$(sget "${WURL[w1]}" NPM_TOKEN repositories)" = '["app"]' ] &&
	pass "the secret decrypts on worker 1, with its list of repositories" ||
	fail "the secret decrypts on worker 1, with its list of repositories" "$(curl -s -H "Authorization: Bearer $TOKEN" "${WURL[w1]}/api/v1/secrets")"

# --- an update replaces it on worker 1 -----------------------------------
before="$(sha256sum <"$W1S/NPM_TOKEN.enc")"
api PUT /api/v1/secrets/NPM_TOKEN '{"value": "npm-value-second-5678", "repositories": null}'
[ "$CODE" = 200 ] || fail "the secret updated through the API server" "$CODE $BODY"
if wait_for 15 cmp -s "$TEST_TMP/api/secrets/NPM_TOKEN.enc" "$W1S/NPM_TOKEN.enc" &&
	[ "$(sha256sum <"$W1S/NPM_TOKEN.enc")" != "$before" ] && [ ! -e "$W1S/NPM_TOKEN.repos" ]; then
	pass "an update replaces the secret on worker 1 (and its list: any repository)"
else
	fail "an update replaces the secret on worker 1 (and its list: any repository)" "$(ls -la "$W1S")"
fi
[ "$(sget "${WURL[w1]}" NPM_TOKEN decrypts)" = true ] && [ "$(sget "${WURL[w1]}" NPM_TOKEN repositories)" = null ] &&
	pass "the updated secret decrypts on worker 1" || fail "the updated secret decrypts on worker 1" "$(sget "${WURL[w1]}" NPM_TOKEN decrypts)"

# --- worker 2: another key -----------------------------------------------
w_start w2 "$TEST_TMP/keys/other.key"
if wait_for 15 test -f "$TEST_TMP/w2/secrets/NPM_TOKEN.enc" &&
	grep -q "secret NPM_TOKEN (from the store) does not decrypt with this server's key $TEST_TMP/keys/other.key" "$TEST_TMP/w2.log"; then
	pass "a worker with another key says which secret does not decrypt, and with which key"
else
	fail "a worker with another key says which secret does not decrypt, and with which key" "$(grep secret "$TEST_TMP/w2.log")"
fi
[ "$(grep -c "secret NPM_TOKEN (from the store) does not decrypt" "$TEST_TMP/w2.log")" = 1 ] &&
	pass "said once" || fail "said once" "$(grep -c "does not decrypt" "$TEST_TMP/w2.log")"
[ "$(sget "${WURL[w2]}" NPM_TOKEN decrypts)" = false ] && kill -0 "${WPID[w2]}" 2>/dev/null &&
	pass "its GET /secrets says the secret does not decrypt there; it keeps running" ||
	fail "its GET /secrets says the secret does not decrypt there; it keeps running" "$(curl -s -H "Authorization: Bearer $TOKEN" "${WURL[w2]}/api/v1/secrets")"

"$WARREN" secret ls --server "${WURL[w2]}" --token "$TOKEN" >"$TEST_TMP/ls.out" 2>"$TEST_TMP/ls.err"
grep -q "^NPM_TOKEN" "$TEST_TMP/ls.out" && grep -q "secret NPM_TOKEN does not decrypt with this server's key" "$TEST_TMP/ls.err" &&
	pass "warren secret ls on worker 2 says it too" || fail "warren secret ls on worker 2 says it too" "$(cat "$TEST_TMP/ls.out" "$TEST_TMP/ls.err")"
"$WARREN" secret ls --server "${WURL[w1]}" --token "$TOKEN" >"$TEST_TMP/ls.out" 2>"$TEST_TMP/ls.err"
grep -q "^NPM_TOKEN" "$TEST_TMP/ls.out" && ! grep -q "does not decrypt" "$TEST_TMP/ls.err" &&
	pass "warren secret ls on worker 1 does not" || fail "warren secret ls on worker 1 does not" "$(cat "$TEST_TMP/ls.out" "$TEST_TMP/ls.err")"

# --- a delete removes it on every worker ---------------------------------
api DELETE /api/v1/secrets/NPM_TOKEN
[ "$CODE" = 200 ] || fail "the secret deleted through the API server" "$CODE $BODY"
if wait_for 15 test ! -e "$W1S/NPM_TOKEN.enc" && wait_for 5 test ! -e "$TEST_TMP/w2/secrets/NPM_TOKEN.enc"; then
	pass "a delete removes the secret on the workers"
else
	fail "a delete removes the secret on the workers" "$(ls -la "$W1S" "$TEST_TMP/w2/secrets")"
fi
[ -z "$(sget "${WURL[w1]}" NPM_TOKEN name)" ] && [ -f "$W1S/OLD_TOKEN.enc" ] &&
	pass "worker 1's list has it no more, the other secret stays" || fail "worker 1's list has it no more, the other secret stays" "$(ls -la "$W1S")"
api DELETE /api/v1/secrets/NPM_TOKEN
[ "$CODE" = 404 ] && pass "a second delete: 404" || fail "a second delete: 404" "$CODE $BODY"

# a restart of worker 1 keeps the deletion (the tombstone), imports nothing
w_stop w1
w_start w1 "$TEST_TMP/keys/shared.key"
sleep 1
[ ! -e "$W1S/NPM_TOKEN.enc" ] && [ "$(grep -c "imported into the store" "$TEST_TMP/w1.log")" = 1 ] &&
	pass "a worker's restart brings back nothing deleted" || fail "a worker's restart brings back nothing deleted" "$(ls -la "$W1S")"

# a delete through worker 1 of a secret set through the API server
api PUT /api/v1/secrets/LAST '{"value": "last-value-123456789"}'
wait_for 15 test -f "$W1S/LAST.enc" || fail "LAST reaches worker 1" "$(ls -la "$W1S")"
URL="${WURL[w1]}" api DELETE /api/v1/secrets/LAST
[ "$CODE" = 200 ] && wait_for 15 test ! -e "$TEST_TMP/api/secrets/LAST.enc" &&
	pass "a delete through a worker reaches the API server" || fail "a delete through a worker reaches the API server" "$CODE $(ls -la "$TEST_TMP/api/secrets")"

for w in w1 w2; do
	w_stop $w
	grep -q "stopping" "$TEST_TMP/$w.log" || fail "$w stops cleanly" "$(tail -5 "$TEST_TMP/$w.log")"
done
