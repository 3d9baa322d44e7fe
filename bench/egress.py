#!/usr/bin/env python3
"""bench/egress.py - the egress proxy's cost (driven by bench/egress.sh).

  egress.py serve PORT
      an origin server on 127.0.0.1:PORT: GET /small (13 bytes) and
      GET /big (1 MiB), HTTP/1.0, one request per connection; any other
      connection is closed once its head is read or it hangs up
  egress.py latency PROXY_PORT ORIGIN_PORT N
      N small requests and N/10 1 MiB requests, each on a new connection,
      alternating one direct (127.0.0.1:ORIGIN_PORT) and one through the
      proxy (http://bench.test:ORIGIN_PORT/ via 127.0.0.1:PROXY_PORT);
      prints medians and p90 of each and the difference / ratio
  egress.py through PROXY_PORT ORIGIN_PORT N
      only the proxied small requests (from inside a sandbox): median, p90
  egress.py rate PROXY_PORT ORIGIN_PORT SECONDS PROCS
      CONNECT tunnels set up per second (CONNECT, wait for the 200,
      close) by PROCS processes, against direct TCP connections per second
"""
import multiprocessing
import socket
import socketserver
import statistics
import sys
import time

SMALL = b"egress-bench\n"
BIG = b"x" * (1 << 20)


class Origin(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
    request_queue_size = 1024


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        data = b""
        while b"\r\n\r\n" not in data and len(data) < 65536:
            chunk = self.request.recv(65536)
            if not chunk:
                return
            data += chunk
        line = data.split(b"\r\n", 1)[0]
        body = BIG if b" /big " in line else SMALL
        self.request.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)


def serve(port):
    with Origin(("127.0.0.1", port), Handler) as srv:
        srv.serve_forever()


def fetch(port, request):
    """One request on a new connection; seconds until the last byte."""
    t0 = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(request)
    n = 0
    while True:
        chunk = s.recv(262144)
        if not chunk:
            break
        n += len(chunk)
    s.close()
    dt = time.perf_counter() - t0
    if n < 13:
        raise RuntimeError("short answer (%d bytes) from port %d" % (n, port))
    return dt


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * p))]


def requests(origin, path):
    direct = b"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % path
    proxied = b"GET http://bench.test:%d%s HTTP/1.1\r\nHost: bench.test\r\n\r\n" % (origin, path)
    return direct, proxied


def latency(proxy, origin, n):
    for path, count in ((b"/small", n), (b"/big", max(10, n // 10))):
        direct_req, proxied_req = requests(origin, path)
        d, p = [], []
        for _ in range(5):  # warm up both paths
            fetch(origin, direct_req)
            fetch(proxy, proxied_req)
        for _ in range(count):
            d.append(fetch(origin, direct_req))
            p.append(fetch(proxy, proxied_req))
        md, mp = statistics.median(d) * 1e3, statistics.median(p) * 1e3
        print("%-6s n=%-5d direct median %.3f ms (p90 %.3f)   proxy median %.3f ms (p90 %.3f)"
              "   added %.3f ms   ratio %.2f" % (path.decode(), count, md, pct(d, 0.9) * 1e3, mp,
                                                 pct(p, 0.9) * 1e3, mp - md, mp / md))


def through(proxy, origin, n):
    _, proxied_req = requests(origin, b"/small")
    for _ in range(5):
        fetch(proxy, proxied_req)
    p = [fetch(proxy, proxied_req) for _ in range(n)]
    print("inside the sandbox: n=%d proxy median %.3f ms (p90 %.3f)"
          % (n, statistics.median(p) * 1e3, pct(p, 0.9) * 1e3))


def tunnels(args):
    """(tunnels set up, CONNECTs that got no 200)"""
    proxy, origin, seconds = args
    req = b"CONNECT bench.test:%d HTTP/1.1\r\n\r\n" % origin
    n, failed, end = 0, 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        s = socket.create_connection(("127.0.0.1", proxy))
        s.sendall(req)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(4096)
            if not chunk:
                break
            head += chunk
        s.close()
        if head.startswith(b"HTTP/1.1 200"):
            n += 1
        else:
            failed += 1
    return n, failed


def connects(args):
    _, origin, seconds = args
    n, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        s = socket.create_connection(("127.0.0.1", origin))
        s.close()
        n += 1
    return n


def rate(proxy, origin, seconds, procs):
    with multiprocessing.Pool(procs) as pool:
        c = sum(pool.map(connects, [(proxy, origin, seconds)] * procs))
        res = pool.map(tunnels, [(proxy, origin, seconds)] * procs)
    t, failed = sum(r[0] for r in res), sum(r[1] for r in res)
    print("tunnels: %d in %.0f s by %d processes: %.0f/s, %d refused   (direct TCP connections: %.0f/s)"
          % (t, seconds, procs, t / seconds, failed, c / seconds))


def main():
    sys.stdout.reconfigure(line_buffering=True)
    mode, args = sys.argv[1], [int(a) for a in sys.argv[2:]]
    if mode == "serve":
        serve(*args)
    elif mode == "latency":
        latency(*args)
    elif mode == "through":
        through(*args)
    elif mode == "rate":
        rate(*args)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
