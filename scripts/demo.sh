#!/bin/bash
# scripts/demo.sh - `make demo`: a short tour of Warren.
#
#   1-6   the sandbox: isolation, restrictions, limits, layers, long-lived
#         sandboxes, start cost
#   7     snapshots: a C project built once, sessions restored from it
#   8-14  the control plane: `warren serve` on a temporary data directory, a
#         real repository registered, four sessions in parallel (scripted
#         agents that edit the code and run the project's tests), a
#         follow-up, the raw HTTP API, and a clean stop (SIGTERM)
#   15-20 the agent and the review: a server whose model is a recorded
#         transcript (replay provider) drives the built-in agent on a
#         repository whose remote is a local bare repository; Warren's own
#         verification fails once and the agent fixes it; the diff, approval
#         (warren/<id> pushed to the bare remote), a rejection, the stats
#
# Needs root; leaves nothing behind (temporary directory, server, sandboxes).
set -u
BUILD="${BUILD:-build}"
cd "$(dirname "$0")/.." || exit 1
W="$PWD/$BUILD/warren"
work="$(mktemp -d /tmp/warren-demo.XXXXXX)"
NAME="demo-$$"
SERVER_PID=""
SESSIONS=""

stop_server() {
	[ -n "$SERVER_PID" ] || return 0
	kill -TERM "$SERVER_PID" 2>/dev/null
	for _ in $(seq 1 300); do
		kill -0 "$SERVER_PID" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$SERVER_PID" 2>/dev/null
	wait "$SERVER_PID" 2>/dev/null
	SERVER_PID=""
}
cleanup() {
	stop_server
	for id in $SESSIONS; do "$W" sandbox rm "ws-$id" >/dev/null 2>&1; done
	"$W" sandbox rm "$NAME" >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_server DATA LOG [SERVE-OPTION...]: warren serve on a free loopback
# port; sets SERVER_PID and PORT
start_server() {
	local data="$1" log="$2"
	shift 2
	for _ in 1 2 3 4 5; do
		PORT=$((20000 + RANDOM % 40000))
		"$W" serve --data "$data" --listen "127.0.0.1:$PORT" "$@" >"$log" 2>&1 &
		SERVER_PID=$!
		for _ in $(seq 1 100); do
			grep -q 'listening on' "$log" 2>/dev/null && break
			kill -0 "$SERVER_PID" 2>/dev/null || break
			sleep 0.1
		done
		grep -q 'listening on' "$log" && return 0
		stop_server # the port was taken: another one
	done
	echo "warren serve did not start:" >&2
	cat "$log" >&2
	exit 1
}

part() { printf '\n\033[1;4m%s\033[0m\n' "$*"; }
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
note() { printf '   %s\n' "$*"; }
# show CMD...: print the command (warren for our binary, quoted where
# needed), then run it
show() {
	local line='$' a
	for a in "$@"; do
		[ "$a" = "$W" ] && a=warren
		case "$a" in
		'' | *[[:space:]\'\"\$\;\&\|\<\>\(\)\*\?\\]*) a="'${a//\'/\'\\\'\'}'" ;;
		esac
		line="$line $a"
	done
	printf '%s\n' "$line"
	"$@"
}

if [ "$(id -u)" != 0 ]; then
	echo "make demo needs root (namespaces, mounts, cgroups)" >&2
	exit 1
fi

part "Part 1: the sandbox"

step "1. A one-off sandbox: its own root, pid 1, hostname, network"
show "$W" sandbox run -- sh -c 'id; hostname; echo "pid 1 is: $(cat /proc/1/comm)"; echo "processes: $(ls -d /proc/[0-9]* | wc -l)"; echo "interfaces: $(ls /sys/class/net 2>/dev/null || awk -F: "NR>2{print \$1}" /proc/net/dev | tr -d " ")"; ls /'

step "2. What root inside may not do (capabilities, no_new_privs, seccomp)"
show "$W" sandbox run -- sh -c 'grep -E "CapEff|NoNewPrivs|Seccomp:" /proc/self/status; mount -t tmpfs x /mnt 2>&1 | head -1; unshare -U true 2>&1 | head -1; touch /usr/bin/x 2>&1 | head -1'

step "3. Limits that hold: memory (64M), pids (32), timeout (1s), disk (8M)"
show "$W" sandbox run --memory 64M -- sh -c 'x=$(head -c 200M /dev/zero | tr "\0" a); echo survived'
note "-> exit $? (137 = killed by the memory limit, inside the sandbox only)"
show "$W" sandbox run --pids 32 -- sh -c 'i=0; while [ $i -lt 100 ]; do sleep 5 & i=$((i+1)); done'
note "-> exit $? (the shell could not fork past the limit of 32; the host is untouched)"
show "$W" sandbox run --timeout 1s -- sleep 30
note "-> exit $? (124 = timed out)"
show "$W" sandbox run --disk 8M -- sh -c 'head -c 32M /dev/zero > /workspace/big; echo "write status $?, $(du -m /workspace/big | cut -f1) MiB written"'

step "4. Layers: build one with --upper, reuse it read-only with --layer"
show "$W" sandbox run --upper "$work/layer" -- sh -c 'mkdir -p /workspace/app && echo "print(\"hello from a layer\")" > /workspace/app/main.py && chown -R 1000:1000 /workspace/app'
echo "on the host, owned by the store range:"; ls -ln "$work/layer/upper/workspace/app"
show "$W" sandbox run --layer "$work/layer" -- sh -c 'ls -l /workspace/app; echo changed > /workspace/app/main.py; cat /workspace/app/main.py'
echo "the layer is unchanged: $(cat "$work/layer/upper/workspace/app/main.py")"

step "5. A long-lived sandbox: create, exec, ls, rm"
show "$W" sandbox create --name "$NAME" --memory 512M
show "$W" sandbox exec "$NAME" -- sh -c 'echo state > /workspace/note; sleep 300 >/dev/null 2>&1 &'
show "$W" sandbox exec "$NAME" --cwd /workspace -- cat note
show "$W" sandbox ls
pid="$("$W" sandbox ls | awk -v n="$NAME" '$1==n {print $3}')"
echo "idle init memory: $(awk '/VmRSS/ {print $2, $3}' /proc/$pid/status)"
show "$W" sandbox rm "$NAME"
echo "left behind: $(find /sys/fs/cgroup -path "*/warren/$NAME" 2>/dev/null | wc -l) cgroups"

step "6. Start-up cost (--json)"
show "$W" sandbox run --json --layer "$work/layer" -- true

part "Part 2: snapshots"

step "7. Build a C project once, start sessions from it in milliseconds"
export WARREN_HOME="$work/data"
repo="$work/c-hello"
cp -a tests/fixtures/c-hello "$repo"
git -C "$repo" init -q -b main
git -C "$repo" -c user.email=demo@warren -c user.name=demo add -A
git -C "$repo" -c user.email=demo@warren -c user.name=demo commit -q -m "initial"
note "(tests/fixtures/c-hello: configure, Makefile, src/, tests/run.sh; its"
note " .devcontainer/devcontainer.json runs ./configure and make at build time)"
show "$W" snapshot build --quiet "$repo"
id="$("$W" snapshot list | awk 'NR==2 {print $1}')"
show "$W" snapshot list
show "$W" sandbox run --snapshot "$id" -- ./hello demo
echo "/* one more commit */" >>"$repo/src/greet.c"
git -C "$repo" -c user.email=demo@warren -c user.name=demo commit -q -am "one more commit"
echo "one commit later, a session syncs to it (--ref main) before its command:"
show "$W" sandbox run --snapshot "$id" --ref main -- sh -c 'git -c safe.directory="*" log --oneline | head -2'

part "Part 3: the control plane (warren serve)"

step "8. warren serve on a fresh data directory"
D="$work/serve"
start_server "$D" "$work/serve.log"
echo "\$ warren serve --data $D --listen 127.0.0.1:$PORT &"
sed 's/^/    /' "$work/serve.log"
export WARREN_SERVER="http://127.0.0.1:$PORT" WARREN_HOME="$D"
note "the client verbs below find the server in \$WARREN_SERVER and the admin token"
note "in \$WARREN_HOME/admin.token (the data directory):"
ls -l "$D" | sed 's/^/    /'

step "9. Register the repository; its snapshot is built in the background"
show "$W" repo add "$repo" --name c-hello
for _ in $(seq 1 300); do
	"$W" snapshots --repo c-hello 2>/dev/null | grep -q c-hello && break
	sleep 0.2
done
show "$W" snapshots

step "10. Four sessions in parallel, each with a scripted agent"
note "An agent is any command: here, shell scripts that edit the code and run the"
note "project's tests (make test) in the session's sandbox. The prompt is in"
note "\$WARREN_PROMPT, the turn number in \$WARREN_TURN."
# The scripted agents (each runs with `sh -c` in /workspace, the repository).
AGENT_FAREWELL="$(
	cat <<'AGENT'
say() { echo "[agent] $*"; sleep 0.4; }
say "task: $WARREN_PROMPT"
say "src/greet.h, src/greet.c: a new function, farewell()"
sed -i 's|^#endif|int farewell(char *buf, size_t len, const char *name);\n#endif|' src/greet.h
cat >>src/greet.c <<'EOF'

int farewell(char *buf, size_t len, const char *name)
{
	int n = snprintf(buf, len, "goodbye, %s.", name);
	return n < 0 || (size_t)n >= len ? -1 : n;
}
EOF
say "tests/farewell.c: its test, run by make test"
cat >tests/farewell.c <<'EOF'
#include "src/greet.h"
#include <stdio.h>
#include <string.h>

int main(void)
{
	char buf[64];
	if (farewell(buf, sizeof(buf), "warren") < 0 || strcmp(buf, "goodbye, warren.")) {
		printf("FAIL farewell: got '%s'\n", buf);
		return 1;
	}
	puts("ok   farewell");
	return 0;
}
EOF
sed -i 's|^test: hello$|test: hello tests/farewell|; s|^\tsh tests/run.sh ./hello$|&\n\t./tests/farewell|' Makefile
printf '\ntests/farewell: tests/farewell.c src/greet.o\n\t$(CC) $(CFLAGS) -I. -o $@ tests/farewell.c src/greet.o\n' >>Makefile
say "running the project's tests"
make test
AGENT
)"
AGENT_EMPTY_NAME="$(
	cat <<'AGENT'
say() { echo "[agent] $*"; sleep 0.4; }
say "task: $WARREN_PROMPT"
say "tests/run.sh: a check for an empty name"
sed -i 's/^exit \$fail$/check "empty name" "$(HELLO_GREETING=hi "$bin" "")" "hi, !"\nexit $fail/' tests/run.sh
say "running the project's tests"
make test
AGENT
)"
AGENT_HEY="$(
	cat <<'AGENT'
say() { echo "[agent] $*"; sleep 0.4; }
say "task: $WARREN_PROMPT"
say "src/main.c: the default greeting becomes \"hey\" (the tests are left alone)"
sed -i 's/: GREETING_DEFAULT,/: "hey",/' src/main.c
say "running the project's tests"
make test
AGENT
)"
AGENT_EXCITED="$(
	cat <<'AGENT'
