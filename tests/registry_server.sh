# tests/registry_server.sh - Debian's docker-registry (distribution 2.8) of
# the tests' own, on loopback (sourced by the shell tests that want one:
# tests/integration/blobs_registry.sh, snapshot_registry.sh). Not the
# package's service: a configuration of our own, filesystem storage under
# $TEST_TMP, deletes on (unless asked), a free port.
#
#   REGISTRY_BIN                    docker-registry's path, "" when it is
#                                   not installed (the caller says SKIP)
#   free_port                       a free TCP port on 127.0.0.1
#   start_registry NAME AUTH        starts one ($REGISTRY_DELETE=false: with
#                                   deletes off): its configuration's "auth:"
#                                   section is AUTH (indented), its storage
#                                   $TEST_TMP/NAME, its log (with the access
#                                   log: a line per request, "METHOD PATH")
#                                   $TEST_TMP/NAME.log, at the level
#                                   $REGISTRY_LOG_LEVEL, else warn); sets
#                                   REG_NAME to its URL; 0 once it answers
#                                   /v2/ with a 401; it listens on
#                                   $REGISTRY_HOST (default 127.0.0.1)
#   start_registry_htpasswd NAME USER PASSWORD
#                                   the same with htpasswd (bcrypt) auth
#   write_config FILE REGISTRY REPOSITORY PASSWORD_FILE [USER]
#                                   a "blobs" object into FILE
#   registry_stop_all               stops every registry started here; call
#                                   it from the caller's EXIT trap
REGISTRY_BIN="$(command -v docker-registry || true)"
REGISTRY_PIDS=""

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

write_config() {
	printf '{"registry": "%s", "repository": "%s", "username": "%s", "password_file": "%s"}\n' \
		"$2" "$3" "${5:-warren}" "$4" >"$1"
}

start_registry() {
	local name="$1" auth="$2" port
	port="$(free_port)"
	cat >"$TEST_TMP/$name.yml" <<YML
version: 0.1
log:
  level: ${REGISTRY_LOG_LEVEL:-warn}
storage:
  filesystem:
    rootdirectory: $TEST_TMP/$name
  delete:
    enabled: ${REGISTRY_DELETE:-true}
http:
  addr: ${REGISTRY_HOST:-127.0.0.1}:$port
auth:
$auth
YML
	"$REGISTRY_BIN" serve "$TEST_TMP/$name.yml" >"$TEST_TMP/$name.log" 2>&1 &
	REGISTRY_PIDS="$REGISTRY_PIDS $!"
	local host="${REGISTRY_HOST:-127.0.0.1}"
	eval "REG_$name=http://$host:$port"
	for _ in $(seq 1 100); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' "http://$host:$port/v2/" 2>/dev/null)" = 401 ] &&
			return 0
		sleep 0.1
	done
	return 1
}

start_registry_htpasswd() {
	htpasswd -Bbn "$2" "$3" >"$TEST_TMP/$1.htpasswd" || return 1
	start_registry "$1" "  htpasswd:
    realm: warren-test
    path: $TEST_TMP/$1.htpasswd"
}

registry_stop_all() {
	local p
	for p in $REGISTRY_PIDS; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	REGISTRY_PIDS=""
}
