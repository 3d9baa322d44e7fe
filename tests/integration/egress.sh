#!/bin/bash
# The egress proxy end to end: a server whose configuration lets the
# loopback test host through (allow_addresses) and names the test hosts in
# its static table, a repository whose spec allows one of them, a session
# that allows another; inside the session's sandbox (command agent):
# plain HTTP and CONNECT through the proxy to allowed hosts, 403 with a
# clear body for a host not allowed, for names that resolve to a private or
# the metadata address, and for the control plane itself; direct
# connections fail (no network but loopback); the proxy variables are set;
# every decision is an "egress" event; CONNECT only to the TLS ports
# (443 and the server's connect_ports): a plain-HTTP port of an allowed
# host is reached by forwarding, with Host set to the URL's host whatever
# the client sent; a public suffix is no session entry; the relay survives a follow-up and
# comes back with a re-provisioned sandbox; a session without egress has
# neither proxy nor relay; the socket directory goes with the sandbox.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"

RELAY="$ROOT_DIR/$BUILD/warren-relay"
[ -x "$RELAY" ] || { fail "warren-relay is built" "missing $RELAY"; exit 0; }

# --- the loopback test host ----------------------------------------------------
WWW="$TEST_TMP/www"
mkdir -p "$WWW"
echo egress-ok >"$WWW/hello.txt"
HP="$(free_port)"
python3 -m http.server "$HP" --bind 127.0.0.1 --directory "$WWW" >/dev/null 2>&1 &
HTTP_PID=$!
# a second one, plain HTTP on a port that is not in connect_ports: it
# answers with the Host header it got
HP2="$(free_port)"
python3 -c '
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = ("host=%s\n" % self.headers.get("Host")).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(b))); self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
' "$HP2" >/dev/null 2>&1 &
HOST_PID=$!
trap 'kill $HTTP_PID $HOST_PID 2>/dev/null; server_stop; rm -rf "$TEST_TMP"' EXIT
for _ in $(seq 1 50); do
	curl -s -o /dev/null "http://127.0.0.1:$HP/hello.txt" && curl -s -o /dev/null "http://127.0.0.1:$HP2/" && break
	sleep 0.1
done

# --- the server: the test host allowed by address, names in its table ---------
D="$TEST_TMP/data"
CONF="$TEST_TMP/serve.json"
cat >"$CONF" <<EOF
{"egress": {"allow_addresses": ["127.0.0.1/32"], "connect_ports": [$HP],
            "hosts": {"allowed.test": "127.0.0.1", "session.test": "127.0.0.1",
                      "private.test": "10.0.0.1", "metadata.test": "169.254.169.254",
                      "api.test": "127.0.0.1"}}}
EOF
server_start "$D" "$CONF"
api GET /api/v1/healthz
[ "$CODE" = 200 ] && pass "server with an egress configuration starts" ||
	fail "server with an egress configuration starts" "$(tail -3 "$SERVER_LOG")"

# a bad egress configuration is refused with the key named
echo '{"egress": {"deny": ["10.0.0.0/33"]}}' >"$TEST_TMP/bad.json"
out="$("$WARREN" serve --data "$TEST_TMP/bad-data" --listen 127.0.0.1:1 --config "$TEST_TMP/bad.json" 2>&1)"
echo "$out" | grep -q 'egress.deny\[0\]' && pass "a bad egress configuration names the key" ||
	fail "a bad egress configuration names the key" "$out"
echo '{"egress": {"connect_ports": [443, 0]}}' >"$TEST_TMP/bad.json"
out="$("$WARREN" serve --data "$TEST_TMP/bad-data" --listen 127.0.0.1:1 --config "$TEST_TMP/bad.json" 2>&1)"
echo "$out" | grep -q 'egress.connect_ports\[1\]' && pass "a bad connect_ports names the entry" ||
	fail "a bad connect_ports names the entry" "$out"

# --- the repository: its spec allows the test host (and traps) ------------------
R="$TEST_TMP/proj"
mkdir -p "$R"
cat >"$R/warren.json" <<EOF
{"customizations": {"warren": {"egress": ["allowed.test:$HP", "private.test:$HP",
  "metadata.test", "api.test:$PORT", "allowed.test:$HP2"]}}}
EOF
git -C "$R" init -q -b main
git -C "$R" -c user.email=t@warren -c user.name=test add -A
git -C "$R" -c user.email=t@warren -c user.name=test commit -q -m initial
api POST /api/v1/repositories "{\"url\": \"$R\", \"name\": \"proj\"}"
[ "$CODE" = 201 ] || fail "register the repository" "$CODE $BODY"