say() { echo "[agent] $*"; sleep 0.4; }
if [ "$WARREN_TURN" -gt 1 ]; then
	say "follow-up: $WARREN_PROMPT"
	say "the workspace still holds turn 1's change:"
	git -c safe.directory='*' diff
	say "running the project's tests"
	make -s test
	exit
fi
say "task: $WARREN_PROMPT"
say "reading src/greet.c: $(grep -o '"%s, %s!"' src/greet.c)"
sed -i 's/"%s, %s!"/"%s, %s!!"/' src/greet.c
say "now: $(grep -o '"%s, %s!!"' src/greet.c)"
say "tests/run.sh: the expected output follows"
sed -i 's/world!"/world!!"/; s/warren!"/warren!!"/' tests/run.sh
say "running the project's tests"
make test
AGENT
)"
started() { # ID-LINE: remember the session
	echo "$1"
	SESSIONS="$SESSIONS ${1%% *}"
}
echo '$ warren run --repo c-hello --agent "$AGENT_FAREWELL" "add a farewell() function, with a test"'
started "$("$W" run --repo c-hello --agent "$AGENT_FAREWELL" "add a farewell() function, with a test")"
S_FAREWELL="${SESSIONS##* }"
echo '$ warren run --repo c-hello --agent "$AGENT_EMPTY_NAME" "test the greeting of an empty name"'
started "$("$W" run --repo c-hello --agent "$AGENT_EMPTY_NAME" "test the greeting of an empty name")"
S_EMPTY_NAME="${SESSIONS##* }"
echo '$ warren run --repo c-hello --agent "$AGENT_HEY" "greet with hey by default"'
started "$("$W" run --repo c-hello --agent "$AGENT_HEY" "greet with hey by default")"
sleep 0.5
show "$W" sessions
echo
note "the fourth one, followed (--follow): progress on stderr, the agent's output as it comes."
note "Its agent:"
echo "$AGENT_EXCITED" | sed 's/^/    | /'
echo '$ warren run --repo c-hello --agent "$AGENT_EXCITED" --follow "make the greeting more excited"'
"$W" run --repo c-hello --agent "$AGENT_EXCITED" --follow "make the greeting more excited"
note "-> exit $? (0: the session reached review)"
S_EXCITED="$("$W" sessions 2>/dev/null | awk '/more excited/ {print $1; exit}')"
SESSIONS="$SESSIONS $S_EXCITED"

