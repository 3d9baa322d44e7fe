#!/usr/bin/env python3
"""git_http_server.py - a git remote over smart HTTP, as a forge serves one.

A test stand-in for a hosted repository: fetches and clones are anonymous,
pushes need HTTP Basic authentication with the one configured user and
password (as GitHub, GitLab and the like ask for a token). Requests are
served by git's own git-http-backend (CGI). Python 3 standard library
only.

    git_http_server.py --root DIR --port 0 --user NAME --password-file FILE
                       [--log FILE]

It listens on 127.0.0.1 (--port 0: a free port, printed alone on the first
line of stdout once it listens). Repositories are DIR/NAME.git, reached as
http://127.0.0.1:PORT/NAME.git. The log gets one JSON line per request:
{"method", "path", "service", "auth": "none"|"ok"|"bad", "user", "status"}
(never the password), so a test can tell that a push came with the right
credentials.
"""
import argparse
import base64
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit, parse_qs

BACKEND = "/usr/lib/git-core/git-http-backend"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet: the log file says enough
        pass

    def record(self, **fields):
        if not self.server.log_path:
            return
        with self.server.log_lock, open(self.server.log_path, "a") as f:
            f.write(json.dumps(fields, sort_keys=True) + "\n")

    def auth(self):
        """'none', 'ok' or 'bad', and the user named."""
        h = self.headers.get("Authorization", "")
        if not h.startswith("Basic "):
            return "none", None
        try:
            user, _, password = base64.b64decode(h[6:]).decode().partition(":")
        except Exception:
            return "bad", None
        ok = user == self.server.user and password == self.server.password
        return ("ok" if ok else "bad"), user

    def handle_any(self):
        url = urlsplit(self.path)
        service = parse_qs(url.query).get("service", [""])[0]
        if url.path.endswith("/git-receive-pack"):
            service = "git-receive-pack"
        elif url.path.endswith("/git-upload-pack"):
            service = service or "git-upload-pack"
        auth, user = self.auth()
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if service == "git-receive-pack" and auth != "ok":
            self.record(method=self.command, path=url.path, service=service,
                        auth=auth, user=user, status=401)
            msg = b"authentication required\n"
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(msg)))
            self.end_headers()
            self.wfile.write(msg)
            return
        env = {
            "PATH": "/usr/bin:/bin",
            "GIT_PROJECT_ROOT": self.server.root,
            "GIT_HTTP_EXPORT_ALL": "1",
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": "/nonexistent",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": url.path,
            "QUERY_STRING": url.query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(length),
            "REMOTE_ADDR": self.client_address[0],
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
        }
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if auth == "ok":
            env["REMOTE_USER"] = user
        p = subprocess.run([BACKEND], input=body, env=env,
                           capture_output=True)
        head, _, payload = p.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = p.stdout.partition(b"\n\n")
        status = 200
        headers = []
        for line in head.decode("latin-1").splitlines():
            k, _, v = line.partition(":")
            if k.lower() == "status":
                status = int(v.strip().split()[0])
            elif k:
                headers.append((k, v.strip()))
        self.record(method=self.command, path=url.path, service=service,
                    auth=auth, user=user, status=status)
        self.send_response(status)
        for k, v in headers:
            if k.lower() != "content-length":
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = handle_any
    do_POST = handle_any


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--user", required=True)
    ap.add_argument("--password-file", required=True)
    ap.add_argument("--log")
    a = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.root = os.path.abspath(a.root)
    srv.user = a.user
    with open(a.password_file) as f:
        srv.password = f.read().strip()
    srv.log_path = a.log
    srv.log_lock = threading.Lock()
    print(srv.server_address[1], flush=True)
    sys.stdout.close()
    srv.serve_forever()


if __name__ == "__main__":
    main()
