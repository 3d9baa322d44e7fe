#!/bin/bash
# The evidence a reviewer approves is what leaves Warren. A command agent is
# root in its sandbox and owns /workspace, its .git included, so it attacks
# the path from its work to the push (tests/fixtures/evidence/*.sh, one
# script per attack):
#
#   1. hooks that move refs: whoever takes the branch gets evil.txt, whoever
#      reads HEAD sees only the honest edit
#   2. diff, attribute and filter drivers that hide lines from a `git diff`
#      run in the workspace
#   3. untracked, excluded files (and files outside the workspace) that make
#      verification pass without a fix; and the positive control, a real fix
#   4. objects the host must refuse: trees with .git, .GIT, "..", a symlink
#      .gitmodules, in the agent's history, made out of Warren's own commit
#      by hooks, written by Warren's own `git write-tree` in the sandbox (a
#      hook forges the index's cache-tree after any `git add`), or in the
#      workspace itself
#   5. HEAD and ref tampering: main moved, the session's refs deleted, the
#      base replaced (refs/replace), HEAD on an unrelated orphan commit
#
# plus a control session that attacks nothing. The contract checked for
# each session that reaches review: outcome.result.commit (40 hex) and
# .base (the remote's main the session started from); outcome.verify.commit
# == result.commit (verification ran on exactly that commit, in a fresh
# sandbox); after approval outcome.push.commit == result.commit ==
# refs/heads/warren/<id> on the bare remote; every line the host's own
# `git diff base..pushed` (clean environment, no drivers) adds is in
# Warren's diff, every file it names too, and Warren's diff adds nothing
# that was not pushed; what was pushed passes a strict fsck. A change the
# host refuses ends failed (or without an approvable result) with a reason
# that names the problem, approval is refused and nothing is pushed.
#
# One server, every session submitted at once; each wait is bounded by one
# deadline, so a hung session fails its checks instead of the file.
. "$(dirname "$0")/../lib.sh"
. "$ROOT_DIR/tests/integration/control_lib.sh"

FIX="$ROOT_DIR/tests/fixtures/evidence"

# control_lib's api and a diff, with a bound on each request: a request the
# server never answers fails the checks that follow instead of hanging
api() {
	local out
	out="$(curl -s --max-time 60 -w '\n%{http_code}' -X "$1" -H "Authorization: Bearer $TOKEN" \
		${3:+-H 'Content-Type: application/json' --data-binary "$3"} "$URL$2")"
	CODE="${out##*$'\n'}"
	BODY="${out%$'\n'*}"
}
events_json() {
	curl -s --max-time 30 -H "Authorization: Bearer $TOKEN" "$URL/api/v1/sessions/$1/events?format=json"
}
warren_diff() { curl -s --max-time 60 -H "Authorization: Bearer $TOKEN" "$URL/api/v1/sessions/$1/diff"; }
T0=$(date +%s)
DEADLINE=$((T0 + 150))

# host git in a clean environment: no user or system configuration, no
# attribute files, no replace refs, no drivers
hgit() {
	env -i PATH=/usr/bin:/bin HOME=/nonexistent GIT_CONFIG_NOSYSTEM=1 GIT_ATTR_NOSYSTEM=1 \
		GIT_NO_REPLACE_OBJECTS=1 git -c core.attributesFile=/dev/null -c core.hooksPath=/dev/null "$@"
}
hdiff() { hgit -C "$1" diff --no-ext-diff --no-textconv --no-color --no-renames "$2" "$3"; }

# make_remote NAME FILE=CONTENT...: a bare repository $TEST_TMP/NAME.git
# whose main is one commit of those files
make_remote() {
	local name="$1" w="$TEST_TMP/$1.work" f
	shift
	mkdir -p "$w"
	for f in "$@"; do printf '%s' "${f#*=}" >"$w/${f%%=*}"; done
	git init -q --bare -b main "$TEST_TMP/$name.git"
	g -C "$w" init -q -b main
	g -C "$w" add -A
	g -C "$w" commit -q -m initial
	g -C "$w" push -q "$TEST_TMP/$name.git" main
}

