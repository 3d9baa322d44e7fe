# tests/pg_server.sh - a PostgreSQL server of the tests' own (sourced by
# tests/run.sh, and by any shell test that wants one).
#
#   pg_server_start   initdb in a new temporary directory, then a server
#                     listening only on a unix socket in that directory (no
#                     TCP port, trust authentication: nobody else can reach
#                     it); sets PG_SERVER_URL, the libpq URI of its
#                     "postgres" database as role "warren", and
#                     PG_SERVER_DIR. Returns 1 with PG_SERVER_WHY set when
#                     it cannot (no PostgreSQL binaries, initdb or the start
#                     failed), leaving nothing behind.
#   pg_server_stop    stops it and removes its directory; safe to call
#                     twice, or after a failed start. Call it from a trap
#                     (EXIT) so that no path leaves a server running.
#
# The binaries: $PG_BIN if set, else /usr/lib/postgresql/15/bin (Debian 12's
# postgresql-15), else the newest /usr/lib/postgresql/*/bin. PostgreSQL
# refuses to run as root: as root the server runs as the postgres user of
# Debian's package (else as nobody), in the directory it is given to own.
# It runs without fsync: its data dies with the tests.
#
# Options (environment, read by pg_server_start):
#   PG_SERVER_PORT     the port (default 5432; it names the socket too)
#   PG_SERVER_LISTEN   TCP addresses to listen on as well ("a,b"; default
#                      none: the socket only)
#   PG_SERVER_HBA      with PG_SERVER_LISTEN: the network (CIDR) whose
#                      clients are trusted over TCP, e.g. a test-only
#                      subnet (tests/integration/serve_hosts.sh)

PG_SERVER_DIR=""
PG_SERVER_URL=""
PG_SERVER_WHY=""
PG_SERVER_BIN=""
PG_SERVER_USER=""

pg_server_bin() {
	local d
	for d in "${PG_BIN:-}" /usr/lib/postgresql/15/bin \
		$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -rV); do
		[ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ] &&
			{ echo "$d"; return 0; }
	done
	return 1
}

# Runs a command as the server's user (root cannot run PostgreSQL).
pg_server_as() {
	if [ -n "$PG_SERVER_USER" ]; then
		(cd "$PG_SERVER_DIR" &&
			setpriv --reuid="$(id -u "$PG_SERVER_USER")" \
				--regid="$(id -g "$PG_SERVER_USER")" --clear-groups -- "$@")
	else
		(cd "$PG_SERVER_DIR" && "$@")
	fi
}

pg_server_start() {
	PG_SERVER_WHY=""
	if ! PG_SERVER_BIN="$(pg_server_bin)"; then
		PG_SERVER_WHY="no PostgreSQL server binaries (initdb, pg_ctl, postgres in /usr/lib/postgresql/*/bin; install postgresql-15)"
		return 1
	fi
	PG_SERVER_DIR="$(mktemp -d /tmp/warren-pg.XXXXXX)" || {
		PG_SERVER_WHY="mktemp failed"
		PG_SERVER_DIR=""
		return 1
	}
	PG_SERVER_USER=""
	if [ "$(id -u)" = 0 ]; then
		PG_SERVER_USER=postgres
		id -u postgres >/dev/null 2>&1 || PG_SERVER_USER=nobody
		chown "$(id -u "$PG_SERVER_USER"):$(id -g "$PG_SERVER_USER")" "$PG_SERVER_DIR"
	fi
	chmod 700 "$PG_SERVER_DIR"
	if ! pg_server_as "$PG_SERVER_BIN/initdb" -D "$PG_SERVER_DIR/data" -U warren \
		--auth=trust -E UTF8 --locale=C --no-sync >"$PG_SERVER_DIR/initdb.log" 2>&1; then
		PG_SERVER_WHY="initdb failed: $(tail -3 "$PG_SERVER_DIR/initdb.log" | tr '\n' ' ')"
		pg_server_stop
		return 1
	fi
	local port="${PG_SERVER_PORT:-5432}"
	[ -n "${PG_SERVER_LISTEN:-}" ] && [ -n "${PG_SERVER_HBA:-}" ] &&
		printf 'host all all %s trust\n' "$PG_SERVER_HBA" >>"$PG_SERVER_DIR/data/pg_hba.conf"
	# the socket in our directory (the port number names it), and only
	# the TCP addresses asked for
	if ! pg_server_as "$PG_SERVER_BIN/pg_ctl" -D "$PG_SERVER_DIR/data" \
		-l "$PG_SERVER_DIR/server.log" -w -t 60 \
		-o "-c listen_addresses='${PG_SERVER_LISTEN:-}' -k $PG_SERVER_DIR -p $port -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
		start >/dev/null 2>&1; then
		PG_SERVER_WHY="the server did not start: $(tail -3 "$PG_SERVER_DIR/server.log" 2>/dev/null | tr '\n' ' ')"
		pg_server_stop
		return 1
	fi
	PG_SERVER_URL="postgresql://warren@/postgres?host=$PG_SERVER_DIR&port=$port"
	return 0
}

pg_server_stop() {
	[ -n "$PG_SERVER_DIR" ] && [ -d "$PG_SERVER_DIR" ] || return 0
	local pidfile="$PG_SERVER_DIR/data/postmaster.pid"
	if [ -f "$pidfile" ]; then
		local pid
		pid="$(head -1 "$pidfile")"
		pg_server_as "$PG_SERVER_BIN/pg_ctl" -D "$PG_SERVER_DIR/data" -m fast -w -t 30 \
			stop >/dev/null 2>&1 ||
			{ [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; sleep 0.2; }
	fi
	rm -rf "$PG_SERVER_DIR"
	PG_SERVER_DIR=""
	PG_SERVER_URL=""
}
