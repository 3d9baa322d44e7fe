#!/bin/bash
# The credential broker end to end: a remote served over smart HTTP that
# lets anyone fetch and only an authenticated user push (as a forge does);
# a server configured with that user's password for the repository; inside
# a real session (a command agent): origin goes through the broker, `git
# fetch origin` works, a push to warren/<session> reaches the remote (with
# the server's credentials: the remote's log shows the authenticated
# push), a push to main, a deletion of the session's branch, a force push
# of a rewritten branch and a push to another session's branch are refused
# with their reasons and change nothing; the password is nowhere the
# sandbox can look (no process's environment or command line, not in the
# workspace, the session's upper directory, the layers, the mirror, the
# data directory at all). Tokens: a sandbox's token expires with its
# sandbox (a re-provisioned sandbox has a new one, the old one is refused),
# an ended session's token is refused on another session's socket, each
# refusal is recorded; the broker calls are in the sessions' audit logs,
# which verify.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"

CLIENT="$ROOT_DIR/$BUILD/warren-git-connect"
[ -x "$CLIENT" ] || { fail "warren-git-connect is built" "missing $CLIENT"; exit 0; }

# --- the remote: fetch for anyone, push with the password ------------------------
SECRET="pw-$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')"
PWFILE="$TEST_TMP/remote-password"
printf '%s\n' "$SECRET" >"$PWFILE"
chmod 600 "$PWFILE"
GROOT="$TEST_TMP/git"
mkdir -p "$GROOT"
SEED="$TEST_TMP/seed"
mkdir -p "$SEED"
echo '{}' >"$SEED/warren.json"
echo hello >"$SEED/README"
git -C "$SEED" init -q -b main
git -C "$SEED" -c user.email=t@warren -c user.name=test add -A
git -C "$SEED" -c user.email=t@warren -c user.name=test commit -q -m initial
git clone -q --bare "$SEED" "$GROOT/proj.git"
git clone -q --bare "$SEED" "$GROOT/proj2.git"
REMOTE="$GROOT/proj.git"
MAIN0="$(git -C "$REMOTE" rev-parse refs/heads/main)"
GLOG="$TEST_TMP/git-http.log"
python3 "$ROOT_DIR/tests/tools/git_http_server.py" --root "$GROOT" --port 0 --user warren-bot \
	--password-file "$PWFILE" --log "$GLOG" >"$TEST_TMP/git-http.port" &
GIT_PID=$!
trap 'kill $GIT_PID 2>/dev/null; server_stop; rm -rf "$TEST_TMP"' EXIT
for _ in $(seq 1 50); do [ -s "$TEST_TMP/git-http.port" ] && break; sleep 0.1; done
GP="$(head -1 "$TEST_TMP/git-http.port")"
URL_REMOTE="http://127.0.0.1:$GP/proj.git"
# the stand-in refuses an anonymous push, as a forge would
git clone -q "$URL_REMOTE" "$TEST_TMP/anon" 2>/dev/null
out="$(cd "$TEST_TMP/anon" && GIT_TERMINAL_PROMPT=0 git push origin HEAD:refs/heads/anon 2>&1)"
[ -z "$(git -C "$REMOTE" for-each-ref refs/heads/anon)" ] && pass "the test remote refuses an anonymous push" ||
	fail "the test remote refuses an anonymous push" "$out"

# --- the server: the repository with its credentials -----------------------------
D="$TEST_TMP/data"
CONF="$TEST_TMP/serve.json"
cat >"$CONF" <<EOF
{"repositories": [{"name": "proj", "url": "$URL_REMOTE",
                   "credentials": {"username": "warren-bot", "password_file": "$PWFILE"}},
                  {"name": "proj2", "url": "http://127.0.0.1:$GP/proj2.git",
                   "credentials": {"username": "warren-bot", "password_secret": "PROJ2_PUSH"}}]}
EOF
# bad credentials configurations are refused with the key named
echo '{"repositories": [{"name": "x", "url": "/x", "credentials": {"username": "u"}}]}' >"$TEST_TMP/bad1.json"
out="$("$WARREN" serve --data "$TEST_TMP/bad-data" --listen 127.0.0.1:1 --config "$TEST_TMP/bad1.json" 2>&1)"
echo "$out" | grep -q 'repositories\[0\].credentials' && pass "credentials without a password are refused, the key named" ||
	fail "credentials without a password are refused, the key named" "$out"
