#!/bin/bash
# warren snapshot gc --blobs FILE (src/registry/gc.c) against Debian's
# docker-registry (tests/registry_server.sh): two snapshots sharing their
# dependencies layer are pushed; the data directory removes one (`snapshot
# rm`); --dry-run lists its manifest, its config and its repository
# layer's blob and deletes nothing; gc then deletes exactly those (the
# registry answers 404 for them), keeps the referenced snapshot with all
# its blobs, the shared layer included (a pull into an empty data
# directory still works and runs), keeps a tag that is not a snapshot id
# and what --keep names, and removes the unreferenced layer and its blob
# record from the local layer cache. A wrong password, a registry with
# deletes off, a manifest that is not one (a stand-in registry) and a
# repository nothing was pushed to give clear answers.
. "$(dirname "$0")/../lib.sh"
. "$ROOT_DIR/tests/registry_server.sh"

if [ -z "$REGISTRY_BIN" ] || ! command -v htpasswd >/dev/null; then
	echo "SKIP registry_gc: docker-registry or htpasswd is not installed (apt-get install docker-registry apache2-utils)" >&2
	exit 0
fi
STANDIN_PID=""
trap 'registry_stop_all; [ -n "$STANDIN_PID" ] && kill "$STANDIN_PID" 2>/dev/null; rm -rf "$TEST_TMP"' EXIT

A="$TEST_TMP/a"
B="$TEST_TMP/b"
snapA() { "$WARREN" snapshot "$@" --data "$A"; }
jq_() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }

if ! start_registry_htpasswd reg warren 'gc-pw'; then
	fail "docker-registry starts with htpasswd" "$(tail -5 "$TEST_TMP/reg.log")"
	exit 0
fi
printf 'gc-pw\n' >"$TEST_TMP/pw"
chmod 600 "$TEST_TMP/pw"
write_config "$TEST_TMP/blobs.json" "$REG_reg" warren/gc "$TEST_TMP/pw"
BL="$TEST_TMP/blobs.json"
# the registry's answer to HEAD (a blob) or GET (a manifest)
status_blob() { curl -s -o /dev/null -w '%{http_code}' -I -u warren:gc-pw "$REG_reg/v2/warren/gc/blobs/$1"; }
status_manifest() {
	curl -s -o /dev/null -w '%{http_code}' -u warren:gc-pw \
		-H 'Accept: application/vnd.oci.image.manifest.v1+json' "$REG_reg/v2/warren/gc/manifests/$1"
}
manifest() {
	curl -s -u warren:gc-pw -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
		"$REG_reg/v2/warren/gc/manifests/$1"
}

# gc of a repository nothing was pushed to: nothing to do
out="$(snapA gc --blobs "$BL" 2>&1)"
rc=$?
[ $rc = 0 ] && echo "$out" | grep -q '^registry: deleted 0 manifests and 0 blobs' &&
	pass "gc of an empty repository deletes nothing" || fail "gc of an empty repository deletes nothing" "rc=$rc $out"

