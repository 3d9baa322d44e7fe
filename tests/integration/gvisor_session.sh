#!/bin/bash
# Sessions under gVisor, end to end: the server's sandbox.backend and a
# repository's customizations.warren.backend choose where a session runs
# (its snapshot build, its workspace, Warren's verification in a fresh
# sandbox), the session says which; a gVisor session runs to review with
# the agent's commands on gVisor's kernel, is approved and pushed; nothing
# of either backend is left.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"

if ! runsc --version >/dev/null 2>&1; then
	fail "runsc is installed (scripts/install-runsc.sh)" "not found"
	exit 0
fi

# two repositories: "greeter" says nothing of its backend (the server's,
# gvisor), "plain" asks for native
greeter_remote
GREETER="$REMOTE"
P="$TEST_TMP/plain-work"
PLAIN="$TEST_TMP/plain.git"
git init -q --bare -b main "$PLAIN"
mkdir -p "$P"
echo '{"customizations": {"warren": {"backend": "native", "verify": ["true"]}}}' >"$P/warren.json"
echo one >"$P/file.txt"
g -C "$P" init -q -b main
g -C "$P" add -A
g -C "$P" commit -q -m initial
g -C "$P" push -q "$PLAIN" main

D="$TEST_TMP/data"
cat >"$TEST_TMP/config.json" <<EOF
{"sandbox": {"backend": "gvisor"},
 "repositories": [{"name": "greeter", "url": "$GREETER"},
                  {"name": "plain", "url": "$PLAIN"}]}
EOF
server_start "$D" "$TEST_TMP/config.json"

# the agent writes down the kernel it runs on: gVisor's says 4.4.0
AGENT='uname -r > kernel.txt; echo "hello, world" > greeting.txt'
S1="$(submit greeter "note the kernel" "$AGENT")"
wait_state "$S1" review 180
[ "$STATE" = review ] && pass "gvisor: the session reaches review" ||
	fail "gvisor: the session reaches review" "$STATE $(session_log "$S1" | tail -5 | tr '\n' ' ')"
api GET "/api/v1/sessions/$S1"
[ "$(jget .backend)" = gvisor ] && [ "$(jget .outcome.backend)" = gvisor ] &&
	pass "gvisor: the session says where it ran (backend gvisor, the server's)" ||
	fail "gvisor: the session says where it ran (backend gvisor, the server's)" "$(jget .backend) / $(jget .outcome.backend)"
[ "$(jget .outcome.verify.passed)" = true ] && [ "$(jget .outcome.verify.sandbox)" = fresh ] &&
	pass "gvisor: Warren's verification passed in a fresh sandbox" ||
	fail "gvisor: Warren's verification passed in a fresh sandbox" "$(jget .outcome.verify)"
commit="$(jget .outcome.result.commit)"
kernel="$(git --git-dir="$D/sessions/$S1/evidence/result.git" show "$commit:kernel.txt" 2>/dev/null)"
host_kernel="$(uname -r)"
[ -n "$kernel" ] && [ "$kernel" != "$host_kernel" ] &&
	pass "gvisor: the agent's commands ran on gVisor's kernel ($kernel, not the host's $host_kernel)" ||
	fail "gvisor: the agent's commands ran on gVisor's kernel" "kernel.txt: '$kernel', host $host_kernel"
curl -s -H "Authorization: Bearer $TOKEN" "$URL/api/v1/sessions/$S1/diff" | grep -q '^+hello, world$' &&
	pass "gvisor: the diff is computed on the host from the committed change" ||
	fail "gvisor: the diff is computed on the host from the committed change" "$(curl -s -H "Authorization: Bearer $TOKEN" "$URL/api/v1/sessions/$S1/diff" | head -20)"
# a follow-up (the workspace restored from its upper) of the gVisor session comes back under gVisor
api POST "/api/v1/sessions/$S1/messages" '{"text": "once more"}'
wait_turns "$S1" 2 120
wait_state "$S1" review 120
api GET "/api/v1/sessions/$S1"
[ "$STATE" = review ] && [ "$(jget .backend)" = gvisor ] &&
	pass "gvisor: a follow-up turn runs under gVisor again" ||
	fail "gvisor: a follow-up turn runs under gVisor again" "$STATE $(jget .backend)"

api GET "/api/v1/sessions/$S1"
commit="$(jget .outcome.result.commit)"
api POST "/api/v1/sessions/$S1/approve" '{}'
[ "$CODE" = 200 ] && [ "$(git -C "$GREETER" rev-parse "warren/$S1" 2>/dev/null)" = "$commit" ] &&
	pass "gvisor: approval pushes exactly the verified commit" ||
	fail "gvisor: approval pushes exactly the verified commit" "$CODE $BODY; remote $(git -C "$GREETER" rev-parse "warren/$S1" 2>&1)"

# a repository that asks for native gets native, under the same server
S2="$(submit plain "touch it" 'echo two > file.txt; uname -r > kernel.txt')"
wait_state "$S2" review 120
api GET "/api/v1/sessions/$S2"
[ "$STATE" = review ] && [ "$(jget .backend)" = native ] &&
	pass "native: the repository's customizations.warren.backend wins over the server's" ||
	fail "native: the repository's customizations.warren.backend wins over the server's" "$STATE $(jget .backend)"
commit2="$(jget .outcome.result.commit)"
kernel2="$(git --git-dir="$D/sessions/$S2/evidence/result.git" show "$commit2:kernel.txt" 2>/dev/null)"
[ "$kernel2" = "$host_kernel" ] && pass "native: the agent ran on the host's kernel" ||
	fail "native: the agent ran on the host's kernel" "'$kernel2'"

# a bad backend in the configuration is refused with its key named
echo '{"sandbox": {"backend": "kvm"}}' >"$TEST_TMP/bad.json"
out="$("$WARREN" serve --data "$TEST_TMP/bad-data" --config "$TEST_TMP/bad.json" 2>&1)"
rc=$?
[ "$rc" = 2 ] && echo "$out" | grep -q 'sandbox.backend' &&
	pass "a bad sandbox.backend is refused, naming the key (exit 2)" ||
	fail "a bad sandbox.backend is refused, naming the key (exit 2)" "exit $rc: $out"

server_stop
left="$(pgrep -af 'runsc-(sandbox|gofer)' | grep -c "s-" || true)"
[ "$left" = 0 ] && [ -z "$("$WARREN" sandbox ls --data "$D" 2>/dev/null | grep -E 'w[sv]-s-')" ] &&
	pass "nothing of either backend is left (sandboxes, Sentries, gofers)" ||
	fail "nothing of either backend is left (sandboxes, Sentries, gofers)" "$(pgrep -af 'runsc-(sandbox|gofer)' | cut -c1-100)"
