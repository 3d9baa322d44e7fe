"""registry_standin.py - a STAND-IN for an OCI registry behind bearer token
auth, and its token server, for tests/integration/blobs_registry.sh.

Not a registry: just enough of the distribution API, in memory, for the
client in src/blobs/ (blobs: HEAD, GET, POST uploads/, PATCH, PUT ?digest=;
manifests: PUT, GET, DELETE; tags/list), every request wanting
"Authorization: Bearer TOKEN" for its scope, else a 401 with
WWW-Authenticate: Bearer realm=".../token",service="standin",scope="...".
GET /token (HTTP basic, --user/--password) gives a token for the scope
asked, said valid --expires seconds (honoured --grace more). With --corrupt, a blob's GET serves its
bytes with the first one changed (the client must refuse them); with
--foreign-location, upload locations point at another host (the client
must not follow them with its credentials); with --tags-page N, tag lists
come N tags a page, each pointing to the next with a Link header.

  python3 registry_standin.py --user U --password P [--expires S] [--grace S]
      [--corrupt] [--foreign-location] [--tags-page N] --log FILE

Prints its port on stdout's first line (standin.serve). Each request is one
JSON line in the log: {"method", "path", "status"}. Python 3 stdlib only.
"""

import argparse
import hashlib
import json
import re
import secrets
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, __import__("os").path.dirname(__file__))
import standin  # noqa: E402

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"


class State:
    def __init__(self, args):
        self.args = args
        self.log = standin.RequestLog(args.log)
        self.lock = threading.Lock()
        self.blobs = {}      # digest -> bytes
        self.uploads = {}    # id -> bytearray
        self.manifests = {}  # digest -> bytes
        self.tags = {}       # tag -> digest
        self.tokens = {}     # token -> (scope, expiry)