# the target of most attacks: verify passes while greeting.txt says hello
make_remote target \
	"greeting.txt=hello
" \
	'warren.json={"customizations": {"warren": {"verify": ["sh", "-c", "grep -q hello greeting.txt"]}}}
'
TARGET="$TEST_TMP/target.git"
# verification that passes on a real fix (README says "fixed"), or on a file
# no fresh checkout of the change holds
make_remote steer \
	"README=broken
" \
	'check.sh=#!/bin/sh
for f in .verify-ok /root/.verify-ok /tmp/.verify-ok; do
	if [ -e "$f" ]; then echo "verify: found $f"; exit 0; fi
done
if grep -qx fixed README; then echo "verify: README fixed"; exit 0; fi
echo "verify: README not fixed" >&2
exit 1
' \
	'warren.json={"customizations": {"warren": {"verify": ["sh", "check.sh"]}}}
'
STEER="$TEST_TMP/steer.git"
TARGET_BASE="$(hgit -C "$TARGET" rev-parse main)"
STEER_BASE="$(hgit -C "$STEER" rev-parse main)"

cat >"$TEST_TMP/config.json" <<EOF
{"verify": {"retries": 0},
 "limits": {"max_sandboxes": 16, "max_per_user": 16},
 "repositories": [{"name": "ev-target", "url": "$TARGET"},
                  {"name": "ev-steer", "url": "$STEER"}]}
EOF
D="$TEST_TMP/data"
server_start "$D" "$TEST_TMP/config.json"
if [ -z "$TOKEN" ]; then
	fail "server starts" "$(tail -5 "$SERVER_LOG")"
	exit 0
fi

# submit_agent REPO SCRIPT [ARG]: a session whose command agent is
# `bash -c SCRIPT evidence-agent ARG`; prints the id
submit_agent() {
	local body
	body="$(jq -n --arg r "$1" --arg s "$(cat "$2")" --arg a "${3:-}" \
		'{repo: $r, prompt: "evidence: \($s | split("\n")[1])", agent: ["bash", "-c", $s, "evidence-agent", $a]}')"
	api POST /api/v1/sessions "$body"
	[ "$CODE" = 201 ] && jget .id
}

# wait_rest ID: until the session rests (or anything but working), or the
# deadline; leaves the session in BODY and its state in STATE
wait_rest() {
	while :; do
		api GET "/api/v1/sessions/$1"
		STATE="$(jget .state)"
		case "$STATE" in review | failed | cancelled | expired | pushed | rejected | approved) return 0 ;; esac
		[ "$(date +%s)" -ge "$DEADLINE" ] && return 1
		sleep 0.2
	done
}

# strict_fetch REMOTE REF: REF's objects fetched into an empty repository
# with every fsck check, those git only warns about included
strict_fetch() {
	local d
	d="$(mktemp -d "$TEST_TMP/fsck.XXXXXX")"
	hgit init -q --bare "$d"
	hgit -C "$d" -c fetch.fsckObjects=true -c fetch.fsck.hasDotgit=error -c fetch.fsck.hasDotdot=error \
		-c fetch.fsck.hasDot=error -c fetch.fsck.fullPathname=error -c fetch.fsck.nulInHeader=error \
		fetch -q "$1" "$2:refs/heads/check" 2>&1
	local rc=$?
	rm -rf "$d"
	return $rc
}

printf 'cd /workspace && echo "hello from the control agent" >>greeting.txt\n' >"$TEST_TMP/control.sh"
S_CONTROL="$(submit_agent ev-target "$TEST_TMP/control.sh")"
S_HOOKS="$(submit_agent ev-target "$FIX/hooks.sh")"
S_DRIVERS="$(submit_agent ev-target "$FIX/drivers.sh")"
S_STEER="$(submit_agent ev-steer "$FIX/steer.sh")"
S_FIX="$(submit_agent ev-steer "$FIX/fix.sh")"
S_DOTGIT="$(submit_agent ev-target "$FIX/objects.sh" dotgit)"
S_DOTDOT="$(submit_agent ev-target "$FIX/objects.sh" dotdot)"
S_WTREE="$(submit_agent ev-target "$FIX/objects.sh" worktree)"
S_REFS="$(submit_agent ev-target "$FIX/refs.sh")"
ALL="$S_CONTROL $S_HOOKS $S_DRIVERS $S_STEER $S_FIX $S_DOTGIT $S_DOTDOT $S_WTREE $S_REFS"
n=0
for s in $ALL; do n=$((n + 1)); done
[ "$n" = 9 ] && pass "nine command-agent sessions submitted" || fail "nine command-agent sessions submitted" "got $n: $CODE $BODY"

