#!/bin/bash
# The OCI registry client (src/blobs/, through the test hook
# build/tests/blobs_tool) against Debian's real docker-registry
# (distribution 2.8) run here on loopback with its own configuration
# (filesystem storage in TEST_TMP, htpasswd with bcrypt, deletes on) and
# a free port - not the package's own service: a ~20 MB blob pushed and
# pulled back byte-identical with its digest; HEAD of an absent blob; a
# size cap; manifests put and got by tag and digest, tags listed; a wrong
# password is a 401 naming the registry; a manifest deleted. The same
# registry with token auth, its tokens from tests/tools/token_server.py (a
# stand-in token server): push, pull, manifests, tags, delete, one token
# per scope, refused credentials. Then the bearer flow's corners against
# tests/tools/registry_standin.py (a stand-in registry and token server):
# the requests a push makes (one token, cached for its scope); expired
# tokens not used; an upload refused once sent again from its start (from
# a pipe: not, the 401 said); tags in pages; an upload location off the
# registry refused; a blob whose bytes do not match its digest refused and
# its output removed. A bad "blobs" configuration stops warren serve
# naming the key. Nothing is left running.
. "$(dirname "$0")/../lib.sh"
. "$ROOT_DIR/tests/registry_server.sh"

TOOL="$ROOT_DIR/$BUILD/tests/blobs_tool"
if [ -z "$REGISTRY_BIN" ] || ! command -v htpasswd >/dev/null || ! command -v openssl >/dev/null; then
	echo "SKIP blobs_registry: docker-registry, htpasswd or openssl is not installed (apt-get install docker-registry apache2-utils openssl)" >&2
	exit 0
fi
if [ ! -x "$TOOL" ]; then
	fail "the test hook is built" "no $TOOL (make $BUILD/tests/blobs_tool)"
	exit 0
fi

PIDS=""
stop_all() { registry_stop_all; for p in $PIDS; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; }
trap 'stop_all; rm -rf "$TEST_TMP"' EXIT

# ---- the real registry ---------------------------------------------------------
if ! start_registry_htpasswd basic warren 's3cret-pw'; then
	fail "docker-registry starts on its own port, with htpasswd" "$(tail -5 "$TEST_TMP/basic.log")"
	exit 0
fi
REG="$REG_basic"
pass "docker-registry starts on its own port, with htpasswd"

printf 's3cret-pw\n' >"$TEST_TMP/pw"
chmod 600 "$TEST_TMP/pw"
write_config "$TEST_TMP/blobs.json" "$REG/" warren/test-blobs "$TEST_TMP/pw"
T() { "$TOOL" "$TEST_TMP/blobs.json" "$@"; }

# a ~20 MB blob, up and down
head -c 20971523 /dev/urandom >"$TEST_TMP/big"
want="sha256:$(sha256sum "$TEST_TMP/big" | cut -d' ' -f1)"
out="$(T push "$TEST_TMP/big" 2>&1)"
[ "$out" = "$want 20971523" ] && pass "push a 20 MB blob: its digest and size" ||
	fail "push a 20 MB blob: its digest and size" "want '$want 20971523', got: $out"
expect_output "HEAD of the pushed blob: its size" '^20971523$' T exists "$want"
out="$(T pull "$want" "$TEST_TMP/big.out" 2>&1)"
if [ $? = 0 ] && cmp -s "$TEST_TMP/big" "$TEST_TMP/big.out"; then
	pass "pull the blob back byte-identical"
else
	fail "pull the blob back byte-identical" "$out"
fi
absent="sha256:$(printf 'not pushed' | sha256sum | cut -d' ' -f1)"
expect_output "HEAD of an absent blob" '^absent$' T exists "$absent"
out="$(T pull "$absent" "$TEST_TMP/absent.out" 2>&1)"
if [ $? = 1 ] && echo "$out" | grep -q "registry $REG: pull blob $absent: HTTP 404 (BLOB_UNKNOWN: blob unknown to registry)" &&
	[ ! -e "$TEST_TMP/absent.out" ]; then
	pass "pull of an absent blob: the registry's 404 and code"
