#!/usr/bin/env python3
"""slack_server.py - a test stand-in for Slack's Web API and response URLs.

A small local server that answers what Warren's Slack client
(src/notify/slack_client.c) sends - chat.postMessage, chat.postEphemeral
and a slash command's response_url POSTs - with recorded or default
answers, and records every request, so that the posts can be tested
without a network, a workspace or a token. Python 3 standard library only.

    slack_server.py --port 0 [--recording FILE] [--log FILE]
                    [--require-token TOKEN]

It listens on 127.0.0.1 (--port 0: a free port, printed alone on the first
line of stdout once it listens). Warren's "slack.api_url" is then
http://127.0.0.1:PORT/api, and a response_url is any other path of the same
server, say http://127.0.0.1:PORT/commands/T1/1/abc.

Default answers, the shape Slack's are:

    POST /api/chat.postMessage     {"ok": true, "channel": C, "ts": TS,
                                    "message": {"text", "thread_ts"?}}
    POST /api/chat.postEphemeral   {"ok": true, "message_ts": TS}
    POST any other path            200 "ok" (text/html, as response URLs)

A Web API call without "Authorization: Bearer TOKEN" (--require-token)
gets Slack's 200 {"ok": false, "error": "invalid_auth"}; one without a
channel or text, {"ok": false, "error": "no_text"} or "channel_not_found".

The recording (optional) scripts answers per route, as
tests/tools/forge_server.py does:

    {"routes": {"POST /api/chat.postMessage": [ENTRY, ...]}}

Each request on a route takes its next ENTRY; once they are used up (and
on routes the recording does not name) the default answer is given. An
ENTRY is {"status": 200, "body": {...}} (JSON), {"raw": TEXT}, plus
"headers": {"Retry-After": "1"}, "delay": SECONDS, "repeat": true (the
last entry, for every later request), or {"hang_up": true}. Slack's
failures, written as entries:

    rate limited    {"status": 429, "headers": {"Retry-After": "1"},
                     "body": {"ok": false, "error": "ratelimited"}}
    trouble         {"status": 503}
    not in channel  {"body": {"ok": false, "error": "not_in_channel"}}
    expired url     {"status": 404, "raw": "expired_url"}

--log FILE gets one JSON line per request, whatever its fate: {"method",
"path", "headers", "authorization", "content_type", "body"} with the body
parsed (the text when it is not JSON), so a test can check what Warren
sent.

    slack_server.py sign SECRET TIMESTAMP < BODY

prints the v0 signature Slack would send with BODY (X-Slack-Signature):
"v0=" + hex HMAC-SHA256(SECRET, "v0:" + TIMESTAMP + ":" + BODY).
"""

import argparse
import hashlib
import hmac
import itertools
import json
import os
import sys
import threading
import time
from urllib.parse import urlsplit

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import standin  # noqa: E402


def sign(secret, timestamp, body):
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


class State:
    def __init__(self, routes, log_path, token):
        self.routes = routes
        self.log = standin.RequestLog(log_path)
        self.token = token
        self.lock = threading.Lock()
        self.counter = itertools.count(1)

    def ts(self):
        with self.lock:
            return "%d.%06d" % (int(time.time()), next(self.counter))


class Handler(standin.Handler):
    server_version = "slack_server/1"

    def do_POST(self):
        state = self.server.state
        body = self.read_body()
        path = urlsplit(self.path).path
        state.log.write({"method": "POST", "path": path,
                         "headers": dict(self.headers.items()),
                         "authorization": self.headers.get("Authorization"),
                         "content_type": self.headers.get("Content-Type"),
                         "body": body})
        entry = state.routes.take("POST " + path)
        if entry is not None:
            self.send_entry(entry, "text/plain")
        elif path.startswith("/api/"):
            self.web_api(path[len("/api/"):], body)
        else:
            # a response_url
            self.send_body(200, b"ok", "text/html")

    def web_api(self, method, body):
        state = self.server.state
        if not self.authorized(state.token):
            self.send_json(200, {"ok": False, "error": "invalid_auth"})
            return
        if not isinstance(body, dict):
            self.send_json(200, {"ok": False, "error": "invalid_json"})
            return
        if method not in ("chat.postMessage", "chat.postEphemeral"):
            self.send_json(200, {"ok": False, "error": "unknown_method"})
            return
        if not body.get("channel"):
            self.send_json(200, {"ok": False, "error": "channel_not_found"})
            return
        if not body.get("text"):
            self.send_json(200, {"ok": False, "error": "no_text"})
            return
        if method == "chat.postEphemeral":
            if not body.get("user"):
                self.send_json(200, {"ok": False, "error": "user_not_found"})
                return
            self.send_json(200, {"ok": True, "message_ts": state.ts()})
            return
        message = {"type": "message", "text": body["text"], "ts": state.ts()}
        if body.get("thread_ts"):
            message["thread_ts"] = body["thread_ts"]
        self.send_json(200, {"ok": True, "channel": body["channel"],
                             "ts": message["ts"], "message": message})


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "sign":
        if len(sys.argv) != 4:
            sys.exit("usage: slack_server.py sign SECRET TIMESTAMP < BODY")
        print(sign(sys.argv[2], sys.argv[3], sys.stdin.buffer.read()))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--recording")
    ap.add_argument("--log")
    ap.add_argument("--require-token")
    args = ap.parse_args()
    routes = {}
    if args.recording:
        with open(args.recording, encoding="utf-8") as f:
            routes = json.load(f).get("routes", {})
    routes = standin.Routes.load(routes, "slack_server")
    standin.serve(args.port, Handler,
                  State(routes, args.log, args.require_token))


if __name__ == "__main__":
    main()