step "11. They finish: sessions, show, logs"
for id in $SESSIONS; do # `logs -f` ends when the session rests
	timeout 60 "$W" logs -f "$id" >/dev/null 2>&1
done
show "$W" sessions
note "three changes wait in review, their tests passing (new ones included):"
for id in "$S_FAREWELL" "$S_EMPTY_NAME"; do
	echo "\$ warren logs $id | grep -E '^(ok|FAIL) '"
	"$W" logs "$id" | grep -E '^(ok|FAIL) '
done
note "the fourth broke the project's tests, so it failed:"
S_HEY="$("$W" sessions --state failed 2>/dev/null | awk '/hey by default/ {print $1; exit}')"
show "$W" logs "${S_HEY:-none}"
show "$W" show "$S_EXCITED" | cut -c1-100
note "(lines cut at 100 columns)"
note "sessions in review keep their sandbox (ws-ID) for a follow-up until idle (15 min by"
note "default); the failed one has none:"
note "(sandbox ls lists the sandboxes of its data directory, \$WARREN_HOME: this"
note "server's; --all, every Warren sandbox on the host)"
show "$W" sandbox ls

step "12. A follow-up: a new turn in the same workspace"
show "$W" send "$S_EXCITED" "show me the diff and run the tests again"
for _ in $(seq 1 300); do
	"$W" show "$S_EXCITED" 2>/dev/null | grep -Eq '^turns: +2$' && break
	sleep 0.1
