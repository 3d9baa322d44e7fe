#!/bin/bash
# Snapshots through an OCI registry (warren snapshot push|pull,
# src/registry/) against Debian's real docker-registry on loopback with
# htpasswd auth (tests/registry_server.sh): a snapshot built in data
# directory A from a repository whose hooks leave what the layer format
# must carry (a file deleted in the upper layer - a whiteout -, an opaque
# directory, a symlink, setuid and sticky modes, a file owned by a non-root
# uid, a hard link, an extended attribute) is pushed and pulled into an
# empty data directory B, where `sandbox run --snapshot` shows the same
# tree; a second push uploads no blob (the registry's access log); a
# second pull fetches nothing, a pull whose layers are cached only the
# config; a snapshot sharing a layer fetches only its own; a corrupted
# blob in the registry's storage fails the pull clearly and leaves no layer
# or snapshot, and so does a pull killed while it stages a layer (its
# stage swept at the next open); the cache's cap evicts unused layers least recently used
# first and never one a snapshot uses. The measured push and pull times
# and sizes are printed as INFO lines on stderr.
. "$(dirname "$0")/../lib.sh"
. "$ROOT_DIR/tests/registry_server.sh"

if [ -z "$REGISTRY_BIN" ] || ! command -v htpasswd >/dev/null; then
	echo "SKIP snapshot_registry: docker-registry or htpasswd is not installed (apt-get install docker-registry apache2-utils)" >&2
	exit 0
fi
trap 'registry_stop_all; rm -rf "$TEST_TMP"' EXIT

A="$TEST_TMP/a"
B="$TEST_TMP/b"
C="$TEST_TMP/c"
snapA() { "$WARREN" snapshot "$@" --data "$A"; }
snapB() { "$WARREN" snapshot "$@" --data "$B"; }
jget() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(d[sys.argv[1]])' "$1"; }

if ! REGISTRY_LOG_LEVEL=info start_registry_htpasswd reg warren 'pull-pw'; then
	fail "docker-registry starts with htpasswd" "$(tail -5 "$TEST_TMP/reg.log")"
	exit 0
fi
printf 'pull-pw\n' >"$TEST_TMP/pw"
chmod 600 "$TEST_TMP/pw"
write_config "$TEST_TMP/blobs.json" "$REG_reg" warren/snapshots "$TEST_TMP/pw"
BL="$TEST_TMP/blobs.json"
# requests the registry answered: "METHOD /v2/..." lines of its access log
requests() { grep -c "\"$1 /v2/warren/snapshots/$2" "$TEST_TMP/reg.log"; }

# ---- a snapshot whose layers exercise the format --------------------------------
R="$TEST_TMP/repo"
mkdir -p "$R"
# deps layer (onCreateCommand): what the repo layer then deletes, replaces
# and links to
cat >"$R/deps.sh" <<'EOF'
set -e
mkdir -p fmt/opq fmt/keep
echo old >fmt/opq/old
echo old2 >fmt/opq/old2
echo gone >fmt/gone
echo kept >fmt/keep/x
EOF
# repo layer (updateContentCommand)
cat >"$R/build.sh" <<'EOF'
set -e
rm fmt/gone
rm -rf fmt/opq && mkdir fmt/opq && echo new >fmt/opq/new
ln -s ../keep/x fmt/link
echo s >fmt/suid && chmod 4755 fmt/suid
mkdir fmt/sticky && chmod 1733 fmt/sticky
echo o >fmt/owned && chown 1234:2345 fmt/owned && chmod 640 fmt/owned
ln fmt/owned fmt/hard
echo x >fmt/xattr
python3 -c 'import os; os.setxattr("fmt/xattr", "user.warren", b"layer-xattr")'
cat VERSION >fmt/version
# a layer big enough that a pull can be interrupted while it extracts
if [ -f BIG ]; then head -c 128M /dev/zero >fmt/big; fi
EOF
printf '{ "onCreateCommand": "sh deps.sh", "updateContentCommand": "sh build.sh" }\n' >"$R/warren.json"
echo 1 >"$R/VERSION"
git -C "$R" init -q -b main
git -C "$R" -c user.email=t@w -c user.name=t add -A
git -C "$R" -c user.email=t@w -c user.name=t commit -q -m one
bump() { # a new commit: a new repo layer over the same deps layer
	echo "$1" >"$R/VERSION"
	git -C "$R" -c user.email=t@w -c user.name=t commit -q -am "v$1"
}

