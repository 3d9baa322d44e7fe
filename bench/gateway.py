#!/usr/bin/env python3
"""bench/gateway.py - the model gateway's added latency (driven by
bench/gateway.sh).

  gateway.py latency GATEWAY_PORT DIRECT_PORT N
      On the host: per mode, N iterations, each one call straight to the
      stand-in (127.0.0.1:DIRECT_PORT, with the real key, $BENCH_KEY) and
      one through the gateway (127.0.0.1:GATEWAY_PORT, warren-relay on the
      session's socket, with the turn's token, $BENCH_TOKEN), alternating,
      the same request bytes but for the Authorization header. Modes: Chat
      Completions and Responses; a new connection per call or one kept
      alive per path; not streamed (time to the last byte of the answer)
      or streamed (time to the first byte of the body, the first event).
      Prints per mode the medians and p90 of each path, the added median
      (gateway - direct) and PASS/MISS against the 1 ms target; then
      "SUMMARY ..." lines for the script.
  gateway.py through BASE_URL N
      Inside the sandbox (a command agent, token in $OPENAI_API_KEY): the
      gateway path alone through the sandbox's own relay, Chat Completions,
      the same four modes; medians and p90.

A call's time starts before the connect (new connection) or before the
request's first byte (kept alive). The client is one plain-socket HTTP/1.1
reader: Content-Length and chunked bodies; the first body byte of a chunked
answer is its first chunk's first data byte.
"""
import json
import os
import socket
import statistics
import sys
import time
from urllib.parse import urlsplit

TARGET_MS = 1.0
WARMUP = 10


def body_of(wire, stream):
    if wire == "chat":
        doc = {"model": "bench", "messages": [{"role": "user", "content": "hi"}]}
        if stream:
            # what the gateway asks of a Chat Completions stream anyway
            doc["stream"] = True
            doc["stream_options"] = {"include_usage": True}
        return "/v1/chat/completions", json.dumps(doc).encode()
    doc = {"model": "bench", "input": "hi"}
    if stream:
        doc["stream"] = True
    return "/v1/responses", json.dumps(doc).encode()


def request_bytes(path, body, bearer):
    return (b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            % (path.encode(), bearer.encode(), len(body)) + body)


class Conn:
    """One HTTP/1.1 connection, kept or not."""

    def __init__(self, port):
        self.port = port
        self.sock = None
        self.buf = b""

    def open(self):
        self.sock = socket.create_connection(("127.0.0.1", self.port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self):
        if self.sock:
            self.sock.close()
        self.sock = None

    def fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed by port %d" % self.port)
        self.buf += chunk

    def take(self, n):
        while len(self.buf) < n:
            self.fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def line(self):
        while b"\r\n" not in self.buf:
            self.fill()
        out, self.buf = self.buf.split(b"\r\n", 1)
        return out

    def call(self, request):
        """(seconds to the first body byte, seconds to the last, status,
        whether the server keeps the connection)"""
        self.sock.sendall(request)
        while b"\r\n\r\n" not in self.buf:
            self.fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        status = int(lines[0].split()[1])
        hdr = {}
        for h in lines[1:]:
            k, _, v = h.partition(b":")
            hdr[k.strip().lower()] = v.strip().lower()
        first = None
        if hdr.get(b"transfer-encoding") == b"chunked":
            while True:
                size = int(self.line().split(b";")[0], 16)
                if size == 0:
                    while self.line():  # trailers, then the empty line
                        pass
                    break
                if first is None:
                    while not self.buf:
                        self.fill()
                    first = time.perf_counter()
                self.take(size)
                self.take(2)
        else:
            n = int(hdr.get(b"content-length", b"0"))
            if n:
                while not self.buf:
                    self.fill()
                first = time.perf_counter()
            self.take(n)
        last = time.perf_counter()
        keep = hdr.get(b"connection") != b"close" and lines[0].startswith(b"HTTP/1.1")
        return first or last, last, status, keep


class Path:
    """One way to the model: a port, a bearer, and a connection kept or not."""

    def __init__(self, port, bearer, keep):
        self.port, self.bearer, self.keep = port, bearer, keep
        self.conn = Conn(port)

    def once(self, request, stream):
        t0 = time.perf_counter()
        if not self.keep or self.conn.sock is None:
            self.conn.open()
            if self.keep:
                t0 = time.perf_counter()  # the first call of a kept one pays no connect
        first, last, status, kept = self.conn.call(request)
        if status != 200:
            raise RuntimeError("status %d from port %d" % (status, self.port))
        if not self.keep or not kept:
            self.conn.close()
        return (first if stream else last) - t0


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * p))]


MODES = [(wire, keep, stream) for wire in ("chat", "responses")
         for keep in (False, True) for stream in (False, True)]


def mode_name(wire, keep, stream):
    return "%s %s %s" % (wire, "keep-alive" if keep else "new-conn",
                         "ttfb" if stream else "total")


def latency(gw_port, direct_port, n):
    key, token = os.environ["BENCH_KEY"], os.environ["BENCH_TOKEN"]
    print("%-29s %17s %17s %9s" % ("mode (n=%d each)" % n, "direct med (p90)",
                                   "gateway med (p90)", "added"))
    summary = []
    for wire, keep, stream in MODES:
        path, body = body_of(wire, stream)
        d_req, g_req = request_bytes(path, body, key), request_bytes(path, body, token)
        direct, gateway = Path(direct_port, key, keep), Path(gw_port, token, keep)
        d, g = [], []
        for i in range(WARMUP + n):
            a, b = direct.once(d_req, stream), gateway.once(g_req, stream)
            if i >= WARMUP:
                d.append(a)
                g.append(b)
        direct.conn.close()
        gateway.conn.close()
        md, mg = statistics.median(d) * 1e3, statistics.median(g) * 1e3
        added = mg - md
        verdict = "PASS" if added <= TARGET_MS else "MISS"
        name = mode_name(wire, keep, stream)
        print("%-29s %7.3f (%7.3f) %7.3f (%7.3f) %6.3f ms  %s" % (
            name, md, pct(d, 0.9) * 1e3, mg, pct(g, 0.9) * 1e3, added, verdict))
        summary.append("SUMMARY %s|%.3f|%.3f|%.3f|%.3f|%.3f|%s" % (
            name, md, pct(d, 0.9) * 1e3, mg, pct(g, 0.9) * 1e3, added, verdict))
    for s in summary:
        print(s)


def through(base_url, n):
    token = os.environ["OPENAI_API_KEY"]
    port = urlsplit(base_url).port
    for wire, keep, stream in MODES:
        if wire != "chat":
            continue
        path, body = body_of(wire, stream)
        req = request_bytes(path, body, token)
        p = Path(port, token, keep)
        g = [p.once(req, stream) for _ in range(WARMUP + n)][WARMUP:]
        p.conn.close()
        print("inside the sandbox: %-25s n=%d gateway median %.3f ms (p90 %.3f)"
              % (mode_name(wire, keep, stream), n, statistics.median(g) * 1e3,
                 pct(g, 0.9) * 1e3))


def main():
    sys.stdout.reconfigure(line_buffering=True)
    if len(sys.argv) == 5 and sys.argv[1] == "latency":
        latency(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    elif len(sys.argv) == 4 and sys.argv[1] == "through":
        through(sys.argv[2], int(sys.argv[3]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