class Handler(standin.Handler):
    server_version = "registry-standin"

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def answer(self, status, data=b"", headers=None,
               content_type="application/json"):
        st = self.server.state
        st.log.write({"method": self.command, "path": self.path,
                      "status": status})
        if self.command == "HEAD":
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, str(value))
            self.end_headers()
            return
        self.send_body(status, data, content_type, headers)

    def error(self, status, code, message, headers=None):
        doc = {"errors": [{"code": code, "message": message}]}
        self.answer(status, json.dumps(doc).encode(), headers)

    # ---- the token server -------------------------------------------------

    def token(self, query):
        st = self.server.state
        if not self.basic_auth_ok(st.args.user, st.args.password):
            return self.error(401, "UNAUTHORIZED", "bad credentials",
                              {"WWW-Authenticate": 'Basic realm="standin"'})
        scope = query.get("scope", [""])[0]
        if query.get("service", [""])[0] != "standin" or not scope:
            return self.error(400, "DENIED", "service or scope missing")
        tok = secrets.token_hex(16)
        with st.lock:
            st.tokens[tok] = (scope, time.time() + st.args.expires +
                              st.args.grace)
        self.answer(200, json.dumps({"token": tok,
                                     "expires_in": st.args.expires}).encode())

    def allowed(self, name, action):
        st = self.server.state
        auth = self.headers.get("Authorization", "")
        tok = auth[7:] if auth.startswith("Bearer ") else None
        with st.lock:
            scope, expiry = st.tokens.get(tok, ("", 0))
        if expiry > time.time():
            granted = scope.split(":")
            if len(granted) == 3 and granted[1] == name and \
                    action in granted[2].split(","):
                return True
        need = {"pull": "pull", "push": "pull,push",
                "delete": "delete"}[action]
        host = self.headers.get("Host")
        self.error(401, "UNAUTHORIZED", "authentication required", {
            "WWW-Authenticate":
                'Bearer realm="http://%s/token",service="standin",'
                'scope="repository:%s:%s"' % (host, name, need)})
        return False

    # ---- the registry -----------------------------------------------------

    def route(self):
        st = self.server.state
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        if url.path == "/token" and self.command == "GET":
            return self.token(query)
        m = re.fullmatch(r"/v2/(.+?)/(blobs/uploads/|blobs/uploads/[0-9a-f]+"
                         r"|blobs/[^/]+|manifests/[^/]+|tags/list)", url.path)
        if not m:
            return self.error(404, "NAME_UNKNOWN", "no such route")
        name, rest = m.group(1), m.group(2)
        action = "pull" if self.command in ("GET", "HEAD") else \
            "delete" if self.command == "DELETE" else "push"
        data = self.body() if self.command in ("PUT", "PATCH", "POST") \
            else b""
        if not self.allowed(name, action):
            return
        if rest == "blobs/uploads/" and self.command == "POST":
            uid = secrets.token_hex(8)
            with st.lock:
                st.uploads[uid] = bytearray()
            loc = "/v2/%s/blobs/uploads/%s" % (name, uid)
            if st.args.foreign_location:
                loc = "http://elsewhere.invalid" + loc
            return self.answer(202, b"", {"Location": loc})
        if rest.startswith("blobs/uploads/"):
            uid = rest.split("/")[-1]
            with st.lock:
                buf = st.uploads.get(uid)
            if buf is None:
                return self.error(404, "BLOB_UPLOAD_UNKNOWN", "no upload")
            buf += data
            loc = "/v2/%s/blobs/uploads/%s" % (name, uid)
            if self.command == "PATCH":
                return self.answer(202, b"", {"Location": loc})
            digest = query.get("digest", [""])[0]
            if "sha256:" + hashlib.sha256(buf).hexdigest() != digest:
                return self.error(400, "DIGEST_INVALID",
                                  "provided digest did not match")
            with st.lock:
                st.blobs[digest] = bytes(buf)
                del st.uploads[uid]
            return self.answer(201, b"", {"Docker-Content-Digest": digest})
        if rest.startswith("blobs/"):
            digest = rest[6:]
            blob = st.blobs.get(digest)
            if blob is None:
                return self.error(404, "BLOB_UNKNOWN", "blob unknown")
            if st.args.corrupt and blob:
                blob = bytes([blob[0] ^ 1]) + blob[1:]
            return self.answer(200, blob, {"Docker-Content-Digest": digest},
                               "application/octet-stream")
        if rest == "tags/list":
            # pages of --tags-page tags, the next one in a Link header
            last = query.get("last", [""])[0]
            tags = [t for t in sorted(st.tags) if t > last]
            page = st.args.tags_page or len(tags)
            headers = {}
            if len(tags) > page:
                headers["Link"] = '</v2/%s/tags/list?n=%d&last=%s>; ' \
                    'rel="next"' % (name, page, tags[page - 1])
            return self.answer(200, json.dumps(
                {"name": name, "tags": tags[:page]}).encode(), headers)
        ref = rest[10:]
        if self.command == "PUT":
            digest = "sha256:" + hashlib.sha256(data).hexdigest()
            with st.lock:
                st.manifests[digest] = data
                if not ref.startswith("sha256:"):
                    st.tags[ref] = digest
            return self.answer(201, b"", {"Docker-Content-Digest": digest})
        digest = st.tags.get(ref, ref)
        if digest not in st.manifests:
            return self.error(404, "MANIFEST_UNKNOWN", "manifest unknown")
        if self.command == "DELETE":
            with st.lock:
                del st.manifests[digest]
                for t in [t for t, d in st.tags.items() if d == digest]:
                    del st.tags[t]
            return self.answer(202)
        return self.answer(200, st.manifests[digest],
                           {"Docker-Content-Digest": digest}, MANIFEST_TYPE)

    do_GET = do_HEAD = do_POST = do_PATCH = do_PUT = do_DELETE = route


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--expires", type=int, default=300)
    # how much longer than it says a token is honoured: a client that
    # used an expired one would go unnoticed, the log shows it did not
    p.add_argument("--grace", type=int, default=0)
    p.add_argument("--corrupt", action="store_true")
    p.add_argument("--foreign-location", action="store_true")
    p.add_argument("--tags-page", type=int, default=0)
    p.add_argument("--log")
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args()
    standin.serve(args.port, Handler, State(args))


if __name__ == "__main__":
    main()
