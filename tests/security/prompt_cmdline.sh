#!/bin/bash
# Prompts are no host user's to read: while a session's agent runs, the
# prompt is on no process's command line (any host user reads those with
# ps) and in the environment of no host process outside the session's
# sandbox; inside, the agent has it in $WARREN_PROMPT and
# $WARREN_PROMPT_FILE, byte for byte. An agent whose argv template names
# "{prompt}" gets it there, replaced inside the sandbox (that argv is then
# the agent's own command line: docs/agent.md says so).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../integration/control_lib.sh"

greeter_remote
cat >"$TEST_TMP/serve.json" <<EOF
{"repositories": [{"name": "greeter", "url": "$REMOTE"}]}
EOF
server_start "$TEST_TMP/data" "$TEST_TMP/serve.json"

MARK="secret-prompt-$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')"
PROMPT="$MARK: it's \"quoted\", \$HOME stays, {prompt} stays"
body="$(jq -n --arg p "$PROMPT" '{repo: "greeter", prompt: $p,
  agent: ["sh", "-c", "printf \"%s\\n\" \"$WARREN_PROMPT\" >/tmp/env.txt; cp \"$WARREN_PROMPT_FILE\" /tmp/file.txt; echo ready; sleep 3"]}')"
api POST /api/v1/sessions "$body"
S="$(jget .id)"
wait_output "$S" ready 30

init="$(sandbox_init_pid "ws-$S")"
sb_ns="$(readlink "/proc/$init/ns/pid" 2>/dev/null)"
on_cmdline=""
in_env=""
for p in /proc/[0-9]*; do
	pid="${p#/proc/}"
	if tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qF "$MARK"; then
		on_cmdline="$on_cmdline $pid:$(tr '\0' ' ' <"$p/cmdline" | head -c 120)"
	fi
	[ "$(readlink "$p/ns/pid" 2>/dev/null)" = "$sb_ns" ] && continue
	if { tr '\0' '\n' <"$p/environ"; } 2>/dev/null | grep -qF "$MARK"; then
		in_env="$in_env $pid:$(tr '\0' ' ' <"$p/cmdline" | head -c 120)"
	fi
done
[ -n "$sb_ns" ] && [ -z "$on_cmdline" ] && pass "the prompt is on no process's command line" || fail "the prompt is on no process's command line" "ns=$sb_ns$on_cmdline"
[ -n "$sb_ns" ] && [ -z "$in_env" ] && pass "the prompt is in no host process's environment outside the sandbox" || fail "the prompt is in no host process's environment outside the sandbox" "$in_env"

got_env="$(sandbox_exec_in "$S" cat /tmp/env.txt)"
got_file="$(sandbox_exec_in "$S" cat /tmp/file.txt)"
[ "$got_env" = "$PROMPT" ] && pass "inside: \$WARREN_PROMPT is the prompt, byte for byte" || fail "inside: \$WARREN_PROMPT is the prompt, byte for byte" "$got_env"
[ "$got_file" = "$PROMPT" ] && pass "inside: \$WARREN_PROMPT_FILE holds the prompt" || fail "inside: \$WARREN_PROMPT_FILE holds the prompt" "$got_file"
wait_state "$S" review 30
[ "$STATE" = review ] && pass "the session goes on to review" || fail "the session goes on to review" "$STATE"

# "{prompt}" in the agent's argv: replaced inside the sandbox (its first
# occurrence in each argument), the rest of the argument kept
body="$(jq -n --arg p "$PROMPT" '{repo: "greeter", prompt: $p,
  agent: ["sh", "-c", "printf \"%s\\n\" \"$1\" >/tmp/arg.txt", "agent", "[{prompt}] {prompt}"]}')"
api POST /api/v1/sessions "$body"
S2="$(jget .id)"
wait_state "$S2" review 30
got_arg="$(sandbox_exec_in "$S2" cat /tmp/arg.txt)"
[ "$got_arg" = "[$PROMPT] {prompt}" ] && pass "inside: the first {prompt} of an argument is replaced by the prompt" || fail "inside: the first {prompt} of an argument is replaced by the prompt" "$got_arg"
server_stop