done
echo "\$ warren logs -f $S_EXCITED    (from the follow-up on)"
timeout 60 "$W" logs -f "$S_EXCITED" 2>&1 | sed -n '/^-- message from/,$p'

step "13. The HTTP API underneath (docs/api.md), with the admin token"
if command -v curl >/dev/null; then
	T="Authorization: Bearer $(cat "$D/admin.token")"
	U="$WARREN_SERVER/api/v1"
	echo "\$ curl -s -H \"Authorization: Bearer \$(cat $D/admin.token)\" $U/healthz"
	curl -s -H "$T" "$U/healthz"
	echo
	re='^warren_(sessions\{state="(review|failed)"|start_latency_ms_(sum|count)\{phase="total"|sandboxes_started)'
	echo "\$ curl -s -H \"Authorization: Bearer \$(cat $D/admin.token)\" $U/metrics | grep -E '$re'"
	curl -s -H "$T" "$U/metrics" | grep -E "$re"
	echo "\$ curl -sI $WARREN_SERVER/    # the web UI (docs/web.md): sign in there with a token"
	curl -sI "$WARREN_SERVER/" | grep -iE '^(HTTP|content-type|content-security-policy)' | tr -d '\r'
else
	note "(curl is not installed: the HTTP API part is skipped)"
fi

