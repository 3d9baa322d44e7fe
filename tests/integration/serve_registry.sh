#!/bin/bash
# warren serve with "blobs" in its configuration pushes each snapshot it
# builds to that registry (sched/snapshots.c): the manifest is in the
# registry under the snapshot's id, the build's record says the push and
# its digest; with the registry gone the build still ends ready, its
# record and its log say the push failed and why, and the server's log
# warns. Against Debian's docker-registry (tests/registry_server.sh); SKIP
# without it.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"
. "$ROOT_DIR/tests/registry_server.sh"

if [ -z "$REGISTRY_BIN" ] || ! command -v htpasswd >/dev/null; then
	echo "SKIP serve_registry: docker-registry or htpasswd is not installed (apt-get install docker-registry apache2-utils)" >&2
	exit 0
fi
trap 'server_stop; registry_stop_all; rm -rf "$TEST_TMP"' EXIT

if ! start_registry_htpasswd reg warren 'serve-pw'; then
	fail "docker-registry starts with htpasswd" "$(tail -5 "$TEST_TMP/reg.log")"
	exit 0
fi
printf 'serve-pw\n' >"$TEST_TMP/pw"
chmod 600 "$TEST_TMP/pw"
greeter_remote

# serve_with REGISTRY: a configuration with the repository and the registry
serve_with() {
	cat >"$TEST_TMP/serve.json" <<EOF
{"repositories": [{"name": "greeter", "url": "$REMOTE"}],
 "blobs": {"registry": "$1", "repository": "warren/served", "username": "warren",
           "password_file": "$TEST_TMP/pw"}}
EOF
}
repo_id() { api GET /api/v1/repositories; echo "$BODY" | jq -r '.repositories[] | select(.name == "greeter") | .id'; }
# the newest build's record once it has ended
last_build() {
	local id b
	id="$(repo_id)"
	for _ in $(seq 1 300); do
		api GET "/api/v1/repositories/$id/builds"
		b="$(echo "$BODY" | jq -c '.builds[0] // empty')"
		case "$(echo "$b" | jq -r '.state // empty' 2>/dev/null)" in ready | failed) break ;; esac
		sleep 0.2
	done
	echo "$b"
}

serve_with "$REG_reg"
server_start "$TEST_TMP/data" "$TEST_TMP/serve.json"
b="$(last_build)"
snap="$(echo "$b" | jq -r '.snapshot_id // empty')"
[ "$(echo "$b" | jq -r .state)" = ready ] && [ ${#snap} = 64 ] && pass "the server builds the snapshot" ||
	fail "the server builds the snapshot" "$b $(tail -5 "$SERVER_LOG")"
digest="$(echo "$b" | jq -r '.push.manifest_digest // empty')"
[ "$(echo "$b" | jq -r .push.ok)" = true ] && [ "${digest#sha256:}" != "$digest" ] &&
	pass "the build's record says it was pushed, with the manifest's digest" ||
	fail "the build's record says it was pushed, with the manifest's digest" "$b"
got="$(curl -s -o /dev/null -w '%{http_code} %header{docker-content-digest}' -u warren:serve-pw \
	-H 'Accept: application/vnd.oci.image.manifest.v1+json' "$REG_reg/v2/warren/served/manifests/$snap")"
[ "$got" = "200 $digest" ] && pass "the registry holds the snapshot under its id" ||
	fail "the registry holds the snapshot under its id" "$got (want 200 $digest)"
server_stop

# the registry gone: the build stands, the push's failure is said
registry_stop_all
rm -rf "$TEST_TMP/data"
serve_with "http://127.0.0.1:$(free_port)"
server_start "$TEST_TMP/data" "$TEST_TMP/serve.json"
b="$(last_build)"
[ "$(echo "$b" | jq -r .state)" = ready ] && pass "a failed push does not fail the build" ||
	fail "a failed push does not fail the build" "$b"
[ "$(echo "$b" | jq -r .push.ok)" = false ] && echo "$b" | jq -r .push.error | grep -q 'registry http://127.0.0.1' &&
	pass "the build's record says the push failed and why" || fail "the build's record says the push failed and why" "$b"
id="$(repo_id)"
api GET "/api/v1/repositories/$id/builds/$(echo "$b" | jq -r .id)/log"
echo "$BODY" | grep -q 'the push of snapshot .* failed (the build stands)' &&
	pass "the build's log says the push failed" || fail "the build's log says the push failed" "$(echo "$BODY" | tail -3)"
grep -q 'push of snapshot .* to the registry failed' "$SERVER_LOG" && pass "the server's log warns" ||
	fail "the server's log warns" "$(tail -3 "$SERVER_LOG")"
server_stop
