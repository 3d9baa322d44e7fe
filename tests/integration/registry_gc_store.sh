#!/bin/bash
# warren snapshot gc --blobs FILE --store URL (src/registry/gc.c,
# src/cli/registry/refs.c) against Debian's docker-registry: the store of a
# control plane (SQLite, made by a warren serve started and stopped, its
# rows then written with sqlite3 as workers would leave them) references
# snapshots and checkpoints the local data directory knows nothing of
# (and 1,100 sessions more, so that the store is read page by page).
# Three real snapshots are pushed: one the data directory keeps, one only
# the store has a row of, one neither has. Checkpoints are pushed as a
# worker pushes them (ckpt-<session>-e<epoch>: a config, the bundle, the
# artifacts as layers; an older one's artifact as a plain blob): a
# session in review with its recorded tag, an older epoch's tag and an
# orphan (a worker that lost the lease) beside it; a running session's
# tag of its current epoch, not recorded yet; a pushed session's recorded
# tag, and one of its last epoch it never recorded; a tag whose session the store does not have; a ckpt- tag of another
# shape. --dry-run lists exactly what goes and deletes nothing; gc then
# deletes exactly that (404 for each) and keeps the rest (200), the
# recorded checkpoints' bundles and artifacts included, a blob shared by a
# recorded artifact and a tag that goes among them. --config takes the
# store from a serve configuration; without --store the behavior is
# registry_gc.sh's (checkpoint tags are other tags). A store that cannot
# be read, or one that is empty, stops gc with nothing deleted.
. "$(dirname "$0")/../lib.sh"
. "$ROOT_DIR/tests/registry_server.sh"
. "$(dirname "$0")/control_lib.sh"

if [ -z "$REGISTRY_BIN" ] || ! command -v htpasswd >/dev/null || ! command -v sqlite3 >/dev/null; then
	echo "SKIP registry_gc_store: docker-registry, htpasswd or sqlite3 is not installed" >&2
	exit 0
fi
trap 'server_stop; registry_stop_all; rm -rf "$TEST_TMP"' EXIT

A="$TEST_TMP/a"
snapA() { "$WARREN" snapshot "$@" --data "$A"; }
jq_() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }

if ! start_registry_htpasswd reg warren 'st-pw'; then
	fail "docker-registry starts with htpasswd" "$(tail -5 "$TEST_TMP/reg.log")"
	exit 0