R2="$TEST_TMP/plain"
mkdir -p "$R2"
echo '{}' >"$R2/warren.json"
git -C "$R2" init -q -b main
git -C "$R2" -c user.email=t@warren -c user.name=test add -A
git -C "$R2" -c user.email=t@warren -c user.name=test commit -q -m initial
api POST /api/v1/repositories "{\"url\": \"$R2\", \"name\": \"plain\"}"

# --- a session's own list: checked at submission ---------------------------------
api POST /api/v1/sessions '{"repo": "proj", "prompt": "x", "agent": ["true"], "egress": ["http://a.com"]}'
[ "$CODE" = 400 ] && echo "$BODY" | grep -q 'egress\[0\]' && pass "a bad egress entry: 400 naming it" ||
	fail "a bad egress entry: 400 naming it" "$CODE $BODY"
api POST /api/v1/sessions '{"repo": "proj", "prompt": "x", "agent": ["true"], "egress": "a.com"}'
[ "$CODE" = 400 ] && pass "egress must be an array: 400" || fail "egress must be an array: 400" "$CODE $BODY"
ok=1
for e in com '*.com' co.uk '*.co.uk' github.io '*.github.io'; do
	api POST /api/v1/sessions "{\"repo\": \"proj\", \"prompt\": \"x\", \"agent\": [\"true\"], \"egress\": [\"example.com\", \"$e\"]}"
	[ "$CODE" = 400 ] && echo "$BODY" | grep -q 'egress\[1\]' && echo "$BODY" | grep -qF "'$e'" && echo "$BODY" | grep -qi 'public suffix' ||
		{ ok=0; fail "a public suffix is no session entry: 400, naming the entry and why" "$e: $CODE $BODY"; }
done
[ $ok = 1 ] && pass "a public suffix is no session entry (com, *.com, co.uk, *.co.uk, github.io, *.github.io): 400, naming the entry and why"

# The agent: each check prints one line; the first attempt then waits to
# be killed (the re-provisioned sandbox runs the checks again).
AGENT="$(
	cat <<EOF
echo "env \$(env | grep -c -E '^(HTTP_PROXY|HTTPS_PROXY|http_proxy|https_proxy)=http://127.0.0.1:3128\$') \$NO_PROXY"
echo "plain \$(curl -s --max-time 10 http://allowed.test:$HP/hello.txt)"
echo "tunnel \$(curl -s -p --max-time 10 http://allowed.test:$HP/hello.txt)"
echo "https \$(curl -s -v --max-time 10 https://allowed.test:$HP/ 2>&1 | grep -c -i 'HTTP/1.1 200 Connection established')"
echo "forward-host \$(curl -s --max-time 10 -H 'Host: other.test' http://allowed.test:$HP2/)"
echo "connect-port \$(curl -s -p --max-time 10 -o /dev/null -w '%{http_connect}' http://allowed.test:$HP2/)"
echo "session \$(curl -s --max-time 10 http://session.test:$HP/hello.txt)"
echo "denied \$(curl -s --max-time 10 http://denied.test:$HP/hello.txt)"
echo "denied-code \$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' http://denied.test:$HP/hello.txt)"
echo "tunnel-denied \$(curl -s -p --max-time 10 -o /dev/null -w '%{http_connect}' http://denied.test:$HP/)"
echo "private \$(curl -s --max-time 10 http://private.test:$HP/)"
echo "metadata \$(curl -s --max-time 10 http://metadata.test/latest/meta-data/)"
echo "api \$(curl -s --max-time 10 http://api.test:$PORT/api/v1/healthz)"
curl -s --noproxy '*' --max-time 5 http://127.0.0.1:$HP/hello.txt >/dev/null; echo "direct-loopback rc=\$?"
curl -s --noproxy '*' --max-time 5 http://10.0.0.1/ >/dev/null; echo "direct-net rc=\$?"
if [ ! -f /workspace/.attempt ]; then touch /workspace/.attempt; echo first-attempt-done; sleep 600; fi
echo attempt-done
EOF
)"
body="$(jq -n --arg a "$AGENT" --arg h "session.test:$HP" \
	'{repo: "proj", prompt: "egress", agent: ["sh", "-c", $a], egress: [$h]}')"
