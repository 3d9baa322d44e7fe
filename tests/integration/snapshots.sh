#!/bin/bash
# Snapshots of real projects: build (clone, hooks, two layers, manifest),
# restore (O(1) overlay of the layers), isolation between sessions started
# from one snapshot, reuse of the dependencies layer, failures that publish
# nothing, verify, gc.
. "$(dirname "$0")/../lib.sh"

export WARREN_HOME="$TEST_TMP/data"
FIX="$ROOT_DIR/tests/fixtures"
snap() { "$WARREN" snapshot "$@"; }

git_repo() { # SRC DST : a git repository with the fixture as first commit
	cp -a "$1" "$2"
	git -C "$2" init -q -b main
	git -C "$2" -c user.email=t@warren -c user.name=test add -A
	git -C "$2" -c user.email=t@warren -c user.name=test commit -q -m "initial"
}
commit() { # REPO MESSAGE
	git -C "$1" -c user.email=t@warren -c user.name=test commit -q -am "$2"
}

R="$TEST_TMP/c-hello"
git_repo "$FIX/c-hello" "$R"
head1="$(git -C "$R" rev-parse HEAD)"

out="$(snap build --quiet --json "$R" 2>&1)"
rc=$?
[ $rc = 0 ] && pass "build a C project (configure, make)" || fail "build a C project (configure, make)" "rc=$rc $(echo "$out" | tail -5)"
id="$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])' 2>/dev/null)"
[ ${#id} = 64 ] && pass "build --json has the snapshot id" || fail "build --json has the snapshot id" "$out"
echo "$out" | grep -q "\"commit\": \"$head1\"" && pass "build --json has the commit" || fail "build --json has the commit" "$out"
for phase in fetch clone install build services publish; do
	echo "$out" | grep -q "\"phase\": \"$phase\"" && pass "build records the $phase time" || fail "build records the $phase time" "$(echo "$out" | grep phase | tr -d ' \n')"
done
expect_output "list shows the snapshot" "^${id:0:12} +${head1:0:10}" snap list
expect_output "show by id prefix" "^commit +$head1" snap show "${id:0:10}"
expect_output "show lists two layers" "layer .*repo" snap show "$id"
expect_output "verify: layers match their hashes" "^ok: 2 layers" snap verify "$id"

# restore: the repository at the commit, built, its own checks passing
expect_output "a sandbox starts from the snapshot" "^hello, world!$" sb --snapshot "$id" -- ./hello
expect_output "the build output is in the snapshot" "ok   named" sb --snapshot "$id" -- make test
expect_output "the workspace is the repository at the commit" "^$head1$" sb --snapshot "$id" -- git -c safe.directory='*' rev-parse HEAD
expect_status "the project's verify command passes" 0 sb --snapshot "$id" -- make -s test
# a session's git goes through the credential broker: origin is set once,
# at build time, not at every session start
expect_output "origin points at the credential broker" "^ext::/run/warren-git-connect %S /run/warren-broker/broker.sock$" sb --snapshot "$id" -- git -c safe.directory='*' -C /workspace remote get-url origin
expect_output "the manifest says so" '"git_origin": "broker"' snap show --json "$id"

# isolation: two long-lived sandboxes from the same snapshot
"$WARREN" sandbox create --name "snap-a-$$" --snapshot "$id" >/dev/null
"$WARREN" sandbox create --name "snap-b-$$" --snapshot "$id" >/dev/null
"$WARREN" sandbox exec "snap-a-$$" -- sh -c 'echo only-in-a > /workspace/src/greet.c'
expect_output "a write in one session is invisible in another" "^#include" "$WARREN" sandbox exec "snap-b-$$" -- head -1 /workspace/src/greet.c
expect_output "...and visible where it was made" "^only-in-a$" "$WARREN" sandbox exec "snap-a-$$" -- cat /workspace/src/greet.c
layer_file="$(find "$WARREN_HOME/layers" -path '*/workspace/src/greet.c' | head -1)"
grep -q '^#include' "$layer_file" && pass "a session never writes into the snapshot's layers" || fail "a session never writes into the snapshot's layers" "$layer_file"
expect_output "gc keeps layers in use by live sandboxes" "removed 0 layers" snap gc
"$WARREN" sandbox rm "snap-a-$$" "snap-b-$$"

# a new commit with unchanged lockfiles reuses the dependencies layer
deps1="$(snap show "$id" | awk '$1=="layer" && $3=="deps" {print $2}')"
repo1="$(snap show "$id" | awk '$1=="layer" && $3=="repo" {print $2}')"
sed -i 's/"%s, %s!"/"%s, %s!!"/' "$R/src/greet.c"
sed -i 's/world!"/world!!"/; s/warren!"/warren!!"/' "$R/tests/run.sh"
commit "$R" "excited"
head2="$(git -C "$R" rev-parse HEAD)"
id2="$(snap build --quiet "$R" 2>&1 | tail -1)"
deps2="$(snap show "$id2" | awk '$1=="layer" && $3=="deps" {print $2}')"
repo2="$(snap show "$id2" | awk '$1=="layer" && $3=="repo" {print $2}')"
[ -n "$deps1" ] && [ "$deps1" = "$deps2" ] && pass "unchanged lockfiles: the dependencies layer is reused" || fail "unchanged lockfiles: the dependencies layer is reused" "$deps1 vs $deps2"
[ -n "$repo2" ] && [ "$repo1" != "$repo2" ] && pass "a new commit: a new repository layer" || fail "a new commit: a new repository layer" "$repo1 vs $repo2"
expect_output "the new snapshot has the new commit built" "^hello, world!!$" sb --snapshot "$id2" -- ./hello
expect_output "the new snapshot is at the new commit" "^$head2$" sb --snapshot "$id2" -- git -c safe.directory='*' rev-parse HEAD
expect_output "the old snapshot is unchanged" "^hello, world!$" sb --snapshot "$id" -- ./hello

# a changed lockfile (here: configure) rebuilds the dependencies layer
echo "# changed" >>"$R/configure"
commit "$R" "configure changed"
id3="$(snap build --quiet "$R" 2>&1 | tail -1)"
deps3="$(snap show "$id3" | awk '$1=="layer" && $3=="deps" {print $2}')"
[ -n "$deps3" ] && [ "$deps3" != "$deps1" ] && pass "a changed lockfile rebuilds the dependencies layer" || fail "a changed lockfile rebuilds the dependencies layer" "$deps3"

# --ref builds an older commit
id_old="$(snap build --quiet --ref "$head1" "$R" 2>&1 | tail -1)"
expect_output "--ref builds the named commit" "^commit +$head1" snap show "$id_old"

# failures publish nothing and leave nothing
B="$TEST_TMP/broken"
mkdir -p "$B"
printf '{ "onCreateCommand": { "deps": "echo installing; echo boom >&2; exit 3" } }\n' >"$B/warren.json"
git -C "$B" init -q -b main && git -C "$B" -c user.email=t@w -c user.name=t add -A && git -C "$B" -c user.email=t@w -c user.name=t commit -q -m x
before="$(snap list | wc -l)"
out="$(snap build --quiet "$B" 2>&1)"
rc=$?
[ $rc != 0 ] && pass "a failing hook fails the build" || fail "a failing hook fails the build" "rc=$rc"
echo "$out" | grep -q "onCreateCommand.deps failed with status 3" && pass "the error names the hook and its status" || fail "the error names the hook and its status" "$out"
echo "$out" | grep -q "boom" && pass "the error shows the tail of the hook's output" || fail "the error shows the tail of the hook's output" "$out"
[ "$(snap list | wc -l)" = "$before" ] && pass "a failed build publishes nothing" || fail "a failed build publishes nothing" "$(snap list)"
[ -z "$(ls -A "$WARREN_HOME/tmp" 2>/dev/null)" ] && pass "a failed build leaves no staging directory" || fail "a failed build leaves no staging directory" "$(ls "$WARREN_HOME/tmp")"

printf '{ "customizations": { "warren": { "services": [ { "name": "db", "start": 5 } ] } } }\n' >"$B/warren.json"
git -C "$B" -c user.email=t@w -c user.name=t commit -q -am "bad spec"
out="$(snap build --quiet "$B" 2>&1)"
rc=$?
[ $rc = 2 ] && pass "a wrong type in the spec is a usage error (exit 2)" || fail "a wrong type in the spec is a usage error (exit 2)" "rc=$rc $out"
echo "$out" | grep -q "customizations.warren.services\[0\].start" && pass "the spec error names the key path" || fail "the spec error names the key path" "$out"
expect_status "build of a missing repository" 2 snap build --quiet "$TEST_TMP/no-such-repo"
expect_status "show of an unknown id" 2 snap show 0123456789abcdef
expect_status "--snapshot with an unknown id" 2 sb --snapshot 0123456789abcdef -- true

# a repository without any spec still builds (defaults, no hooks)
P="$TEST_TMP/plain"
mkdir -p "$P" && echo "plain" >"$P/README"
git -C "$P" init -q -b main && git -C "$P" -c user.email=t@w -c user.name=t add -A && git -C "$P" -c user.email=t@w -c user.name=t commit -q -m x
idp="$(snap build --quiet "$P" 2>&1 | tail -1)"
expect_output "a repository with no spec builds" "^plain$" sb --snapshot "$idp" -- cat README

# session start: drift sync to a newer commit, hooks, outcome recorded
echo "/* drift */" >>"$R/src/main.c"
commit "$R" "one commit of drift"
head4="$(git -C "$R" rev-parse HEAD)"
json="$(sb --json --snapshot "$id3" --ref main -- git -c safe.directory='*' rev-parse HEAD | tail -1)"
out="$(sb --snapshot "$id3" --ref main -- git -c safe.directory='*' rev-parse HEAD 2>&1 | head -1)"
[ "$out" = "$head4" ] && pass "--ref brings the workspace to the newer commit" || fail "--ref brings the workspace to the newer commit" "$out"
case "$json" in *'"commits_behind":1'*'"synced":true'*) pass "the session records commits behind and the sync" ;; *) fail "the session records commits behind and the sync" "$json" ;; esac
case "$json" in *'"hooks_rerun":false'*) pass "unchanged lockfiles: updateContentCommand does not re-run" ;; *) fail "unchanged lockfiles: updateContentCommand does not re-run" "$json" ;; esac
expect_output "the synced workspace builds and passes its checks" "ok   named" sb --snapshot "$id3" --ref main -- sh -c 'make -s hello && make test'
echo "# changed again" >>"$R/configure"
commit "$R" "lockfile drift"
json="$(sb --json --snapshot "$id3" --ref main -- true | tail -1)"
case "$json" in *'"hooks_rerun":true'*) pass "changed lockfiles: updateContentCommand re-runs in the session" ;; *) fail "changed lockfiles: updateContentCommand re-runs in the session" "$json" ;; esac
expect_status "--ref to an unknown ref is a usage error" 2 sb --snapshot "$id3" --ref no-such-branch -- true
expect_status "--ref without --snapshot is a usage error" 2 sb --ref main -- true
[ -z "$(warren_records | grep '/snap-')" ] && pass "a session run leaves no sandbox behind" || fail "a session run leaves no sandbox behind" "$(warren_records)"

