"""standin.py - what the test stand-in servers share.

chat_server.py, forge_server.py and slack_server.py are small local servers
that play a remote API's part from a recording, so that Warren's clients can
be tested without a network. Each keeps its own protocol, recording format
and log record; this module holds what they do alike: the server and the
request handler's plumbing, the --log file, the per-route script of entries
(forge_server.py and slack_server.py) and the startup that prints the port.
Python 3 standard library only.
"""

import base64
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Server(ThreadingHTTPServer):
    """A threading HTTP server on which a client hanging up is not news."""

    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # a client that gave up (timeouts, size caps) is not news
        if not isinstance(sys.exc_info()[1], (BrokenPipeError,
                                              ConnectionResetError)):
            super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    """The request handler's plumbing: keep-alive HTTP/1.1 without Nagle's
    delay, nothing written to stdout or stderr, and bodies sent with their
    length. A stand-in's handler sets server_version and, if its API says
    otherwise, json_type."""

    protocol_version = "HTTP/1.1"  # keep-alive, as the real APIs do
    disable_nagle_algorithm = True
    json_type = "application/json; charset=utf-8"

    def log_message(self, fmt, *args):  # quiet: tests read stdout
        pass

    def read_body(self, empty=None):
        """The request's body: parsed JSON, else the text (the client's
        malformed JSON is for a test to see); `empty` when there is none."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return empty
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def authorized(self, token):
        """Whether the request carries "Authorization: Bearer TOKEN" (always,
        when no token is required)."""
        return token is None or \
            self.headers.get("Authorization") == "Bearer " + token

    def basic_auth_ok(self, user, password):
        """Whether the request carries HTTP basic credentials user:password."""
        want = base64.b64encode(("%s:%s" % (user, password)).encode())
        return self.headers.get("Authorization") == "Basic " + want.decode()

    def send_body(self, status, data, content_type, headers=None):
        """An answer of data (bytes), with extra headers {NAME: VALUE}."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, str(value))
        self.end_headers()
        self.wfile.write(data)

    def send_json(self, status, doc, headers=None):
        """An answer of doc as JSON (Content-Type: json_type)."""
        self.send_body(status, json.dumps(doc).encode(), self.json_type,
                       headers)

    def hang_up(self):
        """Close the connection without an answer."""
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def send_entry(self, entry, content_type):
        """Answer with a recorded route ENTRY (see Routes): after "delay"
        seconds, "hang_up" closes without an answer; else "status" (200) with
        "headers" and, as the body, "raw" TEXT as is (Content-Type its
        "content_type", else content_type), "body" as JSON, or nothing (of
        content_type)."""
        if entry.get("delay"):
            time.sleep(float(entry["delay"]))
        status = entry.get("status", 200)
        headers = entry.get("headers") or {}
        if entry.get("hang_up"):
            self.hang_up()
        elif "raw" in entry:
            self.send_body(status, entry["raw"].encode(),
                           entry.get("content_type", content_type), headers)
        elif "body" in entry:
            self.send_json(status, entry["body"], headers)
        else:
            self.send_body(status, b"", content_type, headers)


class RequestLog:
    """The --log file: one JSON line per request, each written whole (under
    a lock, as requests are served in threads); nothing without a path."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()

    def write(self, record):
        if not self.path:
            return
        with self.lock:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")


class Routes:
    """A recording's script of answers per route, as forge_server.py and
    slack_server.py read it: {"METHOD /path": [ENTRY, ...]}, where each
    request on a route takes the route's next ENTRY, and a last ENTRY with
    "repeat": true is served for every later request too."""

    def __init__(self, routes):
        self.routes = routes
        self.next = {route: 0 for route in routes}
        self.lock = threading.Lock()

    @classmethod
    def load(cls, routes, prog):
        """Routes for a recording's "routes", or exit saying what is wrong
        (prog: the stand-in's name) when it is not a map of lists."""
        if not isinstance(routes, dict) or \
                not all(isinstance(v, list) for v in routes.values()):
            sys.exit("%s: routes must map 'METHOD /path' to lists" % prog)
        return cls(routes)

    def knows(self, route):
        """Whether the recording names the route."""
        return route in self.routes

    def take(self, route):
        """The route's next ENTRY; None when the route has none left (or the
        recording does not name it)."""
        with self.lock:
            entries = self.routes.get(route)
            if not entries:
                return None
            i = self.next[route]
            if i >= len(entries):
                return entries[-1] if entries[-1].get("repeat") else None
            self.next[route] = i + 1
            return entries[i]


def serve(port, handler, state):
    """Listen on 127.0.0.1:port (0: a free port), print the port alone on
    stdout's first line once listening, and serve until interrupted. The
    handler reaches `state` as self.server.state."""
    server = Server(("127.0.0.1", port), handler)
    server.state = state
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