R="$TEST_TMP/repo"
mkdir -p "$R"
printf 'set -e\nmkdir -p deps && echo shared >deps/x\n' >"$R/deps.sh"
printf 'set -e\ncat VERSION >built\n' >"$R/build.sh"
printf '{ "onCreateCommand": "sh deps.sh", "updateContentCommand": "sh build.sh" }\n' >"$R/warren.json"
echo 1 >"$R/VERSION"
git -C "$R" init -q -b main
git -C "$R" -c user.email=t@w -c user.name=t add -A
git -C "$R" -c user.email=t@w -c user.name=t commit -q -m one
S1="$(snapA build --quiet "$R" 2>&1 | tail -1)"
echo 2 >"$R/VERSION"
git -C "$R" -c user.email=t@w -c user.name=t commit -q -am two
S2="$(snapA build --quiet "$R" 2>&1 | tail -1)"
if [ ${#S1} != 64 ] || [ ${#S2} != 64 ]; then
	fail "build two snapshots" "$S1 / $S2"
	exit 0
fi
for s in "$S1" "$S2"; do
	snapA push "$s" --blobs "$BL" >/dev/null 2>&1 || fail "push $s" "$(snapA push "$s" --blobs "$BL" 2>&1)"
done
# the blobs of each: config, deps, repo
blobs_of() { manifest "$1" | python3 -c 'import json,sys; m=json.load(sys.stdin); print(m["config"]["digest"], *[l["digest"] for l in m["layers"]])'; }
read -r cfg1 deps1 repo1 <<<"$(blobs_of "$S1")"
read -r cfg2 deps2 repo2 <<<"$(blobs_of "$S2")"
[ -n "$deps1" ] && [ "$deps1" = "$deps2" ] && [ "$repo1" != "$repo2" ] &&
	pass "the two snapshots share their deps layer's blob" || fail "the two snapshots share their deps layer's blob" "$deps1 $deps2 $repo1 $repo2"
m1="$(curl -s -o /dev/null -w '%header{docker-content-digest}' -u warren:gc-pw \
	-H 'Accept: application/vnd.oci.image.manifest.v1+json' "$REG_reg/v2/warren/gc/manifests/$S1")"
# a tag that is not a snapshot id: another tool's (a manifest of its own
# over S2's blobs), kept
curl -s -o /dev/null -u warren:gc-pw -X PUT -H 'Content-Type: application/vnd.oci.image.manifest.v1+json' \
	--data-binary "$(manifest "$S2" | python3 -c 'import json,sys; m=json.load(sys.stdin); m["annotations"]={"tool": "other"}; print(json.dumps(m))')" \
	"$REG_reg/v2/warren/gc/manifests/other-tool"
layer1="$("$WARREN" snapshot show "$S1" --data "$A" | awk '$1=="layer" && $3=="repo" {print $2}')"

# S1 is no longer referenced here
snapA rm "$S1" >/dev/null
out="$(snapA gc --blobs "$BL" --dry-run --json 2>&1)"
rc=$?
got="$(echo "$out" | jq_ '(sorted(m["snapshot"] for m in d["registry"]["manifests"]), sorted(b["digest"] for b in d["registry"]["blobs"]), d["registry"]["kept"], d["local"]["removed_layers"], d["dry_run"])' 2>&1)"
want="(['$S1'], $(python3 -c 'import sys; print(sorted(sys.argv[1:]))' "$cfg1" "$repo1"), 1, 1, True)"
[ $rc = 0 ] && [ "$got" = "$want" ] && pass "--dry-run lists the unreferenced manifest, its config and unshared layer, and the local layer" ||
	fail "--dry-run lists the unreferenced manifest, its config and unshared layer, and the local layer" "rc=$rc got $got want $want; $out"
[ "$(status_manifest "$S1")" = 200 ] && [ "$(status_blob "$repo1")" = 200 ] && [ -d "$A/layers/$layer1" ] &&
	pass "--dry-run deletes nothing" || fail "--dry-run deletes nothing" "$(status_manifest "$S1") $(status_blob "$repo1")"
out="$(snapA gc --blobs "$BL" --dry-run 2>&1)"
echo "$out" | grep -q "^would delete manifest $m1 ($S1)" && echo "$out" | grep -q "^would delete blob $repo1 ($layer1)" &&
	pass "--dry-run says what would go" || fail "--dry-run says what would go" "$out"

# --keep: what another host references stays
out="$(snapA gc --blobs "$BL" --keep "$S1" --dry-run --json 2>&1)"
[ "$(echo "$out" | jq_ 'len(d["registry"]["manifests"])' 2>&1)" = 0 ] && [ "$(status_manifest "$S1")" = 200 ] &&
	pass "--keep ID keeps a snapshot the data directory lacks" || fail "--keep ID keeps a snapshot the data directory lacks" "$out"
expect_status "--keep of a prefix is a usage error" 2 snapA gc --blobs "$BL" --keep "${S1:0:12}"

# a wrong password: the registry's 401, nothing deleted
printf 'wrong\n' >"$TEST_TMP/badpw" && chmod 600 "$TEST_TMP/badpw"
write_config "$TEST_TMP/bad.json" "$REG_reg" warren/gc "$TEST_TMP/badpw"
out="$(snapA gc --blobs "$TEST_TMP/bad.json" 2>&1)"
rc=$?
[ $rc != 0 ] && echo "$out" | grep -q "nothing deleted.*401" && [ "$(status_manifest "$S1")" = 200 ] &&
	pass "a wrong password: the registry's 401, nothing deleted" || fail "a wrong password: the registry's 401, nothing deleted" "rc=$rc $out"

out="$(snapA gc --blobs "$BL" 2>&1)"
rc=$?
[ $rc = 0 ] && echo "$out" | grep -q "^registry: deleted 1 manifest and 2 blobs" && echo "$out" | grep -q "^local: removed 1 layer" &&
	pass "gc deletes one manifest, two blobs, one local layer" || fail "gc deletes one manifest, two blobs, one local layer" "rc=$rc $out"
echo "INFO registry_gc: $(echo "$out" | grep '^registry:')" >&2
[ "$(status_manifest "$S1")" = 404 ] && pass "the unreferenced snapshot's manifest is gone" ||
	fail "the unreferenced snapshot's manifest is gone" "$(status_manifest "$S1")"
[ "$(status_blob "$repo1")" = 404 ] && [ "$(status_blob "$cfg1")" = 404 ] &&
	pass "...and its unshared layer and config blobs" || fail "...and its unshared layer and config blobs" "$(status_blob "$repo1") $(status_blob "$cfg1")"
[ "$(status_manifest "$S2")" = 200 ] && [ "$(status_blob "$deps1")" = 200 ] && [ "$(status_blob "$repo2")" = 200 ] &&
	[ "$(status_blob "$cfg2")" = 200 ] && pass "the referenced snapshot keeps its manifest and every blob, the shared one included" ||
	fail "the referenced snapshot keeps its manifest and every blob, the shared one included" "$(status_manifest "$S2") $(status_blob "$deps1") $(status_blob "$repo2") $(status_blob "$cfg2")"
[ "$(status_manifest other-tool)" = 200 ] && pass "a tag that is not a snapshot id is kept" ||
	fail "a tag that is not a snapshot id is kept" "$(status_manifest other-tool)"
[ ! -e "$A/layers/$layer1" ] && [ ! -e "$A/blobs/$layer1" ] && pass "the local layer and its blob record are gone" ||
	fail "the local layer and its blob record are gone" "$(ls "$A/layers" "$A/blobs")"
out="$("$WARREN" snapshot pull "$S2" --data "$B" --blobs "$BL" --json 2>&1)"
[ "$(echo "$out" | jq_ 'd["layers_fetched"]' 2>&1)" = 2 ] && pass "the kept snapshot pulls into an empty data directory" ||
	fail "the kept snapshot pulls into an empty data directory" "$out"
expect_output "...and runs" "^2$" sb --snapshot "$S2" --data "$B" -- cat /workspace/built
out="$(snapA gc --blobs "$BL" 2>&1)"
echo "$out" | grep -q "^registry: deleted 0 manifests and 0 blobs" && pass "a second gc deletes nothing" ||
	fail "a second gc deletes nothing" "$out"
expect_output "gc without --blobs is the local gc" "^removed 0 layers" snapA gc

# a registry with deletes off: its 405, said
registry_stop_all
if REGISTRY_DELETE=false start_registry_htpasswd nodel warren 'gc-pw'; then
	write_config "$TEST_TMP/nodel.json" "$REG_nodel" warren/gc "$TEST_TMP/pw"
	snapA push "$S2" --blobs "$TEST_TMP/nodel.json" >/dev/null 2>&1
	echo 3 >"$R/VERSION"
	git -C "$R" -c user.email=t@w -c user.name=t commit -q -am three
	S3="$(snapA build --quiet "$R" 2>&1 | tail -1)"
	snapA push "$S3" --blobs "$TEST_TMP/nodel.json" >/dev/null 2>&1
	snapA rm "$S3" >/dev/null
	out="$(snapA gc --blobs "$TEST_TMP/nodel.json" 2>&1)"
	rc=$?
	[ $rc != 0 ] && echo "$out" | grep -q "delete manifest sha256:.*HTTP 405" &&
		pass "a registry with deletes off: its 405, said" || fail "a registry with deletes off: its 405, said" "rc=$rc $out"
else
	fail "docker-registry starts with deletes off" "$(tail -5 "$TEST_TMP/nodel.log")"
fi
registry_stop_all

# a manifest the registry serves that is not one (a stand-in registry,
# tests/tools/registry_standin.py, takes any bytes): gc stops, naming the
# tag, nothing deleted
python3 "$ROOT_DIR/tests/tools/registry_standin.py" --user tok-user --password tok-pw \
	--log "$TEST_TMP/standin.log" >"$TEST_TMP/standin.port" 2>"$TEST_TMP/standin.err" &
STANDIN_PID=$!
for _ in $(seq 1 100); do [ -s "$TEST_TMP/standin.port" ] && break; sleep 0.1; done
SREG="http://127.0.0.1:$(head -1 "$TEST_TMP/standin.port")"
printf 'tok-pw\n' >"$TEST_TMP/tokpw" && chmod 600 "$TEST_TMP/tokpw"
write_config "$TEST_TMP/standin.json" "$SREG" warren/gc "$TEST_TMP/tokpw" tok-user
tok="$(curl -s -u tok-user:tok-pw "$SREG/token?service=standin&scope=repository:warren/gc:push" | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')"
BAD="$(printf '%064d' 7)"
curl -s -o /dev/null -X PUT -H "Authorization: Bearer $tok" -H 'Content-Type: application/vnd.oci.image.manifest.v1+json' \
	--data-binary '{"schemaVersion": 2, "layers": "not a list"}' "$SREG/v2/warren/gc/manifests/$BAD"
out="$(snapA gc --blobs "$TEST_TMP/standin.json" 2>&1)"
rc=$?
[ $rc != 0 ] && echo "$out" | grep -q "registry gc (nothing deleted): tag $BAD: its manifest" &&
	! grep -q '"DELETE' "$TEST_TMP/standin.log" &&
	pass "a manifest that is not one stops gc, naming the tag, nothing deleted" ||
	fail "a manifest that is not one stops gc, naming the tag, nothing deleted" "rc=$rc $out"
kill "$STANDIN_PID" 2>/dev/null
wait "$STANDIN_PID" 2>/dev/null
left="$(pgrep -af "$TEST_TMP" || true)"
[ -z "$left" ] && pass "nothing left running" || fail "nothing left running" "$left"
