#!/bin/bash
# The control plane's command-line client (`warren run|sessions|show|logs|
# send|cancel|repo|snapshots|token`, src/cli/client/) against a real
# `warren serve`: usage errors (exit 2), an unreachable server (exit 3), API
# errors (exit 1 with the server's message), a repository registered from a
# local git repository, a session followed to review with the agent's output
# on stdout, its logs, show --json, a failing session, a long session
# cancelled, and `logs -f` surviving a server restart (Last-Event-ID).
. "$(dirname "$0")/../lib.sh"

W() { "$WARREN" "$@"; }

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# json_get EXPR: reads one JSON document on stdin, prints EXPR of it
# (a Python expression over `d`), nothing if it is not JSON.
json_get() {
	python3 -c 'import json, sys
try:
    d = json.load(sys.stdin)
    v = eval(sys.argv[1])
    print("" if v is None else v)
except Exception:
    sys.exit(1)' "$1" 2>/dev/null
}

# json_lines: every line of stdin is a JSON object; prints how many.
json_lines() {
	python3 -c 'import json, sys
n = 0
for line in sys.stdin:
    if not isinstance(json.loads(line), dict):
        sys.exit(1)
    n += 1
print(n)' 2>/dev/null
}

SERVER_PID=""
D="$TEST_TMP/data"
PORT="$(free_port)"
URL="http://127.0.0.1:$PORT"

server_start() {
	"$WARREN" serve --data "$D" --listen "127.0.0.1:$PORT" >>"$TEST_TMP/serve.log" 2>&1 &
	SERVER_PID=$!
	for _ in $(seq 1 100); do
		[ -s "$D/admin.token" ] && curl -s -o /dev/null "$URL/api/v1/healthz" && return 0
		sleep 0.1
	done
	return 1
}
server_stop() {
	[ -n "$SERVER_PID" ] || return 0
	kill -TERM "$SERVER_PID" 2>/dev/null
	wait "$SERVER_PID" 2>/dev/null
	SERVER_PID=""
}
trap 'server_stop; rm -rf "$TEST_TMP"' EXIT