chmod 644 "$PWFILE"
echo "{\"repositories\": [{\"name\": \"x\", \"url\": \"/x\", \"credentials\": {\"username\": \"u\", \"password_file\": \"$PWFILE\"}}]}" >"$TEST_TMP/bad2.json"
out="$("$WARREN" serve --data "$TEST_TMP/bad-data" --listen 127.0.0.1:1 --config "$TEST_TMP/bad2.json" 2>&1)"
chmod 600 "$PWFILE"
echo "$out" | grep -q 'readable by others' && pass "a password file others may read is refused" ||
	fail "a password file others may read is refused" "$out"

server_start "$D" "$CONF"
api GET /api/v1/healthz
[ "$CODE" = 200 ] && pass "a server with repository credentials starts" ||
	fail "a server with repository credentials starts" "$(tail -3 "$SERVER_LOG")"
for _ in $(seq 1 300); do
	api GET /api/v1/snapshots
	[ "$(jget '.snapshots | length')" -ge 1 ] 2>/dev/null && break
	sleep 0.2
done

# --- session 1: fetch, push where allowed and where not --------------------------
# Each git call prints "NAME rc=N" and its output prefixed by "NAME: ". The
# agent then waits (for the scan of its processes) until /tmp/.scanned.
AGENT="$(
	cat <<'EOF'
run() { name=$1; shift; out=$("$@" 2>&1); rc=$?; echo "$name rc=$rc"; echo "$out" | sed "s/^/$name: /"; }
echo "origin $(git remote get-url origin)"
echo "token-file $(stat -c %a /run/warren-broker/token) $(wc -c </run/warren-broker/token)"
run fetch git fetch origin
git config user.email agent@warren; git config user.name agent
echo change >>README; git commit -qam "agent change"
echo "head $(git rev-parse HEAD)"
run push-session git push origin "HEAD:refs/heads/warren/$WARREN_SESSION"
run fetch-after git fetch origin
echo "tracking $(git rev-parse "origin/warren/$WARREN_SESSION")"
run push-main git push origin HEAD:main
run push-delete git push origin ":refs/heads/warren/$WARREN_SESSION"
git commit -q --amend -m rewritten
run push-force git push -f origin "HEAD:refs/heads/warren/$WARREN_SESSION"
run push-other git push origin HEAD:refs/heads/warren/s-someone-else
git reset -q --hard "origin/warren/$WARREN_SESSION"
echo scan-now
i=0; while [ ! -f /tmp/.scanned ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
echo agent-done
EOF
)"
S1="$(submit proj "broker" "$AGENT")"
[ -n "$S1" ] || fail "submit session 1" "$CODE $BODY"
wait_output "$S1" scan-now 180 ||
	fail "the broker agent runs" "$(session_log "$S1" | tail -8; tail -5 "$SERVER_LOG")"
log="$(session_log "$S1")"
check() { # NAME REGEX
	if echo "$log" | grep -Eq -- "$2"; then pass "$1"; else fail "$1" "$(echo "$log" | grep -E "^stdout ${3:-x}" | head -4 | tr '\n' ' ')"; fi
}
check "origin goes through the broker" '^stdout origin ext::/run/warren-git-connect %S /run/warren-broker/broker.sock$' origin
check "the token file: 0644, one token of 47 characters" '^stdout token-file 644 47$' token
check "git fetch origin works through the broker" '^stdout fetch rc=0$' fetch
check "a push to warren/<session> goes through" '^stdout push-session rc=0$' push-session
check "the pusher sees the new branch" "^stdout push-session: .*\\[new branch\\] +HEAD -> warren/$S1" push-session
HEAD1="$(echo "$log" | sed -n 's/^stdout head //p' | head -1)"
[ -n "$HEAD1" ] && [ "$(git -C "$REMOTE" rev-parse "refs/heads/warren/$S1" 2>/dev/null)" = "$HEAD1" ] &&
	pass "the session's branch is on the remote, at the agent's commit" ||
	fail "the session's branch is on the remote, at the agent's commit" "head $HEAD1, remote $(git -C "$REMOTE" for-each-ref | tr '\n' ' ')"
check "a fetch after the push sees the branch" "^stdout tracking $HEAD1\$" tracking
check "a push to main is refused" '^stdout push-main rc=1$' push-main
check "a push to main: a clear reason" "^stdout push-main: .*\\[remote rejected\\] HEAD -> main \\(warren broker: this session may push only to refs/heads/warren/$S1 and below\\)" push-main
[ "$(git -C "$REMOTE" rev-parse refs/heads/main)" = "$MAIN0" ] && pass "main is unchanged" ||
	fail "main is unchanged" "$(git -C "$REMOTE" log --oneline -3 main)"