step "14. Stop the server (SIGTERM)"
echo "\$ kill -TERM $SERVER_PID"
stop_server
sed 's/^/    /' "$work/serve.log" | tail -1
note "the resting sandboxes were stopped with it:"
show "$W" sandbox ls
note "the sessions stay in warren.db, their workspaces on disk (a restarted server"
note "picks them up; a follow-up gets a new sandbox on the same workspace):"
show grep -h snprintf "$D/sessions/$S_EXCITED/upper/workspace/src/greet.c"

part "Part 4: the agent and the review"

step "15. A remote, and a server whose model drives the built-in agent"
REMOTE="$work/c-hello-remote.git"
tree="$work/c-hello-tree"
g() { git -c user.email=demo@warren -c user.name=demo "$@"; }
note "the remote: a bare repository, with c-hello pushed to its main (plus a .gitignore"
note "for the build's outputs; without one, Warren still leaves out what the snapshot build made)"
cp -a tests/fixtures/c-hello "$tree"
printf '%s\n' hello '*.o' config.h config.mk >"$tree/.gitignore"
show git init -q --bare -b main "$REMOTE"
g -C "$tree" init -q -b main
g -C "$tree" add -A
g -C "$tree" commit -q -m "c-hello"
show git -C "$tree" push -q "$REMOTE" main
REC="$PWD/tests/fixtures/replay/c-hello-demo.json"
cat >"$work/agent.json" <<EOF
{"model": {"provider": "replay", "replay": "$REC",
           "prices": {"prompt": 0.4, "completion": 1.6}},
 "verify": {"retries": 2}}
EOF
note "the server's configuration: the model is a recorded transcript played back (the replay"
note "provider: no network, no key; docs/agent.md); a real one is \"provider\": \"openai\" with"
note "base_url, model and api_key_file. verify.retries: how often a failed verification goes"
note "back to the agent."
show cat "$work/agent.json"
D2="$work/serve-agent"
start_server "$D2" "$work/serve-agent.log" --config "$work/agent.json"
echo "\$ warren serve --data $D2 --listen 127.0.0.1:$PORT --config $work/agent.json &"
sed 's/^/    /' "$work/serve-agent.log"
export WARREN_SERVER="http://127.0.0.1:$PORT" WARREN_HOME="$D2"
show "$W" repo add "$REMOTE" --name c-hello-remote

step "16. Sessions without --agent: the built-in agent"
note "The agent loop runs in the server: the model proposes, tools act in the session's"
note "sandbox (read_file, write_file, edit_file, list_files, bash, run_verify, finish). When it"
note "finishes, Warren runs the spec's verify (make test) itself; a failure goes back to it."
note "The same task twice (a replay plays the same way for both): one to approve, one to reject."
PROMPT='trim the spaces around the name: "  warren  " is greeted as "warren"'
echo "\$ warren run --repo c-hello-remote '$PROMPT'"
started "$("$W" run --repo c-hello-remote "$PROMPT")"
S_REJECT="${SESSIONS##* }"
echo "\$ warren run --repo c-hello-remote --follow '$PROMPT'"
"$W" run --repo c-hello-remote --follow "$PROMPT"
note "-> exit $? (0: the session reached review)"
S_AGENT="$("$W" sessions --repo c-hello-remote 2>/dev/null | awk -v r="$S_REJECT" 'NR > 1 && $1 != r {print $1; exit}')"
SESSIONS="$SESSIONS $S_AGENT"

