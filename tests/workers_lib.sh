# tests/workers_lib.sh - servers sharing one PostgreSQL store, for the
# multi-server tests and bench/workers.sh: the store, an API server
# (--role api), workers (--role worker), each worker with its data
# directory ($TEST_TMP/NAME) and runtime directory ($RT-NAME) as a host of
# its own would have, and what a dead host's sandboxes do.
#
# Needs WARREN, TEST_TMP and RT set, and tests/pg_server.sh sourced. Safe
# under `set -eu` (bench/workers.sh).
declare -A WPID WURL

workers_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# workers_store: a PostgreSQL server of the caller's own with a database
# "warren": STORE (its URL) and psql_q SQL. 1 with WORKERS_WHY on failure.
workers_store() {
	WORKERS_WHY=""
	if ! pg_server_start; then
		WORKERS_WHY="$PG_SERVER_WHY"
		return 1
	fi
	if ! "$PG_SERVER_BIN/psql" -q "$PG_SERVER_URL" -c "CREATE DATABASE warren"; then
		WORKERS_WHY="psql: CREATE DATABASE failed"
		return 1
	fi
	STORE="postgresql://warren@/warren?host=$PG_SERVER_DIR&port=5432"
}
psql_q() { "$PG_SERVER_BIN/psql" -qtA "$STORE" -c "$1"; }

# api_serve NAME CONFIG-JSON: an API server on data $TEST_TMP/NAME, its
# configuration in $TEST_TMP/NAME.json: URL, SERVER_PID, SERVER_LOG and
# TOKEN (its admin.token: the store's first admin) once it answers.
api_serve() {
	mkdir -p "$TEST_TMP/$1"
	printf '%s\n' "$2" >"$TEST_TMP/$1.json"
	local port
	port="$(workers_port)"
	URL="http://127.0.0.1:$port"
	SERVER_LOG="$TEST_TMP/$1.log"
	"$WARREN" serve --data "$TEST_TMP/$1" --listen "127.0.0.1:$port" --config "$TEST_TMP/$1.json" \
		--role api >"$SERVER_LOG" 2>&1 &
	SERVER_PID=$!
	for _ in $(seq 1 100); do
		[ -s "$TEST_TMP/$1/admin.token" ] && curl -s -o /dev/null "$URL/api/v1/healthz" && break
		sleep 0.1
	done
	TOKEN="$(cat "$TEST_TMP/$1/admin.token" 2>/dev/null || true)"
}

# worker_serve NAME CONFIG-JSON: a worker on data $TEST_TMP/NAME and
# runtime $RT-NAME (its log appended to $TEST_TMP/NAME.log): WPID[NAME],
# WURL[NAME], once it answers.
worker_serve() {
	printf '%s\n' "$2" >"$TEST_TMP/$1.json"
	local port
	port="$(workers_port)"
	WURL[$1]="http://127.0.0.1:$port"
	WARREN_RUNTIME_DIR="$RT-$1" "$WARREN" serve --data "$TEST_TMP/$1" --listen "127.0.0.1:$port" \
		--config "$TEST_TMP/$1.json" --role worker >>"$TEST_TMP/$1.log" 2>&1 &
	WPID[$1]=$!
	for _ in $(seq 1 100); do
		curl -s -o /dev/null "${WURL[$1]}/api/v1/healthz" && break
		sleep 0.1
	done
}

# w_stop NAME [SIGNAL]: the worker stopped (thawed first, if frozen)
w_stop() {
	local p="${WPID[$1]:-}"
	[ -n "$p" ] || return 0
	kill -CONT "$p" 2>/dev/null || true
	kill -"${2:-TERM}" "$p" 2>/dev/null || true
	wait "$p" 2>/dev/null || true
	WPID[$1]=""
}

# w_sandboxes_kill NAME: what a dead host's sandboxes do: die
w_sandboxes_kill() {
	WARREN_RUNTIME_DIR="$RT-$1" "$WARREN" sandbox ls --all --json 2>/dev/null |
		jq -r '(if type == "array" then . else .sandboxes end)[] | .init_pid' 2>/dev/null |
		while read -r p; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null; done || true
}

# w_sandboxes_rm NAME: what is left of a worker's sandboxes, removed
w_sandboxes_rm() {
	local n
	for n in $(WARREN_RUNTIME_DIR="$RT-$1" "$WARREN" sandbox ls --all --json 2>/dev/null |
		jq -r '(if type == "array" then . else .sandboxes end)[] | .name' 2>/dev/null); do
		WARREN_RUNTIME_DIR="$RT-$1" "$WARREN" sandbox rm "$n" >/dev/null 2>&1 || true
	done
}