check "deleting the session's branch is refused" '^stdout push-delete rc=1$' push-delete
check "a deletion: a clear reason" '^stdout push-delete: .*\(warren broker: deleting a ref is not allowed\)' push-delete
check "a force push of a rewritten branch is refused" '^stdout push-force rc=1$' push-force
check "a force push: a clear reason" '^stdout push-force: .*\(warren broker: not a fast-forward \(force pushes are refused\)\)' push-force
[ "$(git -C "$REMOTE" rev-parse "refs/heads/warren/$S1" 2>/dev/null)" = "$HEAD1" ] &&
	pass "the session's branch survives the deletion and the force push" ||
	fail "the session's branch survives the deletion and the force push" "$(git -C "$REMOTE" for-each-ref | tr '\n' ' ')"
check "a push to another session's branch is refused" '^stdout push-other rc=1$' push-other
[ -z "$(git -C "$REMOTE" for-each-ref refs/heads/warren/s-someone-else)" ] &&
	[ "$(git -C "$REMOTE" for-each-ref --format='%(refname)' | sort | tr '\n' ' ')" = "refs/heads/main refs/heads/warren/$S1 " ] &&
	pass "the remote gained exactly one ref, the session's branch" ||
	fail "the remote gained exactly one ref, the session's branch" "$(git -C "$REMOTE" for-each-ref --format='%(refname)' | tr '\n' ' ')"

# the push reached the remote with the server's credentials
jq -e -s '[.[] | select(.service == "git-receive-pack" and .method == "POST" and .auth == "ok" and .user == "warren-bot" and .status == 200)] | length == 1' "$GLOG" >/dev/null &&
	! jq -e -s '[.[] | select(.auth == "bad")] | length > 0' "$GLOG" >/dev/null &&
	pass "the remote took the push authenticated as the configured user" ||
	fail "the remote took the push authenticated as the configured user" "$(tail -5 "$GLOG" | tr '\n' ' ')"

# --- the password is nowhere the sandbox can look ---------------------------------
INIT="$(sandbox_init_pid "ws-$S1")"
found=""
if [ -n "$INIT" ]; then
	NS="$(readlink "/proc/$INIT/ns/pid")"
	n=0
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/ns/pid" 2>/dev/null)" = "$NS" ] || continue
		n=$((n + 1))
		for f in environ cmdline; do
			grep -qaF "$SECRET" "$p/$f" 2>/dev/null && found="$found $p/$f"
		done
	done
	[ "$n" -ge 2 ] && [ -z "$found" ] &&
		pass "no process of the sandbox has the password in its environment or command line ($n processes)" ||
		fail "no process of the sandbox has the password in its environment or command line" "processes $n, found:$found"
else
	fail "no process of the sandbox has the password in its environment or command line" "no sandbox for $S1"
fi
# what the sandbox sees of files: its workspace and root (the session's
# upper), /run (the broker's directory, the mirror), /etc, /tmp
out="$(sandbox_exec_in "$S1" sh -c 'echo "files $(find /workspace /root /run /etc /tmp -type f 2>/dev/null | wc -l)"
grep -rlaF --devices=skip -f /dev/stdin /workspace /root /run /etc /tmp 2>/dev/null; echo scan-done' <<<"$SECRET")"
[ "$(echo "$out" | grep -v '^files ' | tr '\n' ' ')" = "scan-done " ] && [ "$(echo "$out" | sed -n 's/^files //p')" -ge 10 ] &&
	pass "no file the sandbox can read holds the password" ||
	fail "no file the sandbox can read holds the password" "$(echo "$out" | head -5 | tr '\n' ' ')"
out="$(grep -rlaF "$SECRET" "$D" 2>/dev/null)"
[ -z "$out" ] && pass "nothing under the data directory holds the password (layers, upper, mirror, staging, store, audit)" ||
	fail "nothing under the data directory holds the password" "$out"
sandbox_exec_in "$S1" touch /tmp/.scanned >/dev/null
wait_state "$S1" review 60 || fail "session 1 reaches review" "$STATE"

