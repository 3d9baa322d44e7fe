#!/bin/bash
# No client can make the API unusable for the others: while one address
# holds 1,100 connections that each send a header line every 2 s and never
# finish (the slow-header attack), another client's authenticated requests
# are answered in under a second; the server keeps at most
# api.max_per_client connections of one address, and cuts a connection
# whose headers are not complete within api.header_timeout (or whose body is
# not complete within api.body_timeout), whatever it keeps sending.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../integration/control_lib.sh"

echo '{"api": {"header_timeout": "3s", "body_timeout": "3s"}}' >"$TEST_TMP/serve.json"
server_start "$TEST_TMP/data" "$TEST_TMP/serve.json"
[ -n "$TOKEN" ] || fail "the server starts" "$(tail -5 "$SERVER_LOG")"

python3 "$ROOT_DIR/tests/tools/slow_clients.py" --port "$PORT" --connections 1100 \
	--interval 2 --duration 14 >"$TEST_TMP/attack.json" 2>"$TEST_TMP/attack.err" &
ATTACK=$!
sleep 1.5
# the server's established connections from the attacker's address, as the
# kernel lists them (/proc/net/tcp: local port, remote 127.0.0.1, state 01)
held="$(python3 - "$PORT" <<'PY'
import sys
port = "%04X" % int(sys.argv[1])
n = 0
for line in open("/proc/net/tcp").read().splitlines()[1:]:
    f = line.split()
    if f[1].endswith(":" + port) and f[2].startswith("0100007F:") and f[3] == "01":
        n += 1
print(n)
PY
)"
[ "$held" -ge 1 ] && [ "$held" -le 64 ] && pass "one address holds at most api.max_per_client connections ($held while it tries 1,100)" ||
	fail "one address holds at most api.max_per_client connections" "held $held"
sleep 1.5
worst=0
ok=0
for i in $(seq 1 8); do
	t="$(curl -s -o /dev/null -w '%{http_code} %{time_total}' --max-time 5 --interface 127.0.0.2 \
		-H "Authorization: Bearer $TOKEN" "$URL/api/v1/healthz")"
	code="${t% *}"
	secs="${t#* }"
	[ "$code" = 200 ] && awk -v s="$secs" 'BEGIN {exit !(s < 1.0)}' && ok=$((ok + 1))
	worst="$(awk -v a="$worst" -v b="$secs" 'BEGIN {print (b > a ? b : a)}')"
	sleep 1
done
[ "$ok" = 8 ] && pass "under 1,100 slow connections another client is answered in under a second (worst ${worst}s)" ||
	fail "under 1,100 slow connections another client is answered in under a second" "$ok of 8 fast, worst ${worst}s"

# trickle SOURCE HEAD CHUNK: sends HEAD from SOURCE, then CHUNK every
# 0.5 s for at most 10 s; prints "cut SECONDS" when the server closes the
# connection, "open 0" if it never does
trickle() {
	python3 - "$PORT" "$1" "$2" "$3" <<'PY'
import socket, sys, time
s = socket.socket(); s.bind((sys.argv[2], 0)); s.connect(("127.0.0.1", int(sys.argv[1])))
s.sendall(sys.argv[3].encode().decode("unicode_escape").encode())
chunk = sys.argv[4].encode().decode("unicode_escape").encode()
t0 = time.monotonic(); s.settimeout(0.5); cut = None
while time.monotonic() - t0 < 10:
    try:
        s.sendall(chunk)
        if s.recv(1) == b"":
            cut = time.monotonic() - t0; break
    except socket.timeout:
        pass
    except OSError:
        cut = time.monotonic() - t0; break
print("cut" if cut is not None else "open", round(cut or 0, 1))
PY
}
# one slow connection of a third address: cut at the header deadline
read -r what secs < <(trickle 127.0.0.3 'GET /api/v1/healthz HTTP/1.1\r\nHost: x\r\n' 'X-Slow: 1\r\n')
[ "$what" = cut ] && awk -v s="$secs" 'BEGIN {exit !(s >= 2.0 && s <= 5.0)}' &&
	pass "a connection still sending headers is cut at the header deadline (${secs}s of 3s)" ||
	fail "a connection still sending headers is cut at the header deadline" "$what $secs"
# a body that trickles: cut at the body deadline
read -r what secs < <(trickle 127.0.0.4 "POST /api/v1/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer $TOKEN\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{" ' ')
[ "$what" = cut ] && awk -v s="$secs" 'BEGIN {exit !(s >= 2.0 && s <= 5.0)}' &&
	pass "a body that trickles is cut at the body deadline (${secs}s of 3s)" ||
	fail "a body that trickles is cut at the body deadline" "$what $secs"

wait "$ATTACK"
opened="$(jq -r .opened "$TEST_TMP/attack.json" 2>/dev/null)"
left="$(jq -r .open_at_end "$TEST_TMP/attack.json" 2>/dev/null)"
[ "$opened" -gt 64 ] 2>/dev/null && [ "$left" = 0 ] && pass "the attacker's connections were closed by the server ($opened opened, $left open at the end)" ||
	fail "the attacker's connections were closed by the server" "$(cat "$TEST_TMP/attack.json" "$TEST_TMP/attack.err")"
# a normal request still works afterwards, from the attacker's address too
code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -H "Authorization: Bearer $TOKEN" "$URL/api/v1/healthz")"
[ "$code" = 200 ] && pass "the server answers normally after the attack" || fail "the server answers normally after the attack" "$code"
server_stop