# state_of ID: the session's state, as `show --json` tells it
state_of() { W show --json "$1" | json_get 'd["state"]'; }
# wait_state ID STATE SECONDS
wait_state() {
	for _ in $(seq 1 $(($3 * 10))); do
		[ "$(state_of "$1")" = "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

# --- no server needed: usage errors are exit 2 and say what is wrong -------
unset WARREN_SERVER WARREN_TOKEN
export WARREN_HOME="$D"
expect_status "run without --repo: exit 2" 2 W run "a prompt"
expect_output "run without --repo: says so" "warren run: missing --repo" W run "a prompt"
expect_status "run without a prompt: exit 2" 2 W run --repo x
expect_status "unknown option: exit 2" 2 W sessions --frobnicate
expect_output "unknown option: named" "unknown option '--frobnicate'" W sessions --frobnicate
expect_status "option without its value: exit 2" 2 W run --repo
expect_output "option without its value: named" "option '--repo' needs a value" W run --repo
expect_status "show without an id: exit 2" 2 W show
expect_output "show without an id: says so" "missing session ID" W show
expect_status "send without the text: exit 2" 2 W send s-0123456789abcdef
expect_status "sessions --limit 0: exit 2" 2 W sessions --limit 0
expect_status "run --limit with a bad size: exit 2" 2 W run --repo x --limit memory=12Q "p"
expect_status "run --limit without '=': exit 2" 2 W run --repo x --limit memory "p"
expect_status "run --follow --wait: exit 2" 2 W run --repo x --follow --wait "p"
expect_status "repo without a sub-command: exit 2" 2 W repo
expect_status "repo ls --name: exit 2" 2 W repo ls --name x
expect_status "repo add --refresh 5x: exit 2" 2 W repo add /tmp --refresh 5x
expect_status "token create without --role: exit 2" 2 W token create --user u
expect_status "a bad --server: exit 2" 2 W sessions --server ftp://example.org
for verb in run sessions show logs send cancel repo snapshots token; do
	expect_output "$verb --help prints the usage" "^usage: warren $verb" W "$verb" --help
done
expect_status "--help exits 0" 0 W logs --help

# --- no server listening: exit 3 and a hint ---------------------------------
expect_status "unreachable server: exit 3" 3 W sessions --server "127.0.0.1:$PORT" --token x
expect_output "unreachable server: explained" \
	"cannot reach the Warren server at http://127.0.0.1:$PORT: .*is \`warren serve\` running\?" \
	W sessions --server "127.0.0.1:$PORT" --token x
WARREN_SERVER="$URL" expect_status "\$WARREN_SERVER is used" 3 W sessions --token x

# --- a server, and a repository to work on -----------------------------------
server_start && pass "warren serve starts" || fail "warren serve starts" "$(tail -5 "$TEST_TMP/serve.log")"
export WARREN_SERVER="$URL" # the token comes from $WARREN_HOME/admin.token

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

out="$(W repo add "$R" --name proj 2>&1)"
rc=$?
[ $rc = 0 ] && echo "$out" | grep -Eq '^r-[^ ]+ proj$' &&
	pass "repo add prints the id and name" || fail "repo add prints the id and name" "rc=$rc $out"
expect_status "repo add of the same name: API error, exit 1" 1 W repo add "$R" --name proj
expect_output "an API error shows the server's message and code" "^warren repo add: .*\(HTTP 409 conflict\)" W repo add "$R" --name proj
expect_output "repo ls lists it" "^r-[^ ]+ +proj " W repo ls
[ "$(W repo ls --json | json_get '[r["name"] for r in d["repositories"]]')" = "['proj']" ] &&
	pass "repo ls --json" || fail "repo ls --json" "$(W repo ls --json 2>&1 | head -5)"
expect_output "repo refresh by name" "^refresh of proj queued" W repo refresh proj

head="$(git -C "$R" rev-parse HEAD)"
has_snapshot() { [ "$(W snapshots --json | json_get "'$head' in [s['commit'] for s in d['snapshots']]")" = True ]; }
for _ in $(seq 1 300); do
	has_snapshot && break
	sleep 0.2
done
has_snapshot &&
	pass "snapshots --json shows the repository's snapshot" ||
	fail "snapshots --json shows the repository's snapshot" "$(W snapshots --json 2>&1 | head -5)"
expect_output "snapshots lists it by repository name" "^[0-9a-f]{12} +proj +${head:0:10} " W snapshots

n="$(W sessions --json | json_get 'len(d["sessions"])')"
[ "$n" = 0 ] && pass "sessions --json is the API's JSON" || fail "sessions --json is the API's JSON" "$(W sessions --json 2>&1 | head -3)"

# --- a session followed to review -------------------------------------------
W run --repo proj --agent 'echo hello; echo to-stderr >&2' --follow "say hello" \
	>"$TEST_TMP/run.out" 2>"$TEST_TMP/run.err"
rc=$?
[ $rc = 0 ] && pass "run --follow: exit 0 at review" || fail "run --follow: exit 0 at review" "rc=$rc $(tail -3 "$TEST_TMP/run.err")"
[ "$(cat "$TEST_TMP/run.out")" = hello ] &&
	pass "run --follow: stdout is the agent's stdout" || fail "run --follow: stdout is the agent's stdout" "$(head -5 "$TEST_TMP/run.out")"
grep -qx to-stderr "$TEST_TMP/run.err" && pass "run --follow: the agent's stderr on stderr" ||
	fail "run --follow: the agent's stderr on stderr" "$(cat "$TEST_TMP/run.err")"
grep -Eq '^\[ *[0-9]+\.[0-9]s\] provisioning$' "$TEST_TMP/run.err" && pass "run --follow: progress with elapsed time" ||
	fail "run --follow: progress with elapsed time" "$(head -5 "$TEST_TMP/run.err")"
grep -Eq '^s-[^ ]+ review' "$TEST_TMP/run.err" && pass "run --follow: a final line with the state" ||
	fail "run --follow: a final line with the state" "$(tail -2 "$TEST_TMP/run.err")"
S1="$(sed -n 's/^session \(s-[^ ]*\)$/\1/p' "$TEST_TMP/run.err" | head -1)"

expect_output "logs: the agent's output" "^hello$" W logs "$S1"
expect_output "logs: state changes" "^-- state: review" W logs "$S1"
n="$(W logs --json "$S1" | json_lines)"
[ "${n:-0}" -ge 4 ] && pass "logs --json: one JSON object per line" || fail "logs --json: one JSON object per line" "$(W logs --json "$S1" 2>&1 | head -3)"
expect_output "logs -f of a resting session ends" "^-- state: review" timeout 30 "$WARREN" logs -f "$S1"
show="$(W show --json "$S1")"
[ "$(echo "$show" | json_get 'd["id"]')" = "$S1" ] && [ "$(echo "$show" | json_get 'd["state"]')" = review ] &&
	pass "show --json has the id and state" || fail "show --json has the id and state" "$(echo "$show" | head -5)"
expect_output "show: key: value lines" "^state: +review$" W show "$S1"
expect_output "show: the agent as a command line" "^agent: +sh -c 'echo hello; echo to-stderr >&2'$" W show "$S1"
[ "$(W sessions --json | json_get 'd["sessions"][0]["id"]')" = "$S1" ] &&
	pass "sessions --json lists the session" || fail "sessions --json lists the session" "$(W sessions 2>&1 | head -3)"
expect_output "sessions: a table" "^$S1 +review +proj +admin +[0-9]+[smhd] +say hello$" W sessions
expect_status "show of an unknown session: exit 1" 1 W show s-0000000000000000
expect_output "show of an unknown session: HTTP 404" "\(HTTP 404 not_found\)" W show s-0000000000000000

# a follow-up: a second turn in the same session
expect_output "send: a follow-up" "^message [0-9]+ sent to $S1" W send "$S1" "once more"
for _ in $(seq 1 300); do
	[ "$(W show --json "$S1" | json_get 'd["turns"]')" = 2 ] && [ "$(state_of "$S1")" = review ] && break
	sleep 0.2
done
[ "$(W logs "$S1" 2>/dev/null | grep -c '^hello$')" = 2 ] && pass "send: the agent runs a second turn" ||
	fail "send: the agent runs a second turn" "$(W logs "$S1" 2>&1 | tail -5)"

# --- a failing agent: --wait exits 1 and says why ---------------------------
out="$(W run --repo proj --agent 'exit 3' --wait "fail please" 2>&1)"
rc=$?
[ $rc = 1 ] && echo "$out" | grep -Eq '^s-[^ ]+ failed' && pass "run --wait: a failed session exits 1" ||
	fail "run --wait: a failed session exits 1" "rc=$rc $out"

# --- run --follow --json: JSON lines, session first and last ----------------
W run --repo proj --agent 'echo json' --follow --json "as json" >"$TEST_TMP/run.json" 2>/dev/null
rc=$?
n="$(json_lines <"$TEST_TMP/run.json")"
last="$(tail -1 "$TEST_TMP/run.json" | json_get 'd["state"]')"
[ $rc = 0 ] && [ "${n:-0}" -ge 4 ] && [ "$last" = review ] && pass "run --follow --json: JSON lines" ||
	fail "run --follow --json: JSON lines" "rc=$rc n=$n last=$last"

# --- a long session, cancelled ----------------------------------------------
S2="$(W run --repo proj --agent 'echo started; sleep 60' "take your time" | awk '{print $1}')"
[ -n "$S2" ] && pass "run prints the new session's id" || fail "run prints the new session's id" "nothing"
wait_state "$S2" running 120 && pass "the long session runs" || fail "the long session runs" "state $(state_of "$S2")"

# `logs -f` across a server restart: the stream drops, the client
# reconnects with Last-Event-ID and goes on until the session rests.
timeout 120 "$WARREN" logs -f "$S2" >"$TEST_TMP/follow.out" 2>"$TEST_TMP/follow.err" &
follower=$!
sleep 1
server_stop
server_start && pass "the server restarts" || fail "the server restarts" "$(tail -5 "$TEST_TMP/serve.log")"
sleep 2
out="$(W cancel "$S2" 2>&1)"
rc=$?
[ $rc = 0 ] && [ "$out" = "$S2 cancelled" ] && pass "cancel prints the id and cancelled" ||
	fail "cancel prints the id and cancelled" "rc=$rc $out"
[ "$(state_of "$S2")" = cancelled ] && pass "show: the session is cancelled" || fail "show: the session is cancelled" "$(state_of "$S2")"
expect_status "cancel again: API error, exit 1" 1 W cancel "$S2"
wait "$follower"
rc=$?
[ $rc = 0 ] && pass "logs -f ends when the session rests" || fail "logs -f ends when the session rests" "rc=$rc $(tail -3 "$TEST_TMP/follow.err")"
grep -q "reconnecting" "$TEST_TMP/follow.err" && grep -q '^-- state: cancelled' "$TEST_TMP/follow.out" &&
	pass "logs -f reconnects after the server restarts" ||
	fail "logs -f reconnects after the server restarts" "$(tail -3 "$TEST_TMP/follow.err") / $(tail -3 "$TEST_TMP/follow.out")"
[ "$(grep -c '^started$' "$TEST_TMP/follow.out")" -ge 1 ] && [ "$(grep -c '^-- state: queued' "$TEST_TMP/follow.out")" = "$(W logs "$S2" | grep -c '^-- state: queued')" ] &&
	pass "logs -f shows no event twice" || fail "logs -f shows no event twice" "$(cat "$TEST_TMP/follow.out" | tr '\n' '|')"

# --- tokens -------------------------------------------------------------------
T="$(W token create --user alice --role submitter 2>/dev/null)"
[ -n "$T" ] && W sessions --token "$T" >/dev/null 2>&1 && pass "token create: a token that works" ||
	fail "token create: a token that works" "token '$T'"
expect_status "an unknown token: exit 1" 1 W sessions --token wr_nope
expect_output "an unknown token: HTTP 401 and where it came from" "\(HTTP 401 unauthorized\); the token came from --token" W sessions --token wr_nope

server_stop
expect_status "after the server stops: exit 3" 3 W show "$S1"
