#!/usr/bin/env python3
"""forge_server.py - a test stand-in for GitHub's REST API.

A small local server that answers a forge client's requests with recorded
responses, so that Warren's pull requests (src/review/forge.c) can be
tested without a network, a token or a repository on github.com. Python 3
standard library only.

    forge_server.py --port 0 --recording FILE [--log FILE]
                    [--require-token TOKEN]

It listens on 127.0.0.1 (--port 0: a free port, printed alone on the first
line of stdout once it listens); the client's api_url is then
http://127.0.0.1:PORT (any path prefix before /repos/ is kept as part of
the route, so give none).

The recording is JSON, a script of answers per route:

    {"routes": {"POST /repos/octo/hello/pulls": [ENTRY, ...],
                "GET /repos/octo/hello/pulls":  [ENTRY, ...]}}

A route is the method and the path without the query string. Each request
on a route takes that route's next ENTRY, in order (the request's contents
do not choose: a recording is a script). An ENTRY is

    {"status": 201, "body": {...}}          the body as JSON (default
                                            status 200; default body for
                                            an error status GitHub's
                                            {"message", "documentation_url"})
    "headers": {"Retry-After": "1"}         extra response headers
    "delay": SECONDS                        wait before answering
    "repeat": true                          (the last entry) served for
                                            every later request too

and faults:

    {"hang_up": true}                       close without an answer
    {"raw": "TEXT", "status"?: 200}         TEXT as the body, as is

GitHub's answers that a client meets, written as entries:

    201 created      {"status": 201, "body": {"number": 7, "html_url":
                      "https://github.com/octo/hello/pull/7", "url":
                      "https://api.github.com/repos/octo/hello/pulls/7",
                      "state": "open", "head": {"ref": "warren/s1"}, ...}}
    exists           {"status": 422, "body": {"message": "Validation
                      Failed", "errors": [{"resource": "PullRequest",
                      "code": "custom", "message": "A pull request
                      already exists for octo:warren/s1."}]}}
                     then GET .../pulls answers {"status": 200, "body":
                     [the pull request]}
    server trouble   {"status": 500} then the 201
    forbidden        {"status": 403, "body": {"message": "Resource not
                      accessible by integration"}}

A request on a route whose entries are used up gets a 400 saying so; one
on a route the recording does not name gets GitHub's 404 "Not Found".
With --require-token TOKEN a request whose Authorization is not
"Bearer TOKEN" gets GitHub's 401 "Bad credentials" (and takes no entry).
--log FILE gets one JSON line per request, whatever its fate:
{"method", "path", "query": {NAME: VALUE}, "target", "headers": {NAME:
VALUE}, "authorization", "body"} - the query decoded ("target" is the raw
request line's target), the headers as sent, the body parsed (or the text
when it is not JSON, null when empty) - so a test can check what the
client sent.
"""

import argparse
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

DOCS = "https://docs.github.com/rest"


class State:
    def __init__(self, routes, log_path, token):
        self.routes = routes
        self.next = {route: 0 for route in routes}
        self.log_path = log_path
        self.token = token
        self.lock = threading.Lock()

    def take(self, route):
        """The route's next entry; None when the route is unknown, False
        when its entries are used up."""
        with self.lock:
            entries = self.routes.get(route)
            if entries is None:
                return None
            i = self.next[route]
            if i >= len(entries):
                if entries and entries[-1].get("repeat"):
                    return entries[-1]
                return False
            self.next[route] = i + 1
            return entries[i]

    def log(self, record):
        if not self.log_path:
            return
        with self.lock:
            with open(self.log_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as GitHub does
    disable_nagle_algorithm = True
    server_version = "forge_server/1"

    def log_message(self, fmt, *args):  # quiet: tests read stdout
        pass

    def send_body(self, status, data, content_type, headers=None):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, str(value))
        self.end_headers()
        self.wfile.write(data)

    def send_json(self, status, doc, headers=None):
        self.send_body(status, json.dumps(doc).encode(),
                       "application/json; charset=utf-8", headers)

    def send_message(self, status, message):
        self.send_json(status, {"message": message,
                                "documentation_url": DOCS})

    def handle_any(self):
        state = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            body = None
        else:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
        split = urlsplit(self.path)
        query = {name: values[0] if len(values) == 1 else values
                 for name, values in parse_qs(split.query,
                                              keep_blank_values=True).items()}
        state.log({"method": self.command,
                   "path": split.path,
                   "query": query,
                   "target": self.path,
                   "headers": dict(self.headers.items()),
                   "authorization": self.headers.get("Authorization"),
                   "body": body})
        if state.token is not None and \
                self.headers.get("Authorization") != "Bearer " + state.token:
            self.send_message(401, "Bad credentials")
            return
        route = "%s %s" % (self.command, split.path)
        entry = state.take(route)
        if entry is None:
            self.send_message(404, "Not Found")
            return
        if entry is False:
            self.send_message(400, "forge_server: the recording has no "
                              "response left for " + route)
            return
        if entry.get("delay"):
            time.sleep(float(entry["delay"]))
        self.answer(entry)

    def answer(self, entry):
        status = entry.get("status", 200)
        headers = entry.get("headers") or {}
        if entry.get("hang_up"):
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if "raw" in entry:
            self.send_body(status, entry["raw"].encode(),
                           entry.get("content_type", "application/json"),
                           headers)
            return
        if "body" in entry:
            self.send_json(status, entry["body"], headers)
            return
        if status >= 400:
            self.send_json(status, {"message": "recorded HTTP %d" % status,
                                    "documentation_url": DOCS}, headers)
            return
        self.send_body(status, b"", "application/json", headers)

    do_GET = handle_any
    do_POST = handle_any
    do_PATCH = handle_any
    do_PUT = handle_any
    do_DELETE = handle_any


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # a client that gave up (timeouts, size caps) is not news
        if not isinstance(sys.exc_info()[1], (BrokenPipeError,
                                              ConnectionResetError)):
            super().handle_error(request, client_address)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--recording", required=True)
    ap.add_argument("--log")
    ap.add_argument("--require-token")
    args = ap.parse_args()
    with open(args.recording, encoding="utf-8") as f:
        routes = json.load(f)["routes"]
    if not isinstance(routes, dict) or \
            not all(isinstance(v, list) for v in routes.values()):
        sys.exit("forge_server: routes must map 'METHOD /path' to lists")
    server = Server(("127.0.0.1", args.port), Handler)
    server.state = State(routes, args.log, args.require_token)
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
