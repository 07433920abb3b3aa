#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A registry for tests (release/REGISTRY.md protocol), on loopback only.

  PUT <base>/<package>/<version>/<archive>   store (201; 200 if identical;
                                             409 if that version exists
                                             with other bytes)
  GET <base>/index.json                      {"entries": [{package, version,
                                             archive, size, sha256}, ...]}
  GET <base>/<package>/<version>/<archive>   the stored bytes

Fault modes (each aimed at one package, so a test can check that the
release stops exactly there):
  delay-index=PKG:SECONDS  the index lists PKG only SECONDS after its upload
  corrupt=PKG              the stored archive differs from the uploaded one
                           (the index still lists the uploaded SHA-256)
  upload-500=PKG           the PUT of PKG is answered 500, nothing stored
  wrong-sha=PKG            the index lists a wrong SHA-256 for PKG
  down-at=PKG              the server drops the PUT of PKG unanswered and
                           stops listening (the registry goes down)
"Server down" from the start is simply no server on the port.

Auth: with a token or user:password configured, every request must carry
`Authorization: Bearer <token>` or the matching Basic credentials (401).

State lives in ROOT (index state in ROOT/state.json, archives under
ROOT/<package>/<version>/), so a restarted server keeps what was published.
Requests are recorded in `requests` (method, path, status) for the tests.

Standalone: registry_server.py --root DIR [--port N] [--port-file F]
            [--fault MODE=ARG ...] [--token T | --basic USER:PASS]
"""
import argparse
import base64
import hashlib
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class RegistryServer:
    def __init__(self, root, port=0, faults=None, token=None, basic=None, host="127.0.0.1"):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.faults = dict(faults or {})
        self.token = token
        self.basic = basic
        self.lock = threading.Lock()
        self.requests = []
        handler = type("Handler", (_Handler,), {"registry": self})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://{host}:{self.port}"
        self.thread = None

    # -- state ----------------------------------------------------------------
    def _state_path(self):
        return self.root / "state.json"

    def state(self):
        p = self._state_path()
        return json.loads(p.read_text()) if p.is_file() else {"entries": []}

    def _save(self, state):
        tmp = self._state_path().with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
        tmp.replace(self._state_path())

    def seed(self, package, version, archive, data):
        """Stores an archive as if published earlier (no faults)."""
        with self.lock:
            self._store(package, version, archive, data, data, hashlib.sha256(data).hexdigest(), 0)

    def _store(self, package, version, archive, stored, uploaded, listed_sha, visible_at):
        d = self.root / package / version
        d.mkdir(parents=True, exist_ok=True)
        (d / archive).write_bytes(stored)
        state = self.state()
        state["entries"] = [e for e in state["entries"]
                            if (e["package"], e["version"]) != (package, version)]
        state["entries"].append({"package": package, "version": version, "archive": archive,
                                 "size": len(uploaded), "sha256": listed_sha,
                                 "visible_at": visible_at})
        self._save(state)

    def index(self):
        now = time.time()
        return {"entries": [{k: e[k] for k in ("package", "version", "archive", "size", "sha256")}
                            for e in sorted(self.state()["entries"],
                                            key=lambda e: (e["package"], e["version"]))
                            if e["visible_at"] <= now]}

    def published(self):
        """[(package, version)] listed or pending in the index."""
        return sorted((e["package"], e["version"]) for e in self.state()["entries"])

    def puts(self):
        return [path for method, path, _ in self.requests if method == "PUT"]

    # -- lifecycle ------------------------------------------------------------
    def start(self):
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def go_down(self):
        threading.Thread(target=self.stop, daemon=True).start()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        try:
            self.stop()
        except Exception:
            pass


class _Handler(BaseHTTPRequestHandler):
    registry = None
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def _send(self, code, body=b"", ctype="text/plain"):
        self.registry.requests.append((self.command, self.path, code))
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _authorized(self):
        reg = self.registry
        got = self.headers.get("Authorization", "")
        if reg.token:
            return got == f"Bearer {reg.token}"
        if reg.basic:
            return got == "Basic " + base64.b64encode(reg.basic.encode()).decode()
        return True

    def _parts(self):
        path = self.path.split("?", 1)[0].strip("/")
        return path.split("/") if path else []

    def do_GET(self):
        if not self._authorized():
            return self._send(401, b"unauthorized\n")
        parts = self._parts()
        reg = self.registry
        if parts == ["index.json"]:
            with reg.lock:
                doc = reg.index()
                wrong = reg.faults.get("wrong-sha")
                for e in doc["entries"]:
                    if e["package"] == wrong:
                        e["sha256"] = hashlib.sha256(b"not the archive").hexdigest()
            return self._send(200, json.dumps(doc, indent=1).encode() + b"\n", "application/json")
        if len(parts) == 3 and ".." not in parts:
            f = reg.root.joinpath(*parts)
            if f.is_file():
                return self._send(200, f.read_bytes(), "application/gzip")
        return self._send(404, b"not found\n")

    def do_PUT(self):
        reg = self.registry
        length = int(self.headers.get("Content-Length", "0"))
        data = self.rfile.read(length)
        if not self._authorized():
            return self._send(401, b"unauthorized\n")
        parts = self._parts()
        if len(parts) != 3 or ".." in parts or parts[1:] == ["", ""]:
            return self._send(400, b"PUT <package>/<version>/<archive>\n")
        package, version, archive = parts
        if reg.faults.get("down-at") == package:
            reg.requests.append(("PUT", self.path, None))
            self.close_connection = True
            self.connection.shutdown(2)
            reg.go_down()
            return
        if reg.faults.get("upload-500") == package:
            return self._send(500, b"injected fault: internal error\n")
        sha = hashlib.sha256(data).hexdigest()
        with reg.lock:
            existing = [e for e in reg.state()["entries"]
                        if (e["package"], e["version"]) == (package, version)]
            if existing:
                if existing[0]["sha256"] == sha:
                    return self._send(200, b"identical archive already stored\n")
                return self._send(409, b"version exists with other content\n")
            stored = data
            if reg.faults.get("corrupt") == package:
                stored = bytearray(data)
                stored[len(stored) // 2] ^= 0xFF
                stored = bytes(stored)
            visible_at = 0
            delay = reg.faults.get("delay-index", "")
            if delay.split(":")[0] == package:
                visible_at = time.time() + float(delay.split(":")[1])
            reg._store(package, version, archive, stored, data, sha, visible_at)
        return self._send(201, b"stored\n")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--fault", action="append", default=[], help="MODE=ARG, e.g. corrupt=mimprof-sys")
    ap.add_argument("--token")
    ap.add_argument("--basic", help="USER:PASSWORD")
    args = ap.parse_args(argv[1:])
    faults = dict(f.split("=", 1) for f in args.fault)
    srv = RegistryServer(args.root, args.port, faults, args.token, args.basic)
    if args.port_file:
        Path(args.port_file).write_text(str(srv.port))
    print(f"registry on {srv.url} (root {args.root})", flush=True)
    try:
        srv.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
