#!/usr/bin/env python3
"""npm_registry.py - a test stand-in for the npm registry.

A small local registry, so that a snapshot build's `npm ci` fetches real
packages over HTTP, through the build's egress proxy, without the internet.
It serves the packages under a directory (tests/fixtures/npm-registry: one
subdirectory per package, its package.json and files), packed the way `npm
pack` packs them (a gzipped tar with everything under package/). Python 3
standard library only.

    npm_registry.py --packages DIR --port 0 [--log FILE]
                    [--lock APP_DIR --public-host HOST]
    npm_registry.py --tarballs DIR --port 0 [--log FILE] [--public-host HOST]

With --tarballs it serves the *.tgz files of DIR as they are (as `npm pack
NAME@VER` downloads them from the real registry; scripts/fetch-agent-
packages.sh fetches the agent presets' ones): each version's packument
entry is the tarball's own package/package.json (os, cpu, libc,
optionalDependencies, bin and all), its dist.integrity and dist.shasum
those of the file. Scoped names work as on the registry (GET
/@scope%2fname, GET /@scope/name/-/name-VER.tgz). A package whose
optional dependencies are not all here installs anyway: npm skips an
optional dependency it cannot resolve.

It listens on 127.0.0.1 (--port 0: a free port) and prints the port alone
on the first line of stdout once it listens. Routes, as the registry's:

    GET /NAME                   the packument: versions, dist-tags, and for
                                each version dist.tarball, dist.integrity
                                (sha512) and dist.shasum (sha1)
    GET /NAME/-/NAME-VER.tgz    the tarball

Anything else is 404. Each request is one line "METHOD PATH" in --log.

With --lock, before printing the port, it writes APP_DIR/package-lock.json
(lockfileVersion 3) for APP_DIR/package.json's dependencies, resolved
through the packages here at http://HOST:PORT/, and APP_DIR/.npmrc naming
that registry: a lockfile needs the tarballs' hashes, which exist only once
the tarballs are packed, and their URLs, which need the port.
"""
import argparse
import base64
import gzip
import hashlib
import http.server
import io
import json
import os
import shutil
import socketserver
import sys
import tarfile
import threading
import urllib.parse

FIXED_MTIME = 499162500  # npm pack's fixed date (1985-10-26)