fi
printf 'st-pw\n' >"$TEST_TMP/pw"
chmod 600 "$TEST_TMP/pw"
write_config "$TEST_TMP/blobs.json" "$REG_reg" warren/st "$TEST_TMP/pw"
BL="$TEST_TMP/blobs.json"
V2="$REG_reg/v2/warren/st"
MT=application/vnd.oci.image.manifest.v1+json
status_blob() { curl -s -o /dev/null -w '%{http_code}' -I -u warren:st-pw "$V2/blobs/$1"; }
status_manifest() { curl -s -o /dev/null -w '%{http_code}' -u warren:st-pw -H "Accept: $MT" "$V2/manifests/$1"; }
manifest() { curl -s -u warren:st-pw -H "Accept: $MT" "$V2/manifests/$1"; }
# push_blob TEXT: pushes TEXT's bytes as a blob, prints its digest
push_blob() {
	local f="$TEST_TMP/blob.$$" d loc
	printf '%s' "$1" >"$f"
	d="sha256:$(sha256sum "$f" | cut -d' ' -f1)"
	loc="$(curl -s -D - -o /dev/null -u warren:st-pw -X POST "$V2/blobs/uploads/" | tr -d '\r' | awk 'tolower($1)=="location:" {print $2}')"
	case "$loc" in /*) loc="$REG_reg$loc" ;; esac
	case "$loc" in *\?*) loc="$loc&digest=$d" ;; *) loc="$loc?digest=$d" ;; esac
	curl -s -o /dev/null -u warren:st-pw -X PUT -H 'Content-Type: application/octet-stream' --data-binary "@$f" "$loc"
	rm -f "$f"
	echo "$d"
}
size_of() { printf '%s' "$1" | wc -c; }
# push_ckpt TAG BUNDLE-TEXT [NAME=ARTIFACT-TEXT]...: a checkpoint as
# sched/checkpoint.c pushes one; prints the bundle's digest, then each
# artifact's
push_ckpt() {
	local tag="$1" bundle="$2" cfg b layers a name text d
	shift 2
	cfg="$(push_blob "{\"session\":\"$tag\"}")"
	b="$(push_blob "$bundle")"
	layers="{\"mediaType\": \"application/vnd.warren.checkpoint.bundle.v1\", \"digest\": \"$b\", \"size\": $(size_of "$bundle")}"
	echo "$b"
	for a in "$@"; do
		name="${a%%=*}" text="${a#*=}"
		d="$(push_blob "$text")"
		layers="$layers, {\"mediaType\": \"application/vnd.warren.checkpoint.artifact.v1\", \"digest\": \"$d\", \"size\": $(size_of "$text"), \"annotations\": {\"org.warren.checkpoint.artifact\": \"$name\"}}"
		echo "$d"
	done
	curl -s -o /dev/null -u warren:st-pw -X PUT -H "Content-Type: $MT" --data-binary \
		"{\"schemaVersion\": 2, \"mediaType\": \"$MT\", \"config\": {\"mediaType\": \"application/vnd.warren.checkpoint.config.v1+json\", \"digest\": \"$cfg\", \"size\": $(size_of "{\"session\":\"$tag\"}")}, \"layers\": [$layers]}" \
		"$V2/manifests/$tag"
}

# --- three real snapshots ---------------------------------------------------------
R="$TEST_TMP/repo"
mkdir -p "$R"
printf 'set -e\ncat VERSION >built\n' >"$R/build.sh"
printf '{ "updateContentCommand": "sh build.sh" }\n' >"$R/warren.json"
git -C "$R" init -q -b main
SN=()
for v in 1 2 3; do
	echo "$v" >"$R/VERSION"
	git -C "$R" -c user.email=t@w -c user.name=t add -A
	git -C "$R" -c user.email=t@w -c user.name=t commit -q -m "v$v"
	SN+=("$(snapA build --quiet "$R" 2>&1 | tail -1)")
done
S_LOCAL="${SN[0]}" S_STORE="${SN[1]}" S_GONE="${SN[2]}"
for s in "${SN[@]}"; do
	if [ ${#s} != 64 ] || ! snapA push "$s" --blobs "$BL" >/dev/null 2>&1; then
		fail "build and push three snapshots" "$s"
		exit 0
	fi
done
# a snapshot's blobs, config last
blobs_of() { local t; for t in "$@"; do manifest "$t"; echo; done | python3 -c '
import json, sys
for line in sys.stdin:
    if line.strip():
        m = json.loads(line)
        print(*[l["digest"] for l in m["layers"]], m["config"]["digest"], end=" ")
print()'; }
snapA rm "$S_STORE" >/dev/null
snapA rm "$S_GONE" >/dev/null

# --- the checkpoints --------------------------------------------------------------
SA=s-00000000000000a1 # review, lease epoch 5
SB=s-00000000000000b2 # pushed (over), lease epoch 3, e2 recorded
SC=s-00000000000000c3 # running, lease epoch 7, nothing recorded yet
SX=s-00000000000000ff # not in the store
mapfile -t ck_a5 < <(push_ckpt "ckpt-$SA-e5" "bundle a5" diff.patch="diff a5" files.json="files a5")
# an older checkpoint (recorded before): its artifact a plain blob the
# outcome records (an older release's), also a layer of the epoch-3 tag
PLAIN="$(push_blob "diff of old")"
mapfile -t ck_a3 < <(push_ckpt "ckpt-$SA-e3" "bundle a3" diff.patch="diff of old")
mapfile -t ck_a4 < <(push_ckpt "ckpt-$SA-e4" "bundle a4 orphan" diff.patch="diff a4")
mapfile -t ck_b2 < <(push_ckpt "ckpt-$SB-e2" "bundle b2" diff.patch="diff b2")
mapfile -t ck_b1 < <(push_ckpt "ckpt-$SB-e1" "bundle b1")
# pushed under SB's last epoch, never recorded: the session is over
mapfile -t ck_b3 < <(push_ckpt "ckpt-$SB-e3" "bundle b3")
mapfile -t ck_c7 < <(push_ckpt "ckpt-$SC-e7" "bundle c7" diff.patch="diff c7")
mapfile -t ck_x1 < <(push_ckpt "ckpt-$SX-e1" "bundle x1" diff.patch="diff x1")
mapfile -t ck_odd < <(push_ckpt "ckpt-notours" "bundle odd")
for t in "ckpt-$SA-e5" "ckpt-$SA-e3" "ckpt-$SX-e1" ckpt-notours; do
	[ "$(status_manifest "$t")" = 200 ] || fail "push checkpoint $t" "$(status_manifest "$t")"
done

# --- the store: a warren serve's SQLite, its rows as workers leave them ----------
SRV="$TEST_TMP/srv"
server_start "$SRV"
server_stop
DB="$SRV/warren.db"
[ -s "$DB" ] || { fail "warren serve makes its store" "$(tail -5 "$SERVER_LOG")"; exit 0; }
now=$(($(date +%s) * 1000))
outcome() { # TAG BUNDLE [NAME DIGEST]...
	local tag="$1" bundle="$2" arts=""
	shift 2
	while [ $# -ge 2 ]; do arts="$arts${arts:+, }\"$1\": {\"digest\": \"$2\", \"size\": 1}"; shift 2; done
	echo "{\"exit\": 0, \"checkpoint\": {\"tag\": \"$tag\", \"manifest\": \"sha256:$(printf '%064d' 0)\", \"bundle\": \"$bundle\", \"artifacts\": {$arts}}}"
}
ins_session() { # ID STATE EPOCH OUTCOME-JSON|NULL
	sqlite3 "$DB" "INSERT INTO sessions (id, repo_id, user_name, prompt, state, outcome_json, queue_seq, created_ms, updated_ms, lease_epoch)
		VALUES ('$1', 'r-0000000000000001', 'admin', 'p', '$2', $4, 1, $now, $now, $3)"
}
sqlite3 "$DB" "INSERT INTO repositories (id, name, url, created_ms) VALUES ('r-0000000000000001', 'proj', '$R', $now);
	INSERT INTO snapshots (id, repo_id, commit_id, created_ms) VALUES ('$S_STORE', 'r-0000000000000001', '$(git -C "$R" rev-parse HEAD)', $now)"
# SA's outcome records e5: its bundle, its two artifacts, and the plain
# blob of an older release's artifact
ins_session "$SA" review 5 "'$(outcome "ckpt-$SA-e5" "${ck_a5[0]}" diff.patch "${ck_a5[1]}" files.json "${ck_a5[2]}" old.patch "$PLAIN")'"
ins_session "$SB" pushed 3 "'$(outcome "ckpt-$SB-e2" "${ck_b2[0]}" diff.patch "${ck_b2[1]}")'"
ins_session "$SC" running 7 "'{\"exit\": -1}'"
# 1,100 newer sessions without a checkpoint: the three above are on the
# third page of the store's list (500 a page)
python3 -c '
import sys
now = int(sys.argv[1])
print("BEGIN;")
for i in range(1100):
    print("INSERT INTO sessions (id, repo_id, user_name, prompt, state, queue_seq, created_ms, updated_ms) "
          "VALUES (%s, %s, %s, %s, %s, 1, %d, %d);" % ("\x27s-%016x\x27" % (0x1000 + i), "\x27r-0000000000000001\x27",
          "\x27admin\x27", "\x27p\x27", "\x27rejected\x27", now + 1000 + i, now + 1000 + i))
print("COMMIT;")' "$now" | sqlite3 "$DB"
[ "$(sqlite3 "$DB" 'SELECT COUNT(*) FROM sessions')" = 1103 ] || fail "the store's sessions are written" "$(sqlite3 "$DB" 'SELECT COUNT(*) FROM sessions')"

# what goes: the snapshot in neither, e3 and the orphan e4 of SA, SB's
# older e1 (over: only the recorded tag stays), the session gone's tag
# (S_GONE's own blobs: a layer the three share stays)
read -r -a gone_s <<<"$(comm -23 <(blobs_of "$S_GONE" | tr ' ' '\n' | sort) <(blobs_of "$S_LOCAL" "$S_STORE" | tr ' ' '\n' | sort) | tr '\n' ' ')"
want_tags="$(printf '%s\n' "$S_GONE" "ckpt-$SA-e3" "ckpt-$SA-e4" "ckpt-$SB-e1" "ckpt-$SB-e3" "ckpt-$SX-e1" | sort | tr '\n' ' ')"
# their blobs, less what stays: e3's artifact is the recorded plain blob;
# the configs of the checkpoints (one each) are read from the manifests
cfg_of() { manifest "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["config"]["digest"])'; }
want_blobs="$(printf '%s\n' "${gone_s[@]}" "${ck_a3[0]}" "${ck_a4[@]}" "${ck_b1[0]}" "${ck_b3[0]}" "${ck_x1[@]}" \
	"$(cfg_of "ckpt-$SA-e3")" "$(cfg_of "ckpt-$SA-e4")" "$(cfg_of "ckpt-$SB-e1")" "$(cfg_of "ckpt-$SB-e3")" "$(cfg_of "ckpt-$SX-e1")" | sort -u | tr '\n' ' ')"
stays_blobs=("${ck_a5[@]}" "$PLAIN" "${ck_b2[@]}" "${ck_c7[@]}" "${ck_odd[@]}" $(blobs_of "$S_LOCAL") $(blobs_of "$S_STORE"))

got_of() { echo "$1" | jq_ '" ".join(sorted(m["snapshot"] for m in d["registry"]["manifests"])) + " |" + " ".join(sorted(b["digest"] for b in d["registry"]["blobs"])) + " "' 2>&1; }

# --- without --store: as before, checkpoints are other tags ---------------------
out="$(snapA gc --blobs "$BL" --dry-run --json 2>&1)"
got="$(got_of "$out")"
want="$(printf '%s\n' "$S_GONE" "$S_STORE" | sort | tr '\n' ' ')|"
[ "${got%%|*}|" = "$want" ] && [ "$(echo "$out" | jq_ 'd["registry"]["other_tags"]')" = 9 ] &&
	pass "without --store: the data directory decides, checkpoint tags are other tags" ||
	fail "without --store: the data directory decides, checkpoint tags are other tags" "got ${got%%|*} want $want; $out"

# --- --dry-run with the store -------------------------------------------------------
all_status() { # every tag and blob of the test, with its status
	local t
	for t in "${SN[@]}" "ckpt-$SA-e5" "ckpt-$SA-e3" "ckpt-$SA-e4" "ckpt-$SB-e2" "ckpt-$SB-e1" "ckpt-$SB-e3" "ckpt-$SC-e7" "ckpt-$SX-e1" ckpt-notours; do
		echo "m $t $(status_manifest "$t")"
	done
	for t in $want_blobs "${stays_blobs[@]}"; do echo "b $t $(status_blob "$t")"; done
}
before="$(all_status)"
out="$(snapA gc --blobs "$BL" --store "sqlite:$DB" --dry-run --json 2>&1)"
rc=$?
got="$(got_of "$out")"
[ $rc = 0 ] && [ "$got" = "$want_tags|$want_blobs" ] &&
	pass "--dry-run --store lists exactly the snapshot in neither, the unrecorded and older checkpoints, and their own blobs" ||
	fail "--dry-run --store lists exactly the snapshot in neither, the unrecorded and older checkpoints, and their own blobs" "rc=$rc got [$got] want [$want_tags|$want_blobs]; $out"
kept="$(echo "$out" | jq_ '(d["registry"]["kept"], d["registry"]["checkpoints_kept"], d["registry"]["other_tags"], d["registry"]["store"])' 2>&1)"
[ "$kept" = "(2, 3, 1, True)" ] && pass "--dry-run counts 2 snapshots, 3 checkpoints and 1 other tag kept" ||
	fail "--dry-run counts 2 snapshots, 3 checkpoints and 1 other tag kept" "$kept"
echo "$before" | grep -q ' 200$' && ! echo "$before" | grep -qv ' 200$' && [ "$(all_status)" = "$before" ] &&
	pass "--dry-run deletes nothing" || fail "--dry-run deletes nothing" "$(diff <(echo "$before") <(all_status) | head -5)"
out="$(snapA gc --blobs "$BL" --store "sqlite:$DB" --dry-run 2>&1)"
echo "$out" | grep -q "^would delete manifest sha256:.* (ckpt-$SA-e4)" && echo "$out" | grep -q "^would delete blob ${ck_a4[1]} (diff.patch)" &&
	echo "$out" | grep -q "^registry: would delete 6 manifests and .*; kept 2 snapshots, 3 checkpoints and other tags" &&
	pass "--dry-run says what would go, a checkpoint's artifact by name" || fail "--dry-run says what would go, a checkpoint's artifact by name" "$out"

# --config: the store of a serve configuration (its "store", else
# DATA/warren.db of --data)
echo "{\"store\": \"sqlite:$DB\", \"blobs\": $(cat "$BL")}" >"$TEST_TMP/serve.json"
out="$(snapA gc --blobs "$TEST_TMP/serve.json" --config "$TEST_TMP/serve.json" --dry-run --json 2>&1)"
[ "$(got_of "$out")" = "$want_tags|$want_blobs" ] && pass "--config takes the configuration's store" ||
	fail "--config takes the configuration's store" "$out"
echo "{\"blobs\": $(cat "$BL")}" >"$TEST_TMP/nostore.json"
out="$("$WARREN" snapshot gc --data "$SRV" --blobs "$BL" --config "$TEST_TMP/nostore.json" --dry-run --json 2>&1)"
echo "$out" | jq_ 'd["registry"]["checkpoints_kept"]' 2>/dev/null | grep -qx 3 &&
	pass "--config without a store: DATA/warren.db" || fail "--config without a store: DATA/warren.db" "$out"

# --- a store that cannot be read, an empty one: nothing deleted -----------------
out="$(snapA gc --blobs "$BL" --store "sqlite:$TEST_TMP/nope.db" 2>&1)"
rc=$?
[ $rc != 0 ] && echo "$out" | grep -q "nothing deleted.*the store sqlite:$TEST_TMP/nope.db" && [ ! -e "$TEST_TMP/nope.db" ] &&
	[ "$(all_status)" = "$before" ] && pass "a store that is not there: an error, nothing deleted (nor a store made)" ||
	fail "a store that is not there: an error, nothing deleted (nor a store made)" "rc=$rc $out"
cp "$DB" "$TEST_TMP/empty.db"
sqlite3 "$TEST_TMP/empty.db" "DELETE FROM sessions; DELETE FROM snapshots; DELETE FROM repositories"
out="$(snapA gc --blobs "$BL" --store "$TEST_TMP/empty.db" 2>&1)"
rc=$?
[ $rc != 0 ] && echo "$out" | grep -q "nothing deleted.*is empty" && [ "$(all_status)" = "$before" ] &&
	pass "an empty store: refused, nothing deleted" || fail "an empty store: refused, nothing deleted" "rc=$rc $out"
printf 'not a database, not at all' >"$TEST_TMP/garbage.db"
out="$(snapA gc --blobs "$BL" --store "$TEST_TMP/garbage.db" 2>&1)"
rc=$?
[ $rc != 0 ] && echo "$out" | grep -q "nothing deleted" && [ "$(all_status)" = "$before" ] &&
	pass "a file that is not a store: an error, nothing deleted" || fail "a file that is not a store: an error, nothing deleted" "rc=$rc $out"
expect_status "--store without --blobs is a usage error" 2 snapA gc --store "sqlite:$DB"
expect_status "--store and --config together are a usage error" 2 snapA gc --blobs "$BL" --store "sqlite:$DB" --config "$TEST_TMP/serve.json"

# --- the gc ---------------------------------------------------------------------------
out="$(snapA gc --blobs "$BL" --store "sqlite:$DB" 2>&1)"
rc=$?
[ $rc = 0 ] && echo "$out" | grep -q "^registry: deleted 6 manifests" && pass "gc --store deletes six manifests" ||
	fail "gc --store deletes six manifests" "rc=$rc $out"
echo "INFO registry_gc_store: $(echo "$out" | grep '^registry:')" >&2
[ "$(status_manifest "$S_STORE")" = 200 ] && pass "(a) a snapshot only the store references is kept" ||
	fail "(a) a snapshot only the store references is kept" "$(status_manifest "$S_STORE")"
[ "$(status_manifest "$S_LOCAL")" = 200 ] && pass "a snapshot the data directory holds is kept" ||
	fail "a snapshot the data directory holds is kept" "$(status_manifest "$S_LOCAL")"
[ "$(status_manifest "ckpt-$SA-e5")" = 200 ] && [ "$(status_manifest "ckpt-$SB-e2")" = 200 ] &&
	pass "(b) the recorded checkpoint tags are kept, a session over's too" ||
	fail "(b) the recorded checkpoint tags are kept, a session over's too" "$(status_manifest "ckpt-$SA-e5") $(status_manifest "ckpt-$SB-e2")"
bad=""
for b in "${ck_a5[@]}" "${ck_b2[@]}" "$PLAIN"; do [ "$(status_blob "$b")" = 200 ] || bad="$bad $b"; done
[ -z "$bad" ] && pass "(b) ...with their bundles and artifacts, the recorded plain blob shared with a tag that went included" ||
	fail "(b) ...with their bundles and artifacts, the recorded plain blob shared with a tag that went included" "$bad"
[ "$(status_manifest "ckpt-$SC-e7")" = 200 ] && [ "$(status_blob "${ck_c7[0]}")" = 200 ] && [ "$(status_blob "${ck_c7[1]}")" = 200 ] &&
	pass "a running session's tag of its current epoch, not recorded yet, is kept" ||
	fail "a running session's tag of its current epoch, not recorded yet, is kept" "$(status_manifest "ckpt-$SC-e7")"
[ "$(status_manifest ckpt-notours)" = 200 ] && pass "a ckpt- tag of another shape is not ours: kept" ||
	fail "a ckpt- tag of another shape is not ours: kept" "$(status_manifest ckpt-notours)"
bad=""
for t in "ckpt-$SA-e4" "ckpt-$SA-e3" "ckpt-$SB-e1" "ckpt-$SB-e3"; do [ "$(status_manifest "$t")" = 404 ] || bad="$bad $t"; done
for b in "${ck_a4[@]}" "${ck_a3[0]}" "${ck_b1[0]}" "${ck_b3[0]}"; do [ "$(status_blob "$b")" = 404 ] || bad="$bad $b"; done
[ -z "$bad" ] && pass "(c) an orphan tag, older epochs' tags and a session over's unrecorded one are gone, with their blobs" ||
	fail "(c) an orphan tag, older epochs' tags and a session over's unrecorded one are gone, with their blobs" "$bad"
bad=""
[ "$(status_manifest "ckpt-$SX-e1")" = 404 ] || bad="manifest"
for b in "${ck_x1[@]}"; do [ "$(status_blob "$b")" = 404 ] || bad="$bad $b"; done
[ -z "$bad" ] && pass "(c) the tag of a session the store does not have is gone, with its blobs" ||
	fail "(c) the tag of a session the store does not have is gone, with its blobs" "$bad"
bad=""
[ "$(status_manifest "$S_GONE")" = 404 ] || bad="manifest"
for b in "${gone_s[@]}"; do [ "$(status_blob "$b")" = 404 ] || bad="$bad $b"; done
[ -z "$bad" ] && pass "(d) a snapshot in neither the store nor the data directory is gone, with its blobs" ||
	fail "(d) a snapshot in neither the store nor the data directory is gone, with its blobs" "$bad"
bad=""
for b in $(blobs_of "$S_LOCAL") $(blobs_of "$S_STORE"); do [ "$(status_blob "$b")" = 200 ] || bad="$bad $b"; done
[ -z "$bad" ] && pass "the kept snapshots keep every blob" || fail "the kept snapshots keep every blob" "$bad"
out="$(snapA gc --blobs "$BL" --store "sqlite:$DB" 2>&1)"
echo "$out" | grep -q "^registry: deleted 0 manifests and 0 blobs" && pass "a second gc --store deletes nothing" ||
	fail "a second gc --store deletes nothing" "$out"

# the session moves on: SA's new worker records e6; e5 goes at the next gc
mapfile -t ck_a6 < <(push_ckpt "ckpt-$SA-e6" "bundle a6" diff.patch="diff a5")
sqlite3 "$DB" "UPDATE sessions SET lease_epoch = 6, outcome_json = '$(outcome "ckpt-$SA-e6" "${ck_a6[0]}" diff.patch "${ck_a6[1]}")' WHERE id = '$SA'"
out="$(snapA gc --blobs "$BL" --store "sqlite:$DB" 2>&1)"
[ "$(status_manifest "ckpt-$SA-e5")" = 404 ] && [ "$(status_blob "${ck_a5[0]}")" = 404 ] && [ "$(status_blob "${ck_a5[2]}")" = 404 ] &&
	[ "$(status_manifest "ckpt-$SA-e6")" = 200 ] && [ "$(status_blob "${ck_a6[1]}")" = 200 ] &&
	pass "a newer recorded checkpoint: the previous one goes, an artifact both name stays" ||
	fail "a newer recorded checkpoint: the previous one goes, an artifact both name stays" "$out"
registry_stop_all
left="$(pgrep -af "$TEST_TMP" || true)"
[ -z "$left" ] && pass "nothing left running" || fail "nothing left running" "$left"
