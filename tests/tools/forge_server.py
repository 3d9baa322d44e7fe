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
import os
import sys
from urllib.parse import parse_qs, urlsplit

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import standin  # noqa: E402

DOCS = "https://docs.github.com/rest"


class State:
    def __init__(self, routes, log_path, token):
        self.routes = routes
        self.log = standin.RequestLog(log_path)
        self.token = token


class Handler(standin.Handler):
    server_version = "forge_server/1"

    def send_message(self, status, message):
        self.send_json(status, {"message": message,
                                "documentation_url": DOCS})

    def handle_any(self):
        state = self.server.state
        body = self.read_body()
        split = urlsplit(self.path)
        query = {name: values[0] if len(values) == 1 else values
                 for name, values in parse_qs(split.query,
                                              keep_blank_values=True).items()}
        state.log.write({"method": self.command,
                         "path": split.path,
                         "query": query,
                         "target": self.path,
                         "headers": dict(self.headers.items()),
                         "authorization": self.headers.get("Authorization"),
                         "body": body})
        if not self.authorized(state.token):
            self.send_message(401, "Bad credentials")
            return
        route = "%s %s" % (self.command, split.path)
        if not state.routes.knows(route):
            self.send_message(404, "Not Found")
            return
        entry = state.routes.take(route)
        if entry is None:
            self.send_message(400, "forge_server: the recording has no "
                              "response left for " + route)
            return
        status = entry.get("status", 200)
        if status >= 400 and "body" not in entry:
            # an error status without a body gets GitHub's kind of one
            entry = dict(entry, body={"message": "recorded HTTP %d" % status,
                                      "documentation_url": DOCS})
        self.send_entry(entry, "application/json")

    do_GET = handle_any
    do_POST = handle_any
    do_PATCH = handle_any
    do_PUT = handle_any
    do_DELETE = handle_any


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--recording", required=True)
    ap.add_argument("--log")
    ap.add_argument("--require-token")
    args = ap.parse_args()
    with open(args.recording, encoding="utf-8") as f:
        routes = json.load(f)["routes"]
    routes = standin.Routes.load(routes, "forge_server")
    standin.serve(args.port, Handler,
                  State(routes, args.log, args.require_token))


if __name__ == "__main__":
    main()