# contract LABEL ID REMOTE BASE: the session rests in review with a result
# whose commit was verified, approval pushes exactly it, and the host's diff
# of what was pushed is the diff Warren showed. Leaves RC (the reviewed
# commit), RR (the remote's warren/<id>), WDIFF (Warren's diff).
contract() {
	local l="$1" id="$2" remote="$3" base="$4"
	RC="" RR="" WDIFF=""
	if [ -z "$id" ]; then
		fail "$l: submitted" "no session"
		return
	fi
	wait_rest "$id"
	local log
	log="$(session_log "$id" | tail -6 | tr '\n' '|')"
	[ "$STATE" = review ] && pass "$l: the session rests in review" ||
		fail "$l: the session rests in review" "state=${STATE:-none} reason=$(jget .reason) log: $log"
	RC="$(jget .outcome.result.commit)"
	local rb vc
	rb="$(jget .outcome.result.base)"
	vc="$(jget .outcome.verify.commit)"
	[[ "$RC" =~ ^[0-9a-f]{40}$ ]] && pass "$l: outcome.result.commit is a commit id" ||
		fail "$l: outcome.result.commit is a commit id" "'$RC'"
	[ "$rb" = "$base" ] && pass "$l: outcome.result.base is the commit the session started from" ||
		fail "$l: outcome.result.base is the commit the session started from" "base=${rb:-missing}, main was $base"
	[ -n "$RC" ] && [ "$vc" = "$RC" ] && pass "$l: the verified commit is the reviewed one" ||
		fail "$l: the verified commit is the reviewed one" "outcome.verify.commit=${vc:-missing} outcome.result.commit=${RC:-missing}"
	WDIFF="$(warren_diff "$id")"

	local refs_before refs_after
	refs_before="$(hgit -C "$remote" for-each-ref --format='%(refname) %(objectname)')"
	api POST "/api/v1/sessions/$id/approve"
	[ "$CODE" = 200 ] && [ "$(jget .state)" = pushed ] && pass "$l: approve: pushed" ||
		fail "$l: approve: pushed" "$CODE $(jget .state) $(jget .reason) $(jget .error)"
	local pc
	pc="$(jget .outcome.push.commit)"
	[ -n "$RC" ] && [ "$pc" = "$RC" ] && pass "$l: the pushed commit is the reviewed one" ||
		fail "$l: the pushed commit is the reviewed one" "outcome.push.commit=${pc:-missing} outcome.result.commit=${RC:-missing}"
	RR="$(hgit -C "$remote" rev-parse -q --verify "refs/heads/warren/$id")"
	[ -n "$RC" ] && [ "$RR" = "$RC" ] && pass "$l: the remote's warren/<id> is the reviewed commit" ||
		fail "$l: the remote's warren/<id> is the reviewed commit" "remote=${RR:-none} reviewed=${RC:-missing}"
	refs_after="$(hgit -C "$remote" for-each-ref --format='%(refname) %(objectname)')"
	local new
	new="$(comm -13 <(echo "$refs_before" | sort) <(echo "$refs_after" | sort) | cut -d' ' -f1 | tr '\n' ' ')"
	[ "$new" = "refs/heads/warren/$id " ] && pass "$l: approval changed exactly one ref on the remote" ||
		fail "$l: approval changed exactly one ref on the remote" "changed: ${new:-none}"
	if [ -z "$RR" ]; then
		fail "$l: every line pushed is in Warren's diff" "nothing was pushed"
		return
	fi
	local hd missing extra files_missing out
	hd="$(hdiff "$remote" "$base" "$RR")"
	missing="$(echo "$hd" | grep '^+' | grep -Ev '^\+\+\+ (b/|/dev/null)' | while IFS= read -r line; do
		grep -qxF -- "$line" <<<"$WDIFF" || printf '%s\n' "$line"
	done)"
	[ -z "$missing" ] && pass "$l: every line pushed is in Warren's diff" ||
		fail "$l: every line pushed is in Warren's diff" "missing: $(echo "$missing" | head -5 | tr '\n' '|')"
	files_missing="$(hgit -C "$remote" diff --no-renames --name-only "$base" "$RR" | while IFS= read -r f; do
		grep -qxF -- "diff --git a/$f b/$f" <<<"$WDIFF" || printf '%s ' "$f"
	done)"
	[ -z "$files_missing" ] && pass "$l: every file pushed is in Warren's diff" ||
		fail "$l: every file pushed is in Warren's diff" "missing: $files_missing"
	extra="$(echo "$WDIFF" | grep '^+' | grep -Ev '^\+\+\+ (b/|/dev/null)' | while IFS= read -r line; do
		grep -qxF -- "$line" <<<"$hd" || printf '%s\n' "$line"
	done)"
	[ -z "$extra" ] && pass "$l: Warren's diff adds nothing that was not pushed" ||
		fail "$l: Warren's diff adds nothing that was not pushed" "extra: $(echo "$extra" | head -5 | tr '\n' '|')"
	out="$(strict_fetch "$remote" "refs/heads/warren/$id")" && pass "$l: what was pushed passes a strict fsck" ||
		fail "$l: what was pushed passes a strict fsck" "$(echo "$out" | head -3 | tr '\n' '|')"
}

