"""token_server.py - a STAND-IN token server for docker-registry's token
auth (distribution's `auth: token`), for tests/integration/blobs_registry.sh.

The real registry sends clients here with a Bearer challenge; this gives
them a JWT it accepts: RS256, signed with --key by `openssl dgst`, the
signing certificate (--cert, which the registry's rootcertbundle holds) in
the header's x5c, claims iss (--issuer), aud (the service asked for), exp
(--expires), and "access" granting whatever repository actions the scope
asks for, to --user with --password (HTTP basic) only.

  python3 token_server.py --key K --cert C --issuer I --user U --password P
      [--expires S] --log FILE

Prints its port on stdout's first line (standin.serve); one JSON line per
request in the log: {"method", "path", "status"}. Python 3 stdlib and the
openssl command.
"""

import argparse
import base64
import json
import os
import ssl
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
import standin  # noqa: E402


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class State:
    def __init__(self, args):
        self.args = args
        self.log = standin.RequestLog(args.log)
        with open(args.cert, encoding="ascii") as f:
            self.cert_der = ssl.PEM_cert_to_DER_cert(f.read())


class Handler(standin.Handler):
    server_version = "token-standin"

    def answer(self, status, doc):
        self.server.state.log.write({"method": self.command,
                                     "path": self.path, "status": status})
        self.send_json(status, doc)

    def do_GET(self):
        st = self.server.state
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        if url.path != "/token":
            return self.answer(404, {"errors": [{"code": "NOT_FOUND"}]})
        if not self.basic_auth_ok(st.args.user, st.args.password):
            return self.answer(401, {"errors": [{
                "code": "UNAUTHORIZED", "message": "bad credentials"}]})
        access = []
        for scope in query.get("scope", []):
            kind, _, rest = scope.partition(":")
            name, _, actions = rest.rpartition(":")
            access.append({"type": kind, "name": name,
                           "actions": actions.split(",")})
        now = int(time.time())
        header = {"typ": "JWT", "alg": "RS256",
                  "x5c": [base64.b64encode(st.cert_der).decode()]}
        claims = {"iss": st.args.issuer, "sub": st.args.user,
                  "aud": query.get("service", [""])[0],
                  "exp": now + st.args.expires, "nbf": now - 10, "iat": now,
                  "jti": b64url(os.urandom(12)), "access": access}
        signing = (b64url(json.dumps(header).encode()) + "." +
                   b64url(json.dumps(claims).encode())).encode()
        sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign",
                              st.args.key], input=signing,
                             capture_output=True, check=True).stdout
        token = signing.decode() + "." + b64url(sig)
        self.answer(200, {"token": token, "expires_in": st.args.expires})


def main():
    p = argparse.ArgumentParser()
    for name in ("--key", "--cert", "--issuer", "--user", "--password"):
        p.add_argument(name, required=True)
    p.add_argument("--expires", type=int, default=300)
    p.add_argument("--log")
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args()
    standin.serve(args.port, Handler, State(args))


if __name__ == "__main__":
    main()