# refresh: builds only when the ref moved; a policy builds only when stale
F="$TEST_TMP/fresh"
git_repo "$FIX/c-hello" "$F"
expect_output "refresh of a repository without snapshots builds one" "^built .*newest was none" snap refresh --quiet "$F"
expect_output "refresh with nothing new keeps the newest" "^kept .*newest was fresh" snap refresh --quiet "$F"
echo "/* one */" >>"$F/src/main.c"
commit "$F" "one"
expect_output "within the policy (--max-behind 2): kept, sessions sync" "^kept .*behind, 1 commit behind" snap refresh --quiet --max-behind 2 "$F"
echo "/* two */" >>"$F/src/main.c"
commit "$F" "two"
echo "/* three */" >>"$F/src/main.c"
commit "$F" "three"
out="$(snap refresh --quiet --json --max-behind 2 "$F")"
case "$out" in *'"before": "stale"'*'"built": true'*) pass "beyond the policy: stale, rebuilt" ;; *) fail "beyond the policy: stale, rebuilt" "$out" ;; esac
expect_output "after the refresh the newest is fresh" "^kept .*newest was fresh" snap refresh --quiet "$F"
expect_status "refresh --max-age with a bad duration" 2 snap refresh --quiet --max-age soon "$F"

# verify detects tampering; rm + gc remove what nothing uses
repo_layer="$WARREN_HOME/layers/$repo2"
echo tampered >>"$repo_layer/workspace/README" 2>/dev/null || echo tampered >"$repo_layer/workspace/tampered"
expect_status "verify fails on a modified layer" 1 snap verify "$id2"
expect_output "verify names the modified layer" "MODIFIED layer $repo2" snap verify "$id2"
layers_before="$(ls "$WARREN_HOME/layers" | wc -l)"
snap rm "$id2" >/dev/null
expect_output "gc removes layers no snapshot uses" "removed [1-9][0-9]* layer" snap gc
[ ! -e "$repo_layer" ] && pass "the removed snapshot's own layer is gone" || fail "the removed snapshot's own layer is gone" "$repo_layer"
[ -e "$WARREN_HOME/layers/$deps1" ] && pass "a layer another snapshot uses is kept" || fail "a layer another snapshot uses is kept" "$deps1 removed"

