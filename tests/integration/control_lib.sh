# tests/integration/control_lib.sh - helpers for the control-plane tests
# (sourced after tests/lib.sh): a warren serve on a free loopback port, curl
# calls with the admin token, waits on session states and events.

SERVER_PID=""
SERVER_LOG=""
# the last answer of api(); set in a $(subshell), they stay as they were
CODE=""
BODY=""

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# server_start DATA [CONFIG]: sets SERVER_PID, URL, TOKEN
server_start() {
	local data="$1" config="${2:-}"
	PORT="$(free_port)"
	URL="http://127.0.0.1:$PORT"
	SERVER_LOG="$TEST_TMP/serve.$PORT.log"
	"$WARREN" serve --data "$data" --listen "127.0.0.1:$PORT" ${config:+--config "$config"} >"$SERVER_LOG" 2>&1 &
	SERVER_PID=$!
	for _ in $(seq 1 100); do
		[ -s "$data/admin.token" ] && curl -s -o /dev/null "$URL/api/v1/healthz" && break
		sleep 0.1
	done
	TOKEN="$(cat "$data/admin.token" 2>/dev/null)"
}

server_stop() {
	[ -n "$SERVER_PID" ] || return 0
	kill -TERM "$SERVER_PID" 2>/dev/null
	wait "$SERVER_PID" 2>/dev/null
	SERVER_PID=""
}
trap 'server_stop; rm -rf "$TEST_TMP"' EXIT

# api METHOD PATH [BODY]: sets CODE and BODY
api() {
	local out
	out="$(curl -s -w '\n%{http_code}' -X "$1" -H "Authorization: Bearer $TOKEN" \
		${3:+-H 'Content-Type: application/json' --data-binary "$3"} "$URL$2")"
	CODE="${out##*$'\n'}"
	BODY="${out%$'\n'*}"
}

# jget JQ-EXPR: from $BODY
jget() { echo "$BODY" | jq -r "$1 // empty" 2>/dev/null; }

# submit REPO PROMPT AGENT-SHELL-LINE [LIMITS-JSON]: prints the id
submit() {
	local body
	body="$(jq -n --arg r "$1" --arg p "$2" --arg a "$3" --argjson l "${4:-null}" \
		'{repo: $r, prompt: $p, agent: ["sh", "-c", $a]} + (if $l then {limits: $l} else {} end)')"
	api POST /api/v1/sessions "$body"
	[ "$CODE" = 201 ] && jget .id
}

# wait_state ID STATE TIMEOUT-S: sets STATE (the last seen)
wait_state() {
	local i
	for i in $(seq 1 $(($3 * 10))); do
		api GET "/api/v1/sessions/$1"
		STATE="$(jget .state)"
		[ "$STATE" = "$2" ] && return 0
		case "$STATE" in failed | cancelled | expired) [ "$2" != "$STATE" ] && return 1 ;; esac
		sleep 0.1
	done
	return 1
}

wait_turns() {
	local i
	for i in $(seq 1 $(($3 * 10))); do
		api GET "/api/v1/sessions/$1"
		[ "$(jget .turns)" -ge "$2" ] 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

events_json() {
	curl -s -H "Authorization: Bearer $TOKEN" "$URL/api/v1/sessions/$1/events?format=json"
}

# session_log ID: one line per event: "stdout LINE", "state STATE REASON", KIND
session_log() {
	events_json "$1" | jq -r '.events[] |
		if .kind == "output" then "\(.data.stream) \(.data.line)"
		elif .kind == "state" then "state \(.data.state) \(.data.reason // "")"
		else .kind end' 2>/dev/null
}

# wait_output ID TEXT TIMEOUT-S
wait_output() {
	local i
	for i in $(seq 1 $(($3 * 10))); do
		session_log "$1" | grep -q "$2" && return 0
		sleep 0.1
	done
	return 1
}

sandbox_exec_in() {
	local id="$1"
	shift
	"$WARREN" sandbox exec "ws-$id" -- "$@" 2>&1
}

# workspace_cat DATA ID PATH: a file of a session's workspace, read from
# its filesystem's image (DATA/sessions/ID/layer.img, never mounted on the
# host) with debugfs; PATH is inside the sandbox (/workspace/…)
workspace_cat() {
	debugfs -R "cat /upper$3" "$1/sessions/$2/layer.img" 2>/dev/null
}

sandbox_init_pid() {
	"$WARREN" sandbox ls --all --json 2>/dev/null | jq -r --arg n "$1" '(if type == "array" then . else .sandboxes end)[] | select(.name == $n) | .init_pid' 2>/dev/null
}

# submit_builtin REPO PROMPT: a session with no agent (the server's model,
# the built-in agent); prints the id
submit_builtin() {
	api POST /api/v1/sessions "$(jq -n --arg r "$1" --arg p "$2" '{repo: $r, prompt: $p}')"
	[ "$CODE" = 201 ] && jget .id
}

# jraw JQ-EXPR: like jget, but false and null print as such
jraw() { echo "$BODY" | jq -r "$1" 2>/dev/null; }

# g GIT-ARGS...: git with a test identity
g() { git -c user.email=t@warren -c user.name=test "$@"; }

# greeter_remote: the replay fixtures' project (tests/fixtures/replay/
# fix-after-verify.json edits it): greeting.txt, a verify command that
# wants "hello" in it and keeps report.txt as evidence, in a working copy
# $W whose commit is pushed to the bare repository $REMOTE (the remote
# an approval pushes to). Sets REMOTE and W.
greeter_remote() {
	REMOTE="$TEST_TMP/remote.git"
	W="$TEST_TMP/work"
	git init -q --bare -b main "$REMOTE"
	mkdir -p "$W"
	echo '{"customizations": {"warren": {"verify": ["sh", "test.sh"], "artifacts": ["report.txt"]}}}' >"$W/warren.json"
	echo hello >"$W/greeting.txt"
	printf '#!/bin/sh\necho "checked: $(cat greeting.txt)" >report.txt\ngrep -q hello greeting.txt || { echo "greeting lost its hello" >&2; exit 1; }\n' >"$W/test.sh"
	echo report.txt >"$W/.gitignore"
	g -C "$W" init -q -b main
	g -C "$W" add -A
	g -C "$W" commit -q -m initial
	g -C "$W" push -q "$REMOTE" main
}