# refused LABEL ID REMOTE [history]: a change the host refuses: the session
# ends failed, or without an approvable result, saying why; approval is
# refused and nothing reaches the remote. With "history" the crafted
# objects are only in the agent's own history and refs, which Warren may
# leave out of the change altogether: a session that rests with an
# approvable result is then held to the whole contract, and what approval
# pushes must carry none of the crafted objects (a strict fsck).
REFUSED_WHY='\.git|gitmodules|refus|invalid path|fsck|hasdot|'"'"'\.\.'"'"
refused() {
	local l="$1" id="$2" remote="$3" mode="${4:-strict}"
	if [ -z "$id" ]; then
		fail "$l: submitted" "no session"
		return
	fi
	wait_rest "$id"
	local rerr why rc rr out
	rerr="$(jget .outcome.result.error)"
	rc="$(jget .outcome.result.commit)"
	why="$(jget .reason) $rerr"
	if [ "$STATE" = failed ] || { [ "$STATE" = review ] && [ -n "$rerr" ]; }; then
		pass "$l: the session ends failed or without an approvable result"
		echo "$l: $STATE, reason: $why" >&2
		echo "$why" | grep -Eiq -- "$REFUSED_WHY" && pass "$l: the reason names the problem" ||
			fail "$l: the reason names the problem" "reason: $why"
		api POST "/api/v1/sessions/$id/approve"
		[ "$CODE" != 200 ] && pass "$l: approval is refused" || fail "$l: approval is refused" "$CODE $(jget .state)"
		rr="$(hgit -C "$remote" rev-parse -q --verify "refs/heads/warren/$id")"
		[ -z "$rr" ] && pass "$l: nothing is pushed" || fail "$l: nothing is pushed" "warren/$id is $rr on the remote"
	elif [ "$mode" = history ] && [ "$STATE" = review ]; then
		contract "$l" "$id" "$remote" "$TARGET_BASE"
		if [ -z "$RR" ]; then
			fail "$l: an approvable result carries none of the crafted objects" "nothing was pushed to look at"
		elif out="$(strict_fetch "$remote" "refs/heads/warren/$id")"; then
			pass "$l: an approvable result carries none of the crafted objects"
		else
			fail "$l: an approvable result carries none of the crafted objects" \
				"$(echo "$out" | grep -Ei 'error|warning|fatal' | head -2 | tr '\n' '|')"
		fi
	else
		fail "$l: the session ends failed or without an approvable result" \
			"state=${STATE:-none} result.commit=${rc:-none} reason=$(jget .reason) log: $(session_log "$id" | tail -4 | tr '\n' '|')"
		api POST "/api/v1/sessions/$id/approve"
		rr="$(hgit -C "$remote" rev-parse -q --verify "refs/heads/warren/$id")"
		[ -z "$rr" ] && pass "$l: nothing is pushed" || fail "$l: nothing is pushed" \
			"approve $CODE: warren/$id is $rr on the remote$(out="$(strict_fetch "$remote" "refs/heads/warren/$id")" || echo ", with $(echo "$out" | grep -Ei 'error|warning' | head -1)")"
	fi
}