# PostgreSQL: a service whose data directory is initialised at build time
if ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
	G="$TEST_TMP/pg-app"
	git_repo "$FIX/pg-app" "$G"
	out="$(snap build --quiet "$G" 2>&1)"
	idg="$(echo "$out" | tail -1)"
	[ ${#idg} = 64 ] && pass "build a project with a PostgreSQL service" || fail "build a project with a PostgreSQL service" "$out"
	expect_output "the service's data directory is in the snapshot" "^PG_VERSION$" sb --snapshot "$idg" -- sh -c "cd /var/lib/pg/data && ls PG_VERSION"
	"$WARREN" sandbox create --name "pg-a-$$" --snapshot "$idg" --timeout 120s >/dev/null
	"$WARREN" sandbox create --name "pg-b-$$" --snapshot "$idg" --timeout 120s >/dev/null
	expect_output "a session starts the service, ready, with the snapshot's data" "^1$" "$WARREN" sandbox exec "pg-a-$$" -- sh /workspace/pg.sh query "select count(*) from notes"
	"$WARREN" sandbox exec "pg-a-$$" -- sh /workspace/pg.sh query "insert into notes (body) values ('a'), ('b')" >/dev/null
	expect_output "a write in one session's database..." "^3$" "$WARREN" sandbox exec "pg-a-$$" -- sh /workspace/pg.sh query "select count(*) from notes"
	expect_output "...is invisible to another session's" "^1$" "$WARREN" sandbox exec "pg-b-$$" -- sh /workspace/pg.sh query "select count(*) from notes"
	"$WARREN" sandbox rm "pg-a-$$" "pg-b-$$"
	expect_no_output "rm stops the services" "postgres -D /var/lib/pg" pgrep -af "postgres -D /var/lib/pg"

	# ten sessions in parallel from one snapshot, each with its own database
	for i in $(seq 10); do
		"$WARREN" sandbox create --name "pg10-$$-$i" --snapshot "$idg" --timeout 120s >/dev/null 2>"$TEST_TMP/pg10-$i.err" &
	done
	wait
	up=0
	for i in $(seq 10); do
		"$WARREN" sandbox exec "pg10-$$-$i" -- sh /workspace/pg.sh query "insert into notes (body) values ('s$i')" >/dev/null 2>&1
		[ "$("$WARREN" sandbox exec "pg10-$$-$i" -- sh /workspace/pg.sh query "select count(*) from notes" 2>/dev/null)" = 2 ] && up=$((up + 1))
	done
	[ "$up" = 10 ] && pass "ten parallel sessions: each database answers, each sees only its own write" || fail "ten parallel sessions: each database answers, each sees only its own write" "$up of 10; $(cat "$TEST_TMP"/pg10-*.err | head -3)"
	for i in $(seq 10); do "$WARREN" sandbox rm "pg10-$$-$i" >/dev/null 2>&1; done
	expect_no_output "and all of them are gone after rm" "postgres -D /var/lib/pg" pgrep -af "postgres -D /var/lib/pg"
else
	fail "PostgreSQL fixture" "postgresql is not installed (apt-get install postgresql)"
fi