step "17. What the agent did: its transcript, kept as events"
note "Every message of the conversation is stored as a \"transcript\" event before the loop"
note "goes on (a new sandbox or a restarted server resumes from them); each of Warren's"
note "verifications is a \"verify\" event. Rendered with jq:"
# one line per message or tool call; the tests' ok/FAIL lines of results
TRANSCRIPT_JQ='
def line1: split("\n")[0] | gsub("\t"; " ") | sub(" Now:$"; "");
def tests: split("\n")[] | select(test("^(ok|FAIL) ")) | "            " + .;
if .kind == "verify" then
  "[warren]   verify, attempt \(.data.attempt): " +
  ([.data.verify.results[] | "\(.command): exit \(.status)"] | join(", ")) +
  (if .data.verify.passed then " (passed)" else " (failed)" end)
elif .kind == "transcript" then
  .data.message as $m |
  if $m.role == "system" then "[system]   " + ($m.content | .[0:88] | sub(" [^ ]*$"; "")) + " ..."
  elif $m.role == "user" then ("[user]     " + ($m.content | line1)), ($m.content | tests)
  elif $m.role == "assistant" then
    (if $m.content then "[model]    " + $m.content else empty end),
    ($m.tool_calls[]? | (.function.arguments | fromjson? // {}) as $a |
      "[model]    -> \(.function.name) " + ($a.path // $a.command // ($a.summary // "" | line1)))
  elif ($m.content | test("^ *[0-9]+\t")) then
    "[tool]     (\($m.content | split("\n") | map(select(length > 0)) | length) numbered lines of the file)"
  else ("[tool]     " + ($m.content | line1)), ($m.content | tests)
  end
else empty end'
if command -v jq >/dev/null; then
	echo "\$ warren logs $S_AGENT --json | jq -r '...'"
	"$W" logs "$S_AGENT" --json | jq -r "$TRANSCRIPT_JQ"
else
	note "(jq is not installed: the transcript is left out; warren logs $S_AGENT --json has it)"
fi

step "18. The review: Warren's verification, the commit, the diff"
show "$W" show "$S_AGENT" | cut -c1-100
note "(lines cut at 100 columns)"
if command -v jq >/dev/null; then
	echo "\$ warren show $S_AGENT --json | jq -c '.outcome.verify | ...'"
	"$W" show "$S_AGENT" --json |
		jq -c '.outcome.verify | {passed, attempts, first_attempt_passed, last: [.results[] | {command, status}]}'
fi
note "the change is a commit on warren/ID in the sandbox's repository, authored by the"
note "prompting user (admin), with the agent's summary as its message; the diff is against"
note "the commit the session started from:"
show "$W" diff "$S_AGENT" --stat
show "$W" diff "$S_AGENT"

step "19. Approve: the server pushes warren/ID to the remote, and nothing else"
show "$W" approve "$S_AGENT"
note "the branch left the sandbox as a git bundle (the sandbox has no network and no"
note "credential); the server fetched it into its mirror and pushed that one ref, not forced:"
show git -C "$REMOTE" log --oneline "refs/heads/warren/$S_AGENT"
show git -C "$REMOTE" show -s --format='author: %an <%ae>%n%n%B' "refs/heads/warren/$S_AGENT"
show git -C "$REMOTE" for-each-ref

step "20. Reject the other one; the pilot's numbers"
timeout 60 "$W" logs -f "$S_REJECT" >/dev/null 2>&1 # until it rests in review
show "$W" sessions --repo c-hello-remote
show "$W" reject "$S_REJECT" --reason "the same change as $S_AGENT, which is approved"
echo "\$ git -C $REMOTE for-each-ref | wc -l"
git -C "$REMOTE" for-each-ref | wc -l
note "(still main and warren/$S_AGENT: a rejected session pushes nothing)"
echo '$ warren stats    (the by_state lines at 0 left out)'
"$W" stats | awk '!/^by_state\./ || $2 != 0'
note "verify: both failed their first attempt and passed in the end; model: tokens and the"
note "cost from the configured prices; review: the time from review to the decision."
echo "\$ kill -TERM $SERVER_PID"
stop_server
sed 's/^/    /' "$work/serve-agent.log" | tail -1

printf '\nDone. More: README.md, docs/ (the agent: docs/agent.md). Tests: make check. Benchmarks: make bench.\n'