def pack(pkg_dir):
    """The package's tarball, byte for byte the same on every run."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for root, dirs, files in os.walk(pkg_dir):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, pkg_dir)
                info = tarfile.TarInfo("package/" + rel)
                data = open(path, "rb").read()
                info.size = len(data)
                info.mode = 0o644
                info.mtime = FIXED_MTIME
                tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def tarball_manifest(path):
    """package.json of a packed tarball (its top directory is package/ as
    npm packs, though old packages may name it otherwise)."""
    with tarfile.open(path, mode="r:gz") as tar:
        for member in tar:
            parts = member.name.split("/")
            if len(parts) == 2 and parts[1] == "package.json" and member.isfile():
                return json.load(tar.extractfile(member))
    raise ValueError("%s: no package.json" % path)


def file_hashes(path):
    sha512, sha1 = hashlib.sha512(), hashlib.sha1()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            sha512.update(chunk)
            sha1.update(chunk)
    return ("sha512-" + base64.b64encode(sha512.digest()).decode(),
            sha1.hexdigest())


class Registry:
    def __init__(self, packages_dir=None, tarballs_dir=None):
        # name -> {version: (manifest, tarball bytes or None, file or None)}
        self.packages = {}
        self.hashes = {}  # (name, version) -> (integrity, shasum)
        if packages_dir:
            for name in sorted(os.listdir(packages_dir)):
                pkg_dir = os.path.join(packages_dir, name)
                manifest = json.load(open(os.path.join(pkg_dir, "package.json")))
                tarball = pack(pkg_dir)
                self.packages.setdefault(manifest["name"], {})[manifest["version"]] = (
                    manifest, tarball, None)
        if tarballs_dir:
            for name in sorted(os.listdir(tarballs_dir)):
                if not name.endswith(".tgz"):
                    continue
                path = os.path.join(tarballs_dir, name)
                manifest = tarball_manifest(path)
                self.packages.setdefault(manifest["name"], {})[manifest["version"]] = (
                    manifest, None, path)
                self.hashes[(manifest["name"], manifest["version"])] = file_hashes(path)
        self.base = None

    def tarball_name(self, name, version):
        return "%s-%s.tgz" % (name.split("/")[-1], version)

    def dist(self, name, version):
        _, tarball, path = self.packages[name][version]
        if path:
            integrity, shasum = self.hashes[(name, version)]
        else:
            integrity = "sha512-" + base64.b64encode(
                hashlib.sha512(tarball).digest()).decode()
            shasum = hashlib.sha1(tarball).hexdigest()
        return {
            "tarball": "%s%s/-/%s" % (self.base, name, self.tarball_name(name, version)),
            "integrity": integrity,
            "shasum": shasum,
        }

    def packument(self, name):
        versions = {}
        for version, (manifest, _, _) in self.packages[name].items():
            entry = dict(manifest)
            entry["_id"] = "%s@%s" % (name, version)
            entry["dist"] = self.dist(name, version)
            versions[version] = entry
        # as the registry's: the newest release, not a prerelease
        # ("0.171.0", not "0.171.0-linux-x64")
        releases = sorted(v for v in versions if "-" not in v)
        latest = (releases or sorted(versions))[-1]
        return {"name": name, "dist-tags": {"latest": latest}, "versions": versions}

    def lock(self, app_dir):
        """package-lock.json for app_dir: exact versions only (a stand-in
        resolves no ranges), dependencies of dependencies included."""
        app = json.load(open(os.path.join(app_dir, "package.json")))
        packages = {"": {"name": app["name"], "version": app["version"],
                         "dependencies": app.get("dependencies", {})}}
        pending = list(app.get("dependencies", {}).items())
        while pending:
            name, version = pending.pop()
            key = "node_modules/" + name
            if key in packages:
                continue
            manifest = self.packages[name][version][0]
            dist = self.dist(name, version)
            entry = {"version": version, "resolved": dist["tarball"],
                     "integrity": dist["integrity"]}
            if manifest.get("license"):
                entry["license"] = manifest["license"]
            deps = manifest.get("dependencies", {})
            if deps:
                entry["dependencies"] = deps
                pending.extend(deps.items())
            packages[key] = entry
        lock = {"name": app["name"], "version": app["version"],
                "lockfileVersion": 3, "requires": True, "packages": packages}
        with open(os.path.join(app_dir, "package-lock.json"), "w") as f:
            json.dump(lock, f, indent=2)
            f.write("\n")
        with open(os.path.join(app_dir, ".npmrc"), "w") as f:
            f.write("registry=%s\n" % self.base)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--packages")
    src.add_argument("--tarballs")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--log")
    ap.add_argument("--lock")
    ap.add_argument("--public-host")
    args = ap.parse_args()
    registry = Registry(args.packages, args.tarballs)
    log_lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):
            pass

        def answer(self, status, body, ctype):
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_GET(self):
            # through a proxy the request line holds the whole URL
            path = self.path
            if path.startswith("http://"):
                path = "/" + path.split("/", 3)[3] if path.count("/") >= 3 else "/"
            path = path.split("?", 1)[0]
            if args.log:
                with log_lock, open(args.log, "a") as f:
                    f.write("%s %s\n" % (self.command, path))
            # a scoped name comes as @scope%2fname
            path = urllib.parse.unquote(path)
            name = path.strip("/")
            if name in registry.packages:
                body = json.dumps(registry.packument(name)).encode()
                return self.answer(200, body, "application/json")
            if "/-/" in path:
                name, file = path.strip("/").split("/-/", 1)
                for version, (_, tarball, fpath) in registry.packages.get(name, {}).items():
                    if file != registry.tarball_name(name, version):
                        continue
                    if tarball is not None:
                        return self.answer(200, tarball, "application/octet-stream")
                    return self.send_file(fpath)
            self.answer(404, b'{"error":"Not found"}', "application/json")

        def send_file(self, fpath):
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(os.path.getsize(fpath)))
            self.end_headers()
            if self.command != "HEAD":
                with open(fpath, "rb") as f:
                    shutil.copyfileobj(f, self.wfile, 1 << 20)

        do_HEAD = do_GET

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

    server = Server(("127.0.0.1", args.port), Handler)
    port = server.server_address[1]
    registry.base = "http://%s:%d/" % (args.public_host or "127.0.0.1", port)
    if args.lock:
        registry.lock(args.lock)
    print(port, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