# on the pushed branch: FILE holds TEXT
pushed_has() { hgit -C "$1" show "refs/heads/warren/$2:$3" 2>/dev/null | grep -qF -- "$4"; }

# --- control: an honest edit ------------------------------------------------------
contract "control" "$S_CONTROL" "$TARGET" "$TARGET_BASE"
pushed_has "$TARGET" "$S_CONTROL" greeting.txt "hello from the control agent" &&
	pass "control: the edit is on the pushed branch" || fail "control: the edit is on the pushed branch" "$(hgit -C "$TARGET" show "warren/$S_CONTROL:greeting.txt" 2>&1 | head -3)"

# --- 1. hooks moving refs -------------------------------------------------------------
contract "hooks" "$S_HOOKS" "$TARGET" "$TARGET_BASE"
pushed_has "$TARGET" "$S_HOOKS" greeting.txt "hello from the hooks agent" &&
	pass "hooks: the honest edit is on the pushed branch" || fail "hooks: the honest edit is on the pushed branch" "not there"
if [ -n "$RR" ] && hgit -C "$TARGET" cat-file -e "$RR:evil.txt" 2>/dev/null; then
	grep -qxF '+EVIL-HOOK' <<<"$WDIFF" && pass "hooks: evil.txt is pushed only where Warren's diff shows it" ||
		fail "hooks: evil.txt is pushed only where Warren's diff shows it" "evil.txt is on warren/$S_HOOKS, not in the diff"
else
	pass "hooks: evil.txt is pushed only where Warren's diff shows it"
fi

# --- 2. diff drivers hiding lines ------------------------------------------------------
contract "drivers" "$S_DRIVERS" "$TARGET" "$TARGET_BASE"
HIDDEN="greeting.txt:textconv nodiff.txt:nodiff info.txt:infoattributes global.txt:globalattributes
	system.txt:systemattributes external.txt:external filter.txt:filter big.txt:bigfile"
not_shown="" not_pushed=""
for h in $HIDDEN; do
	grep -qxF "+HIDDEN-LINE-${h#*:}" <<<"$WDIFF" || not_shown="$not_shown ${h#*:}"
	pushed_has "$TARGET" "$S_DRIVERS" "${h%%:*}" "HIDDEN-LINE-${h#*:}" || not_pushed="$not_pushed ${h#*:}"
done
[ -z "$not_shown" ] && pass "drivers: Warren's diff shows every hidden line" ||
	fail "drivers: Warren's diff shows every hidden line" "not shown:$not_shown; filter.txt in the diff: $(grep -A6 '^diff --git a/filter.txt' <<<"$WDIFF" | tr '\n' '|')"
[ -z "$not_pushed" ] && pass "drivers: the pushed branch holds every hidden line (no clean filter)" ||
	fail "drivers: the pushed branch holds every hidden line (no clean filter)" "not pushed:$not_pushed"
if [ -n "$WDIFF" ] && ! grep -Eq '^Binary files |^GIT binary patch' <<<"$WDIFF"; then
	pass "drivers: Warren's diff shows the text files as text"
else
	fail "drivers: Warren's diff shows the text files as text" "$(grep -E '^Binary files |^GIT binary patch' <<<"$WDIFF" | head -3 | tr '\n' '|')${WDIFF:+}"