else
	fail "pull of an absent blob: the registry's 404 and code" "$out"
fi
out="$(T pull "$want" "$TEST_TMP/capped.out" 1048576 2>&1)"
if [ $? = 1 ] && echo "$out" | grep -q 'larger than 1048576 bytes' && [ ! -e "$TEST_TMP/capped.out" ]; then
	pass "a pull past its size cap is refused, the partial output removed"
else
	fail "a pull past its size cap is refused, the partial output removed" "$out"
fi
expect_output "a digest that is not one is refused" "is not sha256:HEX" T exists sha256:abc

# manifests: a config blob and a layer, then the manifest under a tag
printf '{}' >"$TEST_TMP/config.json"
printf 'layer bytes\n' | gzip -n >"$TEST_TMP/layer.tgz"
cfg="$(T push "$TEST_TMP/config.json")"
layer="$(T push "$TEST_TMP/layer.tgz")"
cfg_desc="${cfg% *}:${cfg#* }"
layer_desc="${layer% *}:${layer#* }"
mdigest="$(T manifest-put v1 "$cfg_desc" "$layer_desc" "${want}:20971523" 2>&1)"
if echo "$mdigest" | grep -qE '^sha256:[0-9a-f]{64}$'; then
	pass "manifest put under a tag: its digest"
else
	fail "manifest put under a tag: its digest" "$mdigest"