out="$(snapA build --quiet "$R" 2>&1)"
S1="$(echo "$out" | tail -1)"
if [ ${#S1} != 64 ]; then
	fail "build the snapshot in A" "$out"
	exit 0
fi
pass "build the snapshot in A"
layers_of() { "$WARREN" snapshot show "$2" --data "$1" | awk '$1=="layer" {print $2}'; }
layer_role() { "$WARREN" snapshot show "$2" --data "$1" | awk -v r="$3" '$1=="layer" && $3==r {print $2}'; }
bytes_of() { "$WARREN" snapshot show "$2" --data "$1" | awk -v l="$3" '$1=="layer" && $2==l {print $4}'; }

# the tree as a sandbox sees it: type, mode, owner, link target, content
# hash, xattrs - sorted
LIST='cd /workspace/fmt && find . -printf "%p %y %m %U:%G %l\n" | sort &&
	find . -type f | sort | xargs sha256sum &&
	python3 -c "import os; print(sorted((p, os.getxattr(p, \"user.warren\")) for p in [\"xattr\"]))" &&
	stat -c "%h %i" owned hard | sort -u | wc -l'
listA="$(sb --snapshot "$S1" --data "$A" -- sh -c "$LIST" 2>&1)"
echo "$listA" | grep -q '^./gone' && fail "A: the deleted file is gone" "$listA" || pass "A: the deleted file is gone"
echo "$listA" | grep -q "layer-xattr" && pass "A: the xattr is set" || fail "A: the xattr is set" "$listA"
# the layers on disk hold what overlayfs wrote
repoA="$(layer_role "$A" "$S1" repo)"
[ -n "$(find "$A/layers/$repoA" -type c 2>/dev/null)" ] && pass "A: the repo layer holds a whiteout" ||
	fail "A: the repo layer holds a whiteout" "$(find "$A/layers/$repoA" | head)"
opaque() { python3 -c 'import os,sys
p=sys.argv[1]; print([n for n in os.listxattr(p) if n.endswith("overlay.opaque")])' "$1" 2>&1; }
echo "$(opaque "$A/layers/$repoA/workspace/fmt/opq")" | grep -q opaque &&
	pass "A: the replaced directory is opaque" || fail "A: the replaced directory is opaque" "$(opaque "$A/layers/$repoA/workspace/fmt/opq")"

# ---- push ---------------------------------------------------------------------
out="$(snapA push "$S1" --blobs "$BL" --json 2>&1)"
rc=$?
digest="$(echo "$out" | jget manifest_digest 2>/dev/null)"
[ $rc = 0 ] && [ "${digest#sha256:}" != "$digest" ] && pass "push: the manifest's digest" ||
	fail "push: the manifest's digest" "rc=$rc $out"
[ "$(echo "$out" | jget layers_uploaded 2>/dev/null)" = 2 ] && pass "push uploads both layers" ||
	fail "push uploads both layers" "$out"
echo "INFO snapshot_registry: push of the test snapshot: $(echo "$out" | jget ms 2>/dev/null) ms, layers $(echo "$out" | jget bytes_layers 2>/dev/null) bytes compressed (uncompressed: $(($(bytes_of "$A" "$S1" "$(layer_role "$A" "$S1" deps)") + $(bytes_of "$A" "$S1" "$repoA"))) bytes)" >&2
got="$(curl -s -u warren:pull-pw "$REG_reg/v2/warren/snapshots/manifests/$S1" \
	-H 'Accept: application/vnd.oci.image.manifest.v1+json')"
echo "$got" | python3 -c '
import json, sys
m = json.load(sys.stdin)
a = m["annotations"]
assert a["org.warren.snapshot.id"] == sys.argv[1], a
assert a["org.warren.snapshot.repository"] and a["org.warren.snapshot.commit"], a
assert [l["annotations"]["org.warren.layer.role"] for l in m["layers"]] == ["deps", "repo"], m
assert all(l["mediaType"] == "application/vnd.warren.layer.v1.tar+zstd" for l in m["layers"])
' "$S1" 2>/dev/null && pass "the manifest is tagged with the snapshot id, annotated, layers in order" ||
	fail "the manifest is tagged with the snapshot id, annotated, layers in order" "$got"
text="$(snapA push "$S1" --blobs "$BL" 2>&1)"
echo "$text" | head -1 | grep -qx "$digest" && pass "push prints the manifest's digest" || fail "push prints the manifest's digest" "$text"
posts=$(requests POST blobs/uploads)
heads=$(requests HEAD blobs/)
[ "$posts" -ge 3 ] && pass "the registry's log counts the uploads (layers and config)" ||
	fail "the registry's log counts the uploads (layers and config)" "$posts POSTs: $(tail -3 "$TEST_TMP/reg.log")"
out="$(snapA push "$S1" --blobs "$BL" --json 2>&1)"
[ "$(requests POST blobs/uploads)" = "$posts" ] && [ "$(echo "$out" | jget layers_uploaded)" = 0 ] &&
	[ "$(echo "$out" | jget layers_archived)" = 0 ] &&
	[ "$(requests HEAD blobs/)" -ge $((heads + 3)) ] &&
	pass "a second push uploads nothing and archives nothing (blob exists)" ||
	fail "a second push uploads nothing and archives nothing (blob exists)" "posts $posts -> $(requests POST blobs/uploads), heads $heads -> $(requests HEAD blobs/); $out"
[ "$(echo "$out" | jget manifest_digest)" = "$digest" ] && pass "the same layers give the same manifest" ||
	fail "the same layers give the same manifest" "$out"
# without the blob records the layers are archived again: the same bytes,
# so the registry has them (HEAD) and nothing is uploaded
rm -rf "$A/blobs"
out="$(snapA push "$S1" --blobs "$BL" --json 2>&1)"
[ "$(echo "$out" | jget layers_archived)" = 2 ] && [ "$(echo "$out" | jget layers_uploaded)" = 0 ] &&
	[ "$(echo "$out" | jget manifest_digest)" = "$digest" ] &&
	pass "a layer archived again gives the same blob (deterministic archives)" ||
	fail "a layer archived again gives the same blob (deterministic archives)" "$out"

# ---- pull into an empty data directory ----------------------------------------
out="$(snapB pull "$S1" --blobs "$BL" --json 2>&1)"
rc=$?
[ $rc = 0 ] && [ "$(echo "$out" | jget layers_fetched)" = 2 ] && pass "pull into an empty data directory fetches both layers" ||
	fail "pull into an empty data directory fetches both layers" "rc=$rc $out"
echo "INFO snapshot_registry: pull of the test snapshot: $(echo "$out" | jget ms 2>/dev/null) ms, $(echo "$out" | jget bytes_fetched 2>/dev/null) bytes fetched" >&2
expect_output "B lists the snapshot" "^${S1:0:12} " snapB list
[ "$(layers_of "$A" "$S1")" = "$(layers_of "$B" "$S1")" ] && pass "B has the very same layer ids" ||
	fail "B has the very same layer ids" "$(layers_of "$B" "$S1")"
expect_output "verify in B: layers match their hashes" "^ok: 2 layers" snapB verify "$S1"
listB="$(sb --snapshot "$S1" --data "$B" -- sh -c "$LIST" 2>&1)"
if [ -n "$listA" ] && [ "$listA" = "$listB" ]; then
	pass "sandbox run --snapshot in B shows the same tree (modes, owners, links, content, xattr)"
else
	fail "sandbox run --snapshot in B shows the same tree (modes, owners, links, content, xattr)" "$(diff <(echo "$listA") <(echo "$listB") | head -10 | tr '\n' ' ')"
fi
for want in '^\./suid f 4755 0:0 $' '^\./sticky d 1733 0:0 $' '^\./owned f 640 1234:2345 $' \
	'^\./link l 777 0:0 \.\./keep/x$' '^\./opq/new f ' '^1$'; do
	echo "$listB" | grep -q -- "$want" && pass "B: $want" || fail "B: $want" "$listB"
done
echo "$listB" | grep -qE '^\./(gone|opq/old)' && fail "B: the deleted file and the opaque directory's old entries are absent" "$listB" ||
	pass "B: the deleted file and the opaque directory's old entries are absent"
repoB="$(layer_role "$B" "$S1" repo)"
[ "$(find "$B/layers/$repoB" -type c -exec stat -c '%t:%T' {} + 2>/dev/null | sort -u)" = "0:0" ] &&
	pass "B: the whiteout is a 0:0 character device" || fail "B: the whiteout is a 0:0 character device" "$(find "$B/layers/$repoB" -type c -ls)"
echo "$(opaque "$B/layers/$repoB/workspace/fmt/opq")" | grep -q opaque &&
	pass "B: the opaque directory's overlay xattr" || fail "B: the opaque directory's overlay xattr" "$(opaque "$B/layers/$repoB/workspace/fmt/opq")"
[ -z "$(ls -A "$B/tmp" | grep -v '^lease\.' || true)" ] && pass "pull leaves no stage directory" || fail "pull leaves no stage directory" "$(ls -A "$B/tmp")"

# ---- pulls that need little or nothing ----------------------------------------
gets=$(requests GET blobs/)
out="$(snapB pull "$S1" --blobs "$BL" --json 2>&1)"
[ "$(echo "$out" | jget already)" = True ] && [ "$(requests GET blobs/)" = "$gets" ] &&
	pass "a second pull fetches nothing" || fail "a second pull fetches nothing" "gets $gets -> $(requests GET blobs/); $out"
snapB rm "$S1" >/dev/null
out="$(snapB pull "$S1" --blobs "$BL" --json 2>&1)"
[ "$(echo "$out" | jget layers_fetched)" = 0 ] && [ "$(requests GET blobs/)" = $((gets + 1)) ] &&
	pass "a pull whose layers are cached fetches the config only" ||
	fail "a pull whose layers are cached fetches the config only" "gets $gets -> $(requests GET blobs/); $out"

bump 2
S2="$(snapA build --quiet "$R" 2>&1 | tail -1)"
bump 3
S3="$(snapA build --quiet "$R" 2>&1 | tail -1)"
snapA push "$S2" --blobs "$BL" >/dev/null 2>&1
out="$(snapA push "$S3" --blobs "$BL" --json 2>&1)"
[ "$(echo "$out" | jget layers_uploaded)" = 1 ] && pass "a snapshot sharing the deps layer uploads only its repo layer" ||
	fail "a snapshot sharing the deps layer uploads only its repo layer" "$out"
snapB pull "$S2" --blobs "$BL" >/dev/null 2>&1
out="$(snapB pull "$S3" --blobs "$BL" --json 2>&1)"
[ "$(echo "$out" | jget layers_fetched)" = 1 ] && pass "a pull fetches only the layer it lacks" ||
	fail "a pull fetches only the layer it lacks" "$out"
expect_output "B's newest snapshot runs" "^3$" sb --snapshot "$S3" --data "$B" -- cat /workspace/fmt/version

# ---- a corrupted blob ---------------------------------------------------------
repo3="$(layer_role "$A" "$S3" repo)"
blob="$(curl -s -u warren:pull-pw "$REG_reg/v2/warren/snapshots/manifests/$S3" \
	-H 'Accept: application/vnd.oci.image.manifest.v1+json' |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["layers"][1]["digest"].split(":")[1])')"
data="$TEST_TMP/reg/docker/registry/v2/blobs/sha256/${blob:0:2}/$blob/data"
if [ -f "$data" ]; then
	cp "$data" "$TEST_TMP/blob.saved"
	head -c "$(stat -c %s "$data")" /dev/urandom >"$data"
	out="$("$WARREN" snapshot pull "$S3" --data "$C" --blobs "$BL" 2>&1)"
	rc=$?
	[ $rc != 0 ] && echo "$out" | grep -q "pull $S3: layer ${repo3:0:12}: .*sha256:$blob" &&
		pass "a corrupted blob fails the pull, naming the layer and the blob" ||
		fail "a corrupted blob fails the pull, naming the layer and the blob" "rc=$rc $out"
	left="$(ls -A "$C/layers" "$C/snapshots" 2>/dev/null | grep -E '^[0-9a-f]{64}' || true)"
	[ -z "$left" ] && pass "...and leaves no layer and no snapshot" || fail "...and leaves no layer and no snapshot" "$left"
	[ -z "$(ls -A "$C/tmp" | grep -v '^lease\.' || true)" ] && pass "...and no stage directory" || fail "...and no stage directory" "$(ls -A "$C/tmp")"
	cp "$TEST_TMP/blob.saved" "$data"
else
	fail "the layer's blob is in the registry's storage" "$data"
fi
out="$("$WARREN" snapshot pull "$(printf '%064d' 0)" --data "$C" --blobs "$BL" 2>&1)"
[ $? != 0 ] && echo "$out" | grep -q "MANIFEST_UNKNOWN" && pass "pull of an unknown snapshot: the registry's error" ||
	fail "pull of an unknown snapshot: the registry's error" "$out"
expect_status "pull of an id prefix is a usage error" 2 "$WARREN" snapshot pull "${S3:0:12}" --data "$C" --blobs "$BL"
printf 'wrong\n' >"$TEST_TMP/badpw" && chmod 600 "$TEST_TMP/badpw"
write_config "$TEST_TMP/bad.json" "$REG_reg" warren/snapshots "$TEST_TMP/badpw"
expect_output "a wrong password: the registry's 401" "401" "$WARREN" snapshot push "$S1" --data "$A" --blobs "$TEST_TMP/bad.json"

# ---- the cache's cap -----------------------------------------------------------
snapB rm "$S1" >/dev/null
snapB rm "$S2" >/dev/null
repo1="$(layer_role "$A" "$S1" repo)"
repo2="$(layer_role "$A" "$S2" repo)"
# S2's repo layer used longest ago, then S1's
touch -d '2001-01-01' "$B/blobs/$repo2"
touch -d '2002-01-01' "$B/blobs/$repo1"
total="$(snapB pull "$S3" --blobs "$BL" --cache-max 1T --json | jget cache_bytes)"
size2="$(bytes_of "$A" "$S2" "$repo2")"
out="$(snapB pull "$S3" --blobs "$BL" --cache-max $((total - size2)) --json 2>&1)"
if [ "$(echo "$out" | jget evicted_layers)" = 1 ] && [ ! -e "$B/layers/$repo2" ] && [ -d "$B/layers/$repo1" ]; then
	pass "the cap evicts the least recently used unused layer first"
else
	fail "the cap evicts the least recently used unused layer first" "total $total size $size2; $out; $(ls "$B/layers")"
fi
[ ! -e "$B/blobs/$repo2" ] && pass "...and its blob record" || fail "...and its blob record" "$(ls "$B/blobs")"
# the cap from the --blobs file's "cache_max" this time
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["cache_max"]=sys.argv[3]; json.dump(d, open(sys.argv[2], "w"))' \
	"$BL" "$TEST_TMP/capped.json" 1
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["cache_max"]="lots"; json.dump(d, open(sys.argv[2], "w"))' \
	"$BL" "$TEST_TMP/badcap.json"
expect_status "a cache_max that is not a size is a usage error" 2 snapB pull "$S3" --blobs "$TEST_TMP/badcap.json"
out="$(snapB pull "$S3" --blobs "$TEST_TMP/capped.json" --json 2>&1)"
kept=0
for l in $(layers_of "$B" "$S3"); do [ -d "$B/layers/$l" ] && kept=$((kept + 1)); done
if [ "$(echo "$out" | jget evicted_layers)" = 1 ] && [ ! -e "$B/layers/$repo1" ] && [ $kept = 2 ]; then
	pass "a cap below what snapshots use evicts every unused layer and no used one"
else
	fail "a cap below what snapshots use evicts every unused layer and no used one" "$out; kept $kept"
fi
expect_output "the snapshot still runs after the eviction" "^3$" sb --snapshot "$S3" --data "$B" -- cat /workspace/fmt/version
out="$(snapB pull "$S2" --blobs "$BL" --json 2>&1)"
[ "$(echo "$out" | jget layers_fetched)" = 1 ] && pass "an evicted layer is fetched again when needed" ||
	fail "an evicted layer is fetched again when needed" "$out"

# ---- an interrupted pull ---------------------------------------------------------
D="$TEST_TMP/d"
touch "$R/BIG"
git -C "$R" add BIG
bump 4
S4="$(snapA build --quiet "$R" 2>&1 | tail -1)"
snapA push "$S4" --blobs "$BL" >/dev/null 2>&1
"$WARREN" snapshot pull "$S4" --data "$D" --blobs "$BL" >/dev/null 2>&1 &
pid=$!
caught=""
for _ in $(seq 1 5000); do
	if ls "$D/tmp" 2>/dev/null | grep -q '^stage\.'; then
		caught=1
		break
	fi
	kill -0 "$pid" 2>/dev/null || break
done
# (in a group with stderr away: bash says "Killed" when it reaps it)
{ [ -n "$caught" ] && kill -9 "$pid" || caught=""; wait "$pid"; } 2>/dev/null
if [ -n "$caught" ]; then
	pass "a pull is killed while it stages a layer"
	left="$(ls -A "$D/layers" "$D/snapshots" 2>/dev/null | grep -E '^[0-9a-f]{64}' || true)"
	[ -z "$left" ] && pass "...and leaves no layer and no snapshot" || fail "...and leaves no layer and no snapshot" "$left"
	"$WARREN" snapshot list --data "$D" >/dev/null 2>&1
	[ -z "$(ls -A "$D/tmp" | grep '^stage\.' || true)" ] && pass "...its stage is swept at the next open" ||
		fail "...its stage is swept at the next open" "$(ls -A "$D/tmp")"
else
	fail "a pull is killed while it stages a layer" "it ended first"
fi
out="$("$WARREN" snapshot pull "$S4" --data "$D" --blobs "$BL" --json 2>&1)"
[ "$(echo "$out" | jget layers_fetched)" = 2 ] && pass "the pull again fetches both layers" || fail "the pull again fetches both layers" "$out"
expect_output "...and its snapshot runs" "^134217728 " sb --snapshot "$S4" --data "$D" -- wc -c /workspace/fmt/big
echo "INFO snapshot_registry: pull of a snapshot with a 128 MiB file (zeros): $(echo "$out" | jget ms 2>/dev/null) ms, $(echo "$out" | jget bytes_fetched 2>/dev/null) bytes fetched" >&2

registry_stop_all
left="$(pgrep -af "$TEST_TMP" || true)"
[ -z "$left" ] && pass "nothing left running" || fail "nothing left running" "$left"