# --- the calls are recorded -------------------------------------------------------
ev="$(events_json "$S1" | jq -c '[.events[] | select(.kind == "broker") | .data]')"
echo "$ev" | jq -e --arg s "$S1" --arg h "$HEAD1" '[.[] | select(.service == "git-receive-pack") | .refs[]? | select(.ref == "refs/heads/warren/\($s)" and .new == $h and .decision == "pushed")] | length == 1' >/dev/null &&
	echo "$ev" | jq -e '[.[] | .refs[]? | select(.ref == "refs/heads/main" and .decision == "refused" and (.reason | test("may push only")))] | length == 1' >/dev/null &&
	echo "$ev" | jq -e '[.[] | select(.service == "git-upload-pack" and .decision == "allowed" and .credential == "https" and .remote == "'"$URL_REMOTE"'")] | length >= 2' >/dev/null &&
	pass "each broker call is an event: service, refs with old, new and decision, the remote and the credential kind" ||
	fail "each broker call is an event" "$(echo "$ev" | head -c 900)"
out="$("$WARREN" audit verify "$S1" --data "$D" 2>&1)"
echo "$out" | grep -q "chain intact" && [ "$(echo "$out" | grep -cE ' agent +broker ')" -ge 6 ] &&
	echo "$out" | grep -E ' agent +broker ' | grep -q '"decision":"refused","new":"0000000000000000000000000000000000000000"' &&
	pass "warren audit verify lists the broker calls (the deletion refused among them), and the chain holds" ||
	fail "warren audit verify lists the broker calls, and the chain holds" "$(echo "$out" | grep -E 'broker|chain' | head -5)"

# --- tokens: a sandbox's token expires with it ------------------------------------
AGENT2='if [ ! -f /workspace/.attempt ]; then touch /workspace/.attempt; echo first-attempt-done; sleep 600; fi
git ls-remote origin >/dev/null 2>&1 && echo second-ls-remote-ok; echo attempt-done'
S2="$(submit proj "tokens" "$AGENT2")"
wait_output "$S2" first-attempt-done 120 || fail "session 2 runs" "$(session_log "$S2" | tail -5)"
T2A="$TEST_TMP/token-2a"
cp "$D/sessions/$S2.broker/token" "$T2A"
pid="$(sandbox_init_pid "ws-$S2")"
[ -n "$pid" ] && kill -9 "$pid"
wait_state "$S2" review 120 || fail "session 2 is re-provisioned and reaches review" "$STATE $(session_log "$S2" | tail -4)"
session_log "$S2" | grep -q '^stdout second-ls-remote-ok$' && pass "a re-provisioned sandbox reaches the broker with its new token" ||
	fail "a re-provisioned sandbox reaches the broker with its new token" "$(session_log "$S2" | tail -4 | tr '\n' ' ')"
! cmp -s "$T2A" "$D/sessions/$S2.broker/token" && pass "a new sandbox gets a new token" ||
	fail "a new sandbox gets a new token" "the token did not change"
ls_remote() { # TOKEN-FILE SOCKET
	git -c protocol.ext.allow=always ls-remote "ext::$CLIENT --token $1 %S $2" 2>&1
}
out="$(ls_remote "$T2A" "$D/sessions/$S2.broker/broker.sock")"
echo "$out" | grep -q 'fatal: remote error: warren broker: token expired (its sandbox stopped)' &&
	pass "the old sandbox's token is refused: expired" || fail "the old sandbox's token is refused: expired" "$out"
out="$(ls_remote "$D/sessions/$S2.broker/token" "$D/sessions/$S2.broker/broker.sock")"
echo "$out" | grep -q "refs/heads/warren/$S1" && pass "the live token works (and sees session 1's branch)" ||
	fail "the live token works" "$out"

# --- tokens: an ended session's is refused, and recorded in its own log -------------
T1="$TEST_TMP/token-1"
cp "$D/sessions/$S1.broker/token" "$T1"
api POST "/api/v1/sessions/$S1/reject" '{"reason": "test"}'
wait_state "$S1" rejected 30 || fail "session 1 is rejected" "$STATE"
for _ in $(seq 1 50); do [ -e "$D/sessions/$S1.broker" ] || [ -e "$D/broker/$S1.git" ] || break; sleep 0.1; done
[ ! -e "$D/sessions/$S1.broker" ] && [ ! -e "$D/broker/$S1.git" ] &&
	pass "an ended session's socket, token and staging repository are gone" ||
	fail "an ended session's socket, token and staging repository are gone" "$(ls -la "$D/sessions" "$D/broker" 2>&1 | tr '\n' ' ')"
out="$(ls_remote "$T1" "$D/sessions/$S2.broker/broker.sock")"
echo "$out" | grep -q "warren broker: a token of session $S1, expired (the session ended)" &&
	pass "an ended session's token is refused on another session's socket" ||
	fail "an ended session's token is refused on another session's socket" "$out"
for _ in $(seq 1 50); do
	"$WARREN" audit export "$S1" --data "$D" 2>/dev/null | grep -q '"token_session"' && break
	sleep 0.1