api POST /api/v1/sessions "$body"
S="$(jget .id)"
[ "$CODE" = 201 ] && [ "$(jget '.limits.egress[0]')" = "session.test:$HP" ] &&
	pass "a session with its own egress list: 201, kept with its limits" ||
	fail "a session with its own egress list: 201, kept with its limits" "$CODE $BODY"

wait_output "$S" first-attempt-done 120 ||
	fail "the egress agent runs" "$(session_log "$S" | tail -5; tail -5 "$SERVER_LOG")"
log="$(session_log "$S")"
check() { # NAME REGEX
	if echo "$log" | grep -Eq -- "$2"; then pass "$1"; else fail "$1" "$(echo "$log" | grep -E "^stdout ${2%% *}" | head -2) / $(echo "$log" | tail -3 | tr '\n' ' ')"; fi
}
check "the proxy variables are set" '^stdout env 4 localhost,127.0.0.1,::1$'
check "plain HTTP to an allowed host goes through" '^stdout plain egress-ok$'
check "CONNECT to an allowed host carries the bytes" '^stdout tunnel egress-ok$'
check "https:// goes through CONNECT" '^stdout https 1$'
check "plain HTTP is forwarded with Host set to the URL's host, not the client's" "^stdout forward-host host=allowed.test:$HP2\$"
check "CONNECT to an allowed host on a port not in connect_ports: 403" '^stdout connect-port 403$'
check "the session's own list allows its host" '^stdout session egress-ok$'
check "a host not allowed: 403" '^stdout denied-code 403$'
check "a host not allowed: a body that says why" "^stdout denied warren egress: denied.test:$HP is not allowed for session $S \\(not in the allowlist\\)$"
check "CONNECT to a host not allowed: 403" '^stdout tunnel-denied 403$'
check "a name resolving to a private address: 403" "^stdout private warren egress: private.test:$HP is not allowed for session $S \\(it resolves to 10.0.0.1, a private address\\)$"
check "a name resolving to the metadata address: 403" '^stdout metadata .*resolves to 169.254.169.254, the cloud metadata address'
check "the control plane is not reachable even when allowed" '^stdout api .*the control plane itself'
check "no direct connection to the host's loopback" '^stdout direct-loopback rc=7$'
check "no direct connection anywhere (network none)" '^stdout direct-net rc=7$'

# every decision is an event
ev="$(events_json "$S" | jq -c '[.events[] | select(.kind == "egress") | .data]')"
n_allowed="$(echo "$ev" | jq '[.[] | select(.decision == "allowed")] | length')"
n_denied="$(echo "$ev" | jq '[.[] | select(.decision == "denied")] | length')"
[ "$n_allowed" -ge 4 ] && [ "$n_denied" -ge 5 ] && pass "allowed and denied decisions are egress events" ||
	fail "allowed and denied decisions are egress events" "allowed $n_allowed, denied $n_denied: $(echo "$ev" | head -c 600)"
echo "$ev" | jq -e --arg p "$HP" '[.[] | select(.decision == "allowed" and .kind == "http" and .host == "allowed.test" and .port == ($p | tonumber) and .address == "127.0.0.1" and .bytes_down > 0 and .bytes_up > 0 and .ms >= 0)] | length >= 1' >/dev/null &&
	pass "an allowed request is recorded with address, bytes and duration" ||
	fail "an allowed request is recorded with address, bytes and duration" "$(echo "$ev" | head -c 600)"
echo "$ev" | jq -e --arg p "$HP2" '[.[] | select(.decision == "denied" and .kind == "connect" and .host == "allowed.test" and .port == ($p | tonumber) and (.reason | test("^CONNECT only to port 443 and the server.s egress.connect_ports")))] | length >= 1' >/dev/null &&
	pass "a CONNECT to another port is recorded as denied with the reason" ||
	fail "a CONNECT to another port is recorded as denied with the reason" "$(echo "$ev" | head -c 600)"
echo "$ev" | jq -e '[.[] | select(.decision == "denied" and .host == "private.test" and .address == "10.0.0.1" and (.reason | test("private")))] | length >= 1' >/dev/null &&
	pass "a denied request is recorded with the address and the reason" ||
	fail "a denied request is recorded with the address and the reason" "$(echo "$ev" | head -c 600)"