fi
out="$(T manifest-get v1 2>&1)"
expected="digest $mdigest
config ${cfg% *} ${cfg#* }
layer application/vnd.oci.image.layer.v1.tar+gzip ${layer% *} ${layer#* }
layer application/vnd.oci.image.layer.v1.tar+gzip $want 20971523"
[ "$out" = "$expected" ] && pass "manifest get by tag: the same descriptors, the same digest" ||
	fail "manifest get by tag: the same descriptors, the same digest" "$out"
expect_output "manifest get by digest" "^digest $mdigest\$" T manifest-get "$mdigest"
out="$(T manifest-put v2 "$cfg_desc" "$layer_desc" 2>&1)"
out="$(T tags 2>&1)"
[ "$out" = "$(printf 'v1\nv2')" ] && pass "tags list" || fail "tags list" "$out"
out="$(T manifest-put v3 "$cfg_desc" "$absent:5" 2>&1)"
echo "$out" | grep -q "registry $REG: put manifest v3: HTTP 400 (MANIFEST_BLOB_UNKNOWN" &&
	pass "a manifest naming an absent blob: the registry's refusal" ||
	fail "a manifest naming an absent blob: the registry's refusal" "$out"

# the wrong password: a 401 naming the registry
printf 'wrong\n' >"$TEST_TMP/badpw"
chmod 600 "$TEST_TMP/badpw"
write_config "$TEST_TMP/bad.json" "$REG" warren/test-blobs "$TEST_TMP/badpw"
out="$("$TOOL" "$TEST_TMP/bad.json" exists "$want" 2>&1)"
if [ "$out" = "blobs_tool: registry $REG: blob exists $want: HTTP 401" ]; then
	pass "HEAD with a wrong password: a 401 naming the registry"
else
	fail "HEAD with a wrong password: a 401 naming the registry" "$out"
fi
out="$("$TOOL" "$TEST_TMP/bad.json" push "$TEST_TMP/config.json" 2>&1)"
if [ "$out" = "blobs_tool: registry $REG: push blob: start the upload: HTTP 401 (UNAUTHORIZED: authentication required)" ]; then
	pass "push with a wrong password: the registry's 401 and its message, once"
else
	fail "push with a wrong password: the registry's 401 and its message, once" "$out"
fi

# delete
out="$(T delete "$mdigest" 2>&1)"
[ $? = 0 ] && pass "delete a manifest by digest" || fail "delete a manifest by digest" "$out"
out="$(T manifest-get "$mdigest" 2>&1)"
echo "$out" | grep -q "get manifest $mdigest: HTTP 404 (MANIFEST_UNKNOWN" &&
	pass "a deleted manifest is gone" || fail "a deleted manifest is gone" "$out"
expect_output "delete by a tag is refused" "neither a tag nor a sha256 digest|is not sha256:HEX" T delete v2

# ---- the password file and the configuration -------------------------------------
chmod 644 "$TEST_TMP/pw"
expect_output "a group-readable password file is refused, by key" \
	"blobs.password_file $TEST_TMP/pw: readable or writable by group or others" T tags
chmod 600 "$TEST_TMP/pw"
printf '{"blobs": {"registry": "%s", "repository": "Warren/Blobs"}}\n' "$REG" >"$TEST_TMP/serve-bad.json"
out="$("$WARREN" serve --data "$TEST_TMP/bad-data" --listen 127.0.0.1:1 --config "$TEST_TMP/serve-bad.json" 2>&1)"
[ $? != 0 ] && echo "$out" | grep -q "blobs.repository: 'Warren/Blobs'" &&
	pass "warren serve refuses a bad blobs configuration, naming the key" ||
	fail "warren serve refuses a bad blobs configuration, naming the key" "$out"

# ---- the real registry's token auth ------------------------------------------------
# docker-registry with `auth: token`, its tokens from tests/tools/token_server.py (a
# stand-in token server: JWTs signed with a key made here, its certificate the
# registry's rootcertbundle)
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$TEST_TMP/token.key" -out "$TEST_TMP/token.crt" \
	-days 1 -subj /CN=warren-test-token >/dev/null 2>&1
python3 "$ROOT_DIR/tests/tools/token_server.py" --key "$TEST_TMP/token.key" --cert "$TEST_TMP/token.crt" \
	--issuer warren-test-issuer --user tok-user --password tok-pw --log "$TEST_TMP/tokens.log" \
	>"$TEST_TMP/tokens.port" 2>"$TEST_TMP/tokens.err" &
PIDS="$PIDS $!"
for _ in $(seq 1 100); do [ -s "$TEST_TMP/tokens.port" ] && break; sleep 0.1; done
TPORT="$(head -1 "$TEST_TMP/tokens.port")"
touch "$TEST_TMP/tokens.log"
start_registry tokens_registry "  token:
    realm: http://127.0.0.1:$TPORT/token
    service: warren-test
    issuer: warren-test-issuer
    rootcertbundle: $TEST_TMP/token.crt" &&
	pass "docker-registry starts with token auth" ||
	fail "docker-registry starts with token auth" "$(tail -5 "$TEST_TMP/tokens_registry.log")"
REG2="$REG_tokens_registry"
printf 'tok-pw\n' >"$TEST_TMP/tokpw"
chmod 600 "$TEST_TMP/tokpw"
write_config "$TEST_TMP/real-tok.json" "$REG2" warren/tok "$TEST_TMP/tokpw" tok-user
R() { "$TOOL" "$TEST_TMP/real-tok.json" "$@"; }
head -c 300000 /dev/urandom >"$TEST_TMP/small"
swant="sha256:$(sha256sum "$TEST_TMP/small" | cut -d' ' -f1)"
out="$(R push "$TEST_TMP/small" 2>&1)"
ntok="$(grep -c '"path": "/token' "$TEST_TMP/tokens.log")"
[ "$out" = "$swant 300000" ] && [ "$ntok" = 1 ] &&
	pass "token auth: push, with one token for its scope" ||
	fail "token auth: push, with one token for its scope" "$out; $ntok token requests: $(tr '\n' ' ' <"$TEST_TMP/tokens.log" | head -c 1500)"
out="$(R pull "$swant" "$TEST_TMP/small.real" 2>&1)"
[ $? = 0 ] && cmp -s "$TEST_TMP/small" "$TEST_TMP/small.real" &&
	pass "token auth: pull" || fail "token auth: pull" "$out"
rc="$(R push "$TEST_TMP/config.json")"
rmd="$(R manifest-put v1 "${rc% *}:${rc#* }" "$swant:300000" 2>&1)"
out="$(R manifest-get v1 2>&1)"
echo "$out" | grep -q "^digest $rmd\$" && pass "token auth: manifest put and get" ||
	fail "token auth: manifest put and get" "$rmd / $out"
expect_output "token auth: tags" '^v1$' R tags
out="$(R delete "$rmd" 2>&1)"
[ $? = 0 ] && grep -qi 'scope=repository%3Awarren%2Ftok%3Adelete' "$TEST_TMP/tokens.log" &&
	pass "token auth: delete, with a token for the delete scope" ||
	fail "token auth: delete, with a token for the delete scope" "$out"
printf 'not-it\n' >"$TEST_TMP/tokpw"
out="$(R exists "$swant" 2>&1)"
[ "$out" = "blobs_tool: registry $REG2: blob exists $swant: token from http://127.0.0.1:$TPORT/token: HTTP 401 (UNAUTHORIZED: bad credentials)" ] &&
	pass "token auth: the token server refusing the credentials, said once" ||
	fail "token auth: the token server refusing the credentials, said once" "$out"
printf 'tok-pw\n' >"$TEST_TMP/tokpw"

# ---- the bearer flow's corners, against the stand-in registry ---------------------
# start_standin NAME ARGS...: sets PORT_NAME; its requests in $TEST_TMP/NAME.log
start_standin() {
	local name="$1"
	shift
	python3 "$ROOT_DIR/tests/tools/registry_standin.py" --user tok-user --password tok-pw \
		--log "$TEST_TMP/$name.log" "$@" >"$TEST_TMP/$name.port" 2>"$TEST_TMP/$name.err" &
	PIDS="$PIDS $!"
	for _ in $(seq 1 100); do [ -s "$TEST_TMP/$name.port" ] && break; sleep 0.1; done
	eval "PORT_$name=\"\$(head -1 \"\$TEST_TMP/\$name.port\")\""
	touch "$TEST_TMP/$name.log"
}
start_standin bearer
SREG="http://127.0.0.1:$PORT_bearer"
write_config "$TEST_TMP/tok.json" "$SREG" warren/tok "$TEST_TMP/tokpw" tok-user
B() { "$TOOL" "$TEST_TMP/tok.json" "$@"; }
out="$(B push "$TEST_TMP/small" 2>&1)"
[ "$out" = "$swant 300000" ] && pass "bearer: push" || fail "bearer: push" "$out"
# POST (401), GET /token, POST, PATCH, PUT: one token for the push scope
reqs="$(python3 -c 'import json,sys; print(" ".join("%s:%s" % (r["method"], r["status"]) for r in map(json.loads, open(sys.argv[1]))))' "$TEST_TMP/bearer.log")"
[ "$reqs" = "POST:401 GET:200 POST:202 PATCH:202 PUT:201" ] &&
	pass "bearer: a 401, one token, the upload with it (cached for its scope)" ||
	fail "bearer: a 401, one token, the upload with it (cached for its scope)" "$reqs"
grep -qi '"path": "/token?service=standin&scope=repository%3Awarren%2Ftok%3Apull%2Cpush"' "$TEST_TMP/bearer.log" &&
	pass "bearer: the token asked for the challenge's service and scope" ||
	fail "bearer: the token asked for the challenge's service and scope" "$(grep token "$TEST_TMP/bearer.log")"

# tags in pages of one (Link: <...>; rel="next")
start_standin paged --tags-page 1
write_config "$TEST_TMP/paged.json" "http://127.0.0.1:$PORT_paged" warren/tok "$TEST_TMP/tokpw" tok-user
pd="$("$TOOL" "$TEST_TMP/paged.json" push "$TEST_TMP/config.json")"
for t in c a b; do
	"$TOOL" "$TEST_TMP/paged.json" manifest-put "$t" "${pd% *}:${pd#* }" "${pd% *}:${pd#* }" >/dev/null 2>&1
done
out="$("$TOOL" "$TEST_TMP/paged.json" tags 2>&1)"
[ "$out" = "$(printf 'a\nb\nc')" ] && grep -q 'tags/list?n=1&last=b' "$TEST_TMP/paged.log" &&
	pass "tags: every page, through the Link headers" || fail "tags: every page, through the Link headers" "$out"

# from a pipe: streamed, nothing to seek, the token cached from the POST
out="$(cat "$TEST_TMP/small" | B push /dev/stdin 2>&1)"
[ "$out" = "$swant 300000" ] && pass "bearer: push from a pipe" || fail "bearer: push from a pipe" "$out"

# tokens that expire at once: each request asks for its own, and the
# PATCH refused once is sent again from the file's start
start_standin expiring --expires 0 --grace 60
write_config "$TEST_TMP/expiring.json" "http://127.0.0.1:$PORT_expiring" warren/tok "$TEST_TMP/tokpw" tok-user
out="$("$TOOL" "$TEST_TMP/expiring.json" push "$TEST_TMP/small" 2>&1)"
reqs="$(python3 -c 'import json,sys; print(" ".join("%s:%s" % (r["method"], r["status"]) for r in map(json.loads, open(sys.argv[1]))))' "$TEST_TMP/expiring.log")"
[ "$out" = "$swant 300000" ] &&
	[ "$reqs" = "POST:401 GET:200 POST:202 PATCH:401 GET:200 PATCH:202 PUT:401 GET:200 PUT:201" ] &&
	pass "bearer: an expired token is not used; a refused upload is sent again, whole" ||
	fail "bearer: an expired token is not used; a refused upload is sent again, whole" "$out / $reqs"
out="$(cat "$TEST_TMP/small" | "$TOOL" "$TEST_TMP/expiring.json" push /dev/stdin 2>&1)"
[ "$out" = "blobs_tool: registry http://127.0.0.1:$PORT_expiring: push blob: upload: HTTP 401 (UNAUTHORIZED: authentication required)" ] &&
	pass "bearer: a refused upload from a pipe is not sent again: the 401" ||
	fail "bearer: a refused upload from a pipe is not sent again: the 401" "$out"

# an upload location on another host is not followed
start_standin foreign --foreign-location
write_config "$TEST_TMP/foreign.json" "http://127.0.0.1:$PORT_foreign" warren/tok "$TEST_TMP/tokpw" tok-user
out="$("$TOOL" "$TEST_TMP/foreign.json" push "$TEST_TMP/small" 2>&1)"
echo "$out" | grep -q "push blob: start the upload: the upload location 'http://elsewhere.invalid/v2/warren/tok/blobs/uploads/[0-9a-f]*' is not on the registry" &&
	pass "an upload location off the registry is refused" ||
	fail "an upload location off the registry is refused" "$out"

# a registry (stand-in) serving bytes that are not the blob's
start_standin corrupt --corrupt
write_config "$TEST_TMP/corrupt.json" "http://127.0.0.1:$PORT_corrupt" warren/tok "$TEST_TMP/tokpw" tok-user
"$TOOL" "$TEST_TMP/corrupt.json" push "$TEST_TMP/small" >/dev/null 2>&1
out="$("$TOOL" "$TEST_TMP/corrupt.json" pull "$swant" "$TEST_TMP/corrupt.out" 2>&1)"
if [ $? = 1 ] && echo "$out" | grep -q "pull blob $swant: the 300000 bytes received have digest sha256:" &&
	echo "$out" | grep -q "300000 bytes written to $TEST_TMP/corrupt.out, removed" && [ ! -e "$TEST_TMP/corrupt.out" ]; then
	pass "a blob whose bytes do not match its digest is refused, the output reported"
else
	fail "a blob whose bytes do not match its digest is refused, the output reported" "$out"
fi

# nothing left running
stop_all
PIDS=""
left="$(pgrep -af "$TEST_TMP" || true)"
[ -z "$left" ] && pass "nothing left running" || fail "nothing left running" "$left"