done
out="$("$WARREN" audit verify "$S1" --data "$D" 2>&1)"
echo "$out" | grep -q "chain intact" &&
	echo "$out" | grep -E ' agent +broker ' | grep -F "expired (the session ended)" | grep -q "\"socket_session\":\"$S2\"" &&
	pass "the later use is recorded in the ended session's audit log" ||
	fail "the later use is recorded in the ended session's audit log" "$(echo "$out" | tail -3)"
out="$("$WARREN" audit verify "$S2" --data "$D" 2>&1)"
echo "$out" | grep -E ' agent +broker ' | grep -F "token expired (its sandbox stopped)" | grep -q '"decision":"refused"' &&
	echo "$out" | grep -E ' agent +broker ' | grep -qF "\"token_session\":\"$S1\"" &&
	pass "the refusals are recorded in the socket's session's audit log" ||
	fail "the refusals are recorded in the socket's session's audit log" "$(echo "$out" | grep broker | tail -3)"

# --- credentials from the secret store ------------------------------------------------
api PUT /api/v1/secrets/PROJ2_PUSH "$(jq -n --arg v "$SECRET" '{value: $v}')"
[ "$CODE" = 200 ] || [ "$CODE" = 201 ] || fail "set the secret PROJ2_PUSH" "$CODE $BODY"
S3="$(submit proj2 "secret" 'git commit -q --allow-empty -m three -c user.email=a@w 2>/dev/null || git -c user.email=a@w -c user.name=a commit -q --allow-empty -m three; git push -q origin "HEAD:refs/heads/warren/$WARREN_SESSION" && echo pushed-ok')"
wait_state "$S3" review 120
session_log "$S3" | grep -q '^stdout pushed-ok$' && [ -n "$(git -C "$GROOT/proj2.git" for-each-ref "refs/heads/warren/$S3")" ] &&
	pass "credentials from the secret store (password_secret): the push goes through" ||
	fail "credentials from the secret store (password_secret): the push goes through" "$(session_log "$S3" | tail -4 | tr '\n' ' ')"
out="$(grep -rlaF "$SECRET" "$D" 2>/dev/null)"
[ -z "$out" ] && pass "the secret store keeps the password encrypted: still nothing under the data directory" ||
	fail "the secret store keeps the password encrypted: still nothing under the data directory" "$out"

# --- approval: the reviewer's push reaches the authenticated remote with the
# broker's credentials (the host's git has none for it) -------------------------------
SA="$(submit proj2 "approve me" 'echo approved-change >approved.txt; echo changed')"
wait_state "$SA" review 120
api POST "/api/v1/sessions/$SA/approve"
pushed="$(git -C "$GROOT/proj2.git" rev-parse "refs/heads/warren/$SA" 2>/dev/null)"
[ "$CODE" = 200 ] && [ "$(jget .state)" = pushed ] && [ -n "$pushed" ] && [ "$pushed" = "$(jget .outcome.push.commit)" ] &&
	[ "$(git -C "$GROOT/proj2.git" show "refs/heads/warren/$SA:approved.txt" 2>/dev/null)" = approved-change ] &&
	pass "approval pushes warren/<id> to an authenticated remote with the configured credentials" ||
	fail "approval pushes warren/<id> to an authenticated remote with the configured credentials" "$CODE $(jget .state) $(jget .outcome.push) $(jget .reason)"

# --- at the end nothing of the broker is left ----------------------------------------
for s in "$S2" "$S3"; do
	api POST "/api/v1/sessions/$s/cancel"
	wait_state "$s" cancelled 30
done
server_stop
left="$(ls "$D/sessions" | grep '\.broker$'; ls -A "$D/broker" 2>/dev/null | grep -v '^\.hooks$')"
[ -z "$left" ] && pass "no broker socket directory or staging repository is left" ||
	fail "no broker socket directory or staging repository is left" "$left"
# what a killed server would leave is cleared at the next start
mkdir -p "$D/sessions/s-stale.broker" "$D/broker/s-stale.git"
echo wrb_stale >"$D/sessions/s-stale.broker/token"
server_start "$D" "$CONF"
[ ! -e "$D/sessions/s-stale.broker" ] && [ ! -e "$D/broker/s-stale.git" ] &&
	pass "a restarted server removes stale broker directories and staging repositories" ||
	fail "a restarted server removes stale broker directories and staging repositories" "$(ls -A "$D/sessions" "$D/broker" | tr '\n' ' ')"
server_stop