# the socket, as the sandbox sees it, and on the host
sock="$D/sessions/$S.egress/proxy.sock"
# (DATA/sessions/ID.egress links into the session's perimeter filesystem,
# a tmpfs the server holds and mounts nowhere)
[ -S "$sock" ] && [ "$(stat -L -c %a "$D/sessions/$S.egress")" = 711 ] && [ "$(stat -c %a "$sock")" = 666 ] &&
	[ "$(stat -f -L -c %T "$D/sessions/$S.egress")" = tmpfs ] && [ "$(stat -c %a "$D/sessions")" = 700 ] &&
	pass "the socket: 0666 in a 0711 directory of the session's own tmpfs, under the 0700 sessions directory" ||
	fail "the socket: 0666 in a 0711 directory of the session's own tmpfs, under the 0700 sessions directory" "$(ls -la "$D/sessions" "$D/sessions/$S.egress/" 2>&1 | tr '\n' ' ')"

# --- the sandbox dies: a new one gets the proxy again ------------------------------
pid="$(sandbox_init_pid "ws-$S")"
[ -n "$pid" ] && kill -9 "$pid"
wait_state "$S" review 90
log="$(session_log "$S")"
n_plain="$(echo "$log" | grep -c '^stdout plain egress-ok$')"
[ "$n_plain" = 2 ] && echo "$log" | grep -q '^stdout attempt-done$' &&
	pass "a re-provisioned sandbox reaches the allowed host again" ||
	fail "a re-provisioned sandbox reaches the allowed host again" "plain lines: $n_plain; $(echo "$log" | tail -4 | tr '\n' ' ')"

# --- a follow-up in the kept sandbox: the relay is still there -------------------
api POST "/api/v1/sessions/$S/messages" '{"text": "again"}'
wait_turns "$S" 2 60
wait_state "$S" review 60
n_plain="$(session_log "$S" | grep -c '^stdout plain egress-ok$')"
[ "$n_plain" = 3 ] && pass "a follow-up in the same sandbox still reaches the allowed host" ||
	fail "a follow-up in the same sandbox still reaches the allowed host" "plain lines: $n_plain"

# --- no allowlist: no proxy, no relay ---------------------------------------------
S2="$(submit plain "no egress" 'echo "proxy=${HTTP_PROXY:-none}"; ls /run/warren-egress 2>&1 | head -1; curl -s --max-time 5 -x http://127.0.0.1:3128 http://allowed.test/ >/dev/null; echo "relay rc=$?"')"
wait_state "$S2" review 60
log="$(session_log "$S2")"
echo "$log" | grep -q '^stdout proxy=none$' && echo "$log" | grep -q '^stdout relay rc=7$' && [ ! -e "$D/sessions/$S2.egress" ] &&
	pass "a session without egress has no proxy and no relay" ||
	fail "a session without egress has no proxy and no relay" "$(echo "$log" | tail -4 | tr '\n' ' ')"

# --- the socket directory goes with the sandbox -----------------------------------
api POST "/api/v1/sessions/$S/cancel"
for _ in $(seq 1 50); do [ -e "$D/sessions/$S.egress" ] || break; sleep 0.1; done
[ ! -e "$D/sessions/$S.egress" ] && pass "the socket and its directory go with the sandbox" ||
	fail "the socket and its directory go with the sandbox" "$(ls -la "$D/sessions/$S.egress" 2>&1)"

server_stop
pgrep -f "warren-egress-relay" >/dev/null && fail "no relay left after the server stops" "$(pgrep -af warren-egress-relay)" ||
	pass "no relay left after the server stops"

# --- the decisions are in the session's tamper-evident audit log ----------------
out="$("$WARREN" audit verify "$S" --data "$D" 2>&1)"
echo "$out" | grep -q "chain intact" && echo "$out" | grep -q "egress" &&
	pass "egress decisions are in the audit log, and it verifies" ||
	fail "egress decisions are in the audit log, and it verifies" "$(echo "$out" | tail -5 | tr '\n' ' ')"

# --- the snapshot build the server ran had the spec's hosts, under its rules ----
jq -e --arg self "127.0.0.1:$PORT" '.self == $self and .allow_addresses == ["127.0.0.1/32"]' "$D/build-egress.json" >/dev/null 2>&1 &&
	[ "$(stat -c %a "$D/build-egress.json")" = 600 ] &&
	pass "the server writes its rules for builds, with itself as self" ||
	fail "the server writes its rules for builds, with itself as self" "$(cat "$D/build-egress.json" 2>&1)"
grep -qs "egress 5 hosts through the build's proxy" "$D"/logs/build-r-*.log &&
	pass "the server's snapshot build ran with the build's proxy" ||
	fail "the server's snapshot build ran with the build's proxy" "$(cat "$D"/logs/build-r-*.log 2>&1 | head -5)"