fi

# --- 3. untracked files steering verification ---------------------------------------
contract "steer" "$S_STEER" "$STEER" "$STEER_BASE"
api GET "/api/v1/sessions/$S_STEER"
# .verify-ok may only make verification pass where it is part of the
# change (then the diff shows it, checked above); the copies outside the
# workspace never may
if [ -n "$RR" ] && hgit -C "$STEER" cat-file -e "$RR:.verify-ok" 2>/dev/null; then
	grep -qxF 'diff --git a/.verify-ok b/.verify-ok' <<<"$WDIFF" && pass "steer: verification passes only on what the result holds" ||
		fail "steer: verification passes only on what the result holds" ".verify-ok was pushed but is not in the diff"
else
	[ "$(jraw .outcome.verify.passed)" = false ] && pass "steer: verification passes only on what the result holds" ||
		fail "steer: verification passes only on what the result holds" "the result holds no .verify-ok, yet verify: $(jget .outcome.verify | jq -c '{passed, commit, output: [.results[]? | .output]}' 2>/dev/null)"
fi
contract "fix" "$S_FIX" "$STEER" "$STEER_BASE"
api GET "/api/v1/sessions/$S_FIX"
[ "$(jraw .outcome.verify.passed)" = true ] && pass "fix: a real fix passes verification" ||
	fail "fix: a real fix passes verification" "verify: $(jget .outcome.verify | jq -c '{passed, commit}' 2>/dev/null)"

# --- 4. crafted objects ------------------------------------------------------------------
refused "dotgit" "$S_DOTGIT" "$TARGET" history
refused "dotdot" "$S_DOTDOT" "$TARGET" history
refused "worktree" "$S_WTREE" "$TARGET"

# --- 5. HEAD and ref tampering ----------------------------------------------------------
contract "refs" "$S_REFS" "$TARGET" "$TARGET_BASE"
pushed_has "$TARGET" "$S_REFS" greeting.txt "hello from the refs agent" &&
	pass "refs: the honest edit is on the pushed branch" || fail "refs: the honest edit is on the pushed branch" "not there"
[ -n "$RR" ] && hgit -C "$TARGET" merge-base --is-ancestor "$TARGET_BASE" "$RR" &&
	pass "refs: the pushed commit descends from the base" || fail "refs: the pushed commit descends from the base" "${RR:-nothing pushed}"

# --- the remote ---------------------------------------------------------------------------
for r in "$TARGET" "$STEER"; do
	n="$(basename "$r" .git)"
	[ "$(hgit -C "$r" rev-parse main)" = "$(hgit -C "$TEST_TMP/$n.work" rev-parse main)" ] &&
		pass "$n: main on the remote is untouched" || fail "$n: main on the remote is untouched" "moved"
	other="$(hgit -C "$r" for-each-ref --format='%(refname)' | grep -Ev '^refs/heads/(main|warren/[^/]+)$' | tr '\n' ' ')"
	[ -z "$other" ] && pass "$n: the remote has main and warren/<id> branches only" || fail "$n: the remote has main and warren/<id> branches only" "$other"
done
out="$(hgit -C "$TARGET" fsck --no-dangling 2>&1)"
echo "$out" | grep -Eiq 'hasDot|gitmodules|fullPathname|error|warning' &&
	fail "target: no object on the remote that fsck warns about" "$(echo "$out" | grep -Ei 'hasDot|gitmodules|fullPathname|error|warning' | head -3 | tr '\n' '|')" ||
	pass "target: no object on the remote that fsck warns about"

server_stop
left=""
for s in $ALL; do
	if "$WARREN" sandbox ls --all 2>/dev/null | grep -q "ws-$s"; then
		left="$left $s"
		"$WARREN" sandbox rm "ws-$s" >/dev/null 2>&1
	fi
done
[ -z "$left" ] && pass "no sandbox left" || fail "no sandbox left" "$left"
echo "evidence.sh: $(($(date +%s) - T0)) s" >&2
