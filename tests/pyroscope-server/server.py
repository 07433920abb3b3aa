#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A Pyroscope-compatible server for tests (standard library only).

Implements sections 1, 2, 3 and 6 of ../../../shared/reference/
pyroscope-protocol.md (vendored summary in README.md): POST /ingest,
POST /push.v1.PusherService/Push, v1/v2 storage, multi-tenancy, body and
rate limits, and the Connect query methods SelectMergeProfile,
SelectSeries, LabelValues and ProfileTypes, as Pyroscope 1.13 or 2.0
(`--version`) answers them. A separate control port switches fault modes
(down, 500, ratelimit, unavailable, bodyread, slow, reset) and configuration per test and
exposes what was received.

Prints one line `READY data=<port> control=<port>` on stdout once both
ports listen (ports are ephemeral unless given).
"""

import argparse
import base64
import gzip
import json
import os
import socket
import ssl
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# pbwire and pprof_wire: the workspace's test-only decoders.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "support"))

import ingestion  # noqa: E402
import pprof  # noqa: E402
import queries  # noqa: E402
from pbwire import DecodeError  # noqa: E402
from store import QueryError, Store, metric_name  # noqa: E402

INGEST_PATHS = ("/ingest", "/pyroscope/ingest")
PUSH_PATH = "/push.v1.PusherService/Push"
QUERY_PREFIX = "/querier.v1.QuerierService/"
QUERY_METHODS = ("SelectMergeProfile", "SelectSeries", "LabelValues", "ProfileTypes")
FAULT_MODES = ("none", "down", "500", "ratelimit", "unavailable", "bodyread", "slow", "reset")
VERSIONS = ("1.13", "2.0")
STORAGE_OF = {"1.13": "v1", "2.0": "v2"}
# /ingest: every failure after its request parsing is "pushing
# IngestInput-pprof failed <Connect error>" with status 422 and JSON code
# "unknown" (ingest_adapter.go, ingest_handler.go, HTTPToCode(422)).
INGEST_FAILED = "pushing IngestInput-pprof failed "
INGEST_PARSE_FAILED = "parsing IngestInput-pprof failed "
CONNECT_STATUS = {"invalid_argument": 400, "unauthenticated": 401, "resource_exhausted": 429,
                  "internal": 500, "unavailable": 503, "unknown": 500}
MAX_RECORDED = 20000


class HttpError(Exception):
    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def ibytes(n):
    """go-humanize IBytes: "512 B", "4.0 MiB", "12 KiB"."""
    if n < 1024:
        return "%d B" % n
    units = ["KiB", "MiB", "GiB", "TiB"]
    v, u = float(n), -1
    while v >= 1024 and u < len(units) - 1:
        v /= 1024
        u += 1
    return ("%.1f %s" if v < 10 else "%.0f %s") % (v, units[u])


def post_parse_error(ingest, code, message):
    """A failure after the request was parsed, as each endpoint reports
    it: /ingest wraps it in a 422, Push keeps its Connect status."""
    if ingest:
        return HttpError(422, "unknown", "%s%s: %s" % (INGEST_FAILED, code, message))
    return HttpError(CONNECT_STATUS[code], code, message)


def rate_limit_message(rate, size):
    return "push rate limit (%s) exceeded while adding %s" % (ibytes(int(rate)), ibytes(size))


def labels_text(labels):
    """phlaremodel.LabelPairsString: {a="1", b="2"} sorted by name."""
    return "{" + ", ".join('%s="%s"' % kv for kv in sorted(labels.items())) + "}"


class RateLimiter:
    """Token bucket per tenant on uncompressed bytes (profile + labels)."""

    def __init__(self, rate, burst):
        self.rate, self.burst = rate, burst
        self.buckets = {}
        self.lock = threading.Lock()

    def allow(self, tenant, n):
        if self.rate <= 0:
            return True
        now = time.monotonic()
        with self.lock:
            tokens, last = self.buckets.get(tenant, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            ok = n <= tokens
            if ok:
                tokens -= n
            self.buckets[tenant] = (tokens, now)
            return ok


class State:
    def __init__(self, args):
        self.lock = threading.Lock()
        self.args = args
        self.version = args.version
        self.store = Store(args.storage or STORAGE_OF[args.version], args.version)
        self.multitenancy = args.multitenancy
        self.body_limit = args.body_limit
        self.auth = args.auth
        self.limiter = RateLimiter(args.rate_limit_mb * 1048576, args.rate_burst_mb * 1048576)
        self.fault = {"mode": args.fault, "count": args.fault_count, "slow_ms": args.slow_ms}
        self.requests = []
        self.counters = {}
        self.conns = set()
        self.data_server = None
        self.port_hold = None  # while down: the port, bound and not listening
        self.data_thread = None
        self.up_timer = None
        self.port = args.port
        self.tls = None
        if args.tls_cert:
            self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.tls.load_cert_chain(args.tls_cert, args.tls_key)

    def count(self, key, n=1):
        with self.lock:
            self.counters[key] = self.counters.get(key, 0) + n

    def take_fault(self):
        """The fault mode for the next ingestion request."""
        with self.lock:
            f = self.fault
            mode = f["mode"]
            if mode in ("none", "down"):
                return "none", 0
            if f["count"] is not None:
                if f["count"] <= 0:
                    f["mode"] = "none"
                    return "none", 0
                f["count"] -= 1
            return mode, f["slow_ms"]

    # --- data listener up/down --------------------------------------------

    def start_data(self):
        if self.port_hold is not None:
            self.port_hold.close()
            self.port_hold = None
        srv = DataServer(("127.0.0.1", self.port), DataHandler)
        srv.state = self
        self.port = srv.server_address[1]
        self.data_server = srv
        self.data_thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05},
                                            daemon=True)
        self.data_thread.start()

    def stop_data(self):
        srv = self.data_server
        if srv is None:
            return
        self.data_server = None
        srv.shutdown()
        srv.server_close()
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        # Keep the port while down: bound and not listening, it refuses
        # connections like a closed port, but no other process's bind(0)
        # can take it before the server comes back up on it.
        hold = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        hold.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        hold.bind(("127.0.0.1", self.port))
        self.port_hold = hold

    def set_fault(self, mode, count=None, slow_ms=None, duration_ms=None):
        if mode not in FAULT_MODES:
            raise ValueError("fault mode must be one of %s" % ", ".join(FAULT_MODES))
        if self.up_timer:
            self.up_timer.cancel()
            self.up_timer = None
        with self.lock:
            self.fault = {"mode": mode, "count": count,
                          "slow_ms": self.fault["slow_ms"] if slow_ms is None else slow_ms}
        if mode == "down":
            self.stop_data()
        elif self.data_server is None:
            self.start_data()
        if duration_ms:
            self.up_timer = threading.Timer(duration_ms / 1000.0, self.set_fault, args=("none",))
            self.up_timer.daemon = True
            self.up_timer.start()


class DataServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def finish_request(self, request, client_address):
        st = self.state
        if st.tls is not None:
            try:
                request = st.tls.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                request.close()
                return
        with st.lock:
            st.conns.add(request)
        try:
            super().finish_request(request, client_address)
        finally:
            with st.lock:
                st.conns.discard(request)


def json_error(code, message):
    return json.dumps({"code": code, "message": message}).encode()


class DataHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "pyroscope-stand-in/1"

    def log_message(self, fmt, *args):
        if self.server.state.args.verbose:
            sys.stderr.write("stand-in: " + (fmt % args) + "\n")

    # --- plumbing ----------------------------------------------------------

    def read_body(self, limit=None):
        if self.server.state.version == "1.13":
            limit = None  # 1.13 has no body limit
        te = self.headers.get("Transfer-Encoding", "")
        if "chunked" in te.lower():
            data = bytearray()
            while True:
                line = self.rfile.readline()
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
            return bytes(data), len(data)
        n = int(self.headers.get("Content-Length", "0") or 0)
        if limit is not None and n > limit:
            left = n
            while left > 0:
                chunk = self.rfile.read(min(left, 65536))
                if not chunk:
                    break
                left -= len(chunk)
            return None, n
        return self.rfile.read(n), n

    def send(self, status, body=b"", ctype="application/json", extra=None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if body:
            self.wfile.write(body)
        self.server.state.count("status_%d" % status)

    def record(self, body):
        st = self.server.state
        with st.lock:
            if len(st.requests) < MAX_RECORDED:
                st.requests.append({"method": self.command, "path": self.path,
                                    "headers": [[k, v] for k, v in self.headers.items()],
                                    "body": body, "time": time.time()})

    def tenant(self):
        st = self.server.state
        if st.multitenancy:
            org = self.headers.get("X-Scope-OrgID", "").strip()
            if not org:
                raise HttpError(401, "unauthenticated", "no org id")
            return org
        return "anonymous"

    def check_auth(self):
        st = self.server.state
        if not st.auth:
            return
        kind, _, secret = st.auth.partition(":")
        want = ("Basic " + base64.b64encode(secret.encode()).decode()) if kind == "basic" \
            else "Bearer " + secret
        if self.headers.get("Authorization", "") != want:
            raise HttpError(401, "unauthenticated", "invalid credentials")

    # --- routing -----------------------------------------------------------

    def do_GET(self):
        path = urllib.parse.urlsplit(self.path).path
        if path == "/ready":
            self.send(200, b"ready\n", "text/plain")
        elif path == "/pyroscope/render":
            self.handle_render()
        else:
            self.send(404, json_error("not_found", "no route for GET " + path))

    def do_POST(self):
        st = self.server.state
        path = urllib.parse.urlsplit(self.path).path
        is_ingest = path in INGEST_PATHS or path == PUSH_PATH
        if is_ingest:
            st.count("requests")
            st.count("push_requests" if path == PUSH_PATH else "ingest_requests")
            mode, slow_ms = st.take_fault()
            if mode != "none":
                st.count("faulted")
                body, _n = self.read_body()
                self.record(body)
                if mode == "bodyread" and st.version != "1.13":
                    # 2.0: reading the request body failed (the text after
                    # the code is the stand-in's own)
                    self.send(408, json_error("deadline_exceeded",
                                              "fault injected: reading the request body failed"))
                    return
                if mode in ("reset", "bodyread"):
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                               struct.pack("ii", 1, 0))
                    self.close_connection = True
                    return
                if mode == "500":
                    self.send(500, json_error("internal", "fault injected: internal error"))
                    return
                if mode == "unavailable":
                    # an ingester / segment-writer failure (the text after
                    # the code is the stand-in's own)
                    e = post_parse_error(path != PUSH_PATH, "unavailable",
                                         "fault injected: no ingester available")
                    self.send(e.status, json_error(e.code, e.message))
                    return
                if mode == "ratelimit":
                    e = post_parse_error(path != PUSH_PATH, "resource_exhausted",
                                         rate_limit_message(st.limiter.rate, len(body or b"")))
                    self.send(e.status, json_error(e.code, e.message))
                    return
                if mode == "slow":
                    time.sleep(slow_ms / 1000.0)
                    self.handle_ingestion(path, body)
                    return
            self.handle_ingestion(path, None)
        elif path.startswith(QUERY_PREFIX) and path[len(QUERY_PREFIX):] in QUERY_METHODS:
            self.handle_query(path[len(QUERY_PREFIX):])
        else:
            self.read_body()
            self.send(404, json_error("not_found", "no route for POST " + path))

    def handle_ingestion(self, path, body):
        st = self.server.state
        try:
            if body is None:
                body, _n = self.read_body(st.body_limit)
                self.record(body if body is not None else b"")
            self.check_auth()
            tenant = self.tenant()
            if body is None or (st.version != "1.13" and len(body) > st.body_limit):
                raise HttpError(413, "invalid_argument", "request body too large")
            if path == PUSH_PATH:
                self.handle_push(tenant, body)
            else:
                self.handle_ingest(tenant, body)
        except HttpError as e:
            self.send(e.status, json_error(e.code, e.message))

    # --- POST /ingest ------------------------------------------------------

    def handle_ingest(self, tenant, body):
        st = self.server.state
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query, keep_blank_values=True)
        one = lambda k: q[k][-1] if k in q else None  # noqa: E731
        try:
            service, labels = ingestion.parse_name(one("name"))
        except ingestion.NameError400 as e:
            raise HttpError(400, "invalid_argument", str(e))
        from_ms = ingestion.parse_time_ms(one("from"))
        spy = one("spyName") or "unknown"
        fmt = one("format")
        ctype = self.headers.get("Content-Type", "")
        if fmt == "pprof":
            data = body
        elif ctype.lower().startswith("multipart/form-data"):
            try:
                parts = ingestion.parse_multipart(ctype, body)
            except DecodeError as e:
                raise HttpError(422, "unknown", INGEST_PARSE_FAILED +
                                "failed to parse pprof /ingest multipart form %s" % e)
            if any(p[1] == "prev_profile" for p in parts):
                raise HttpError(422, "unknown", INGEST_PARSE_FAILED +
                                "failed to parse pprof /ingest multipart form unsupported client "
                                "version. Please update github.com/grafana/pyroscope-go to the "
                                "latest version")
            files = [p for p in parts if p[1] == "profile" and p[2] is not None]
            data = files[-1][3] if files else b""
        else:
            raise HttpError(422, "unknown",
                            "stand-in supports only pprof bodies (format=pprof or multipart)")
        if not data:
            st.count("accepted_empty")
            self.send(200, b"", "text/plain")
            return
        labels.setdefault("service_name", service)
        self.store_pprof(tenant, labels, data, from_ms, spy, ingest=True)
        self.send(200, b"", "text/plain")

    # --- POST /push.v1.PusherService/Push ---------------------------------

    def handle_push(self, tenant, body):
        ctype = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if self.headers.get("Content-Encoding", "").lower() == "gzip":
            try:
                body = gzip.decompress(body)
            except (OSError, EOFError) as e:
                raise HttpError(400, "invalid_argument", "bad gzip body: %s" % e)
        is_json = ctype == "application/json"
        if ctype not in ("application/proto", "application/json"):
            raise HttpError(415, "unknown", "unsupported content type %r" % ctype)
        try:
            series = ingestion.decode_push_json(body) if is_json else ingestion.decode_push_proto(body)
        except (DecodeError, ValueError) as e:
            raise HttpError(400, "invalid_argument", "invalid PushRequest: %s" % e)
        now_ms = int(time.time() * 1000)
        for s in series:
            labels = {}
            for n, v in s["labels"]:
                labels[n] = v
            if not labels.get("__name__"):
                raise HttpError(400, "invalid_argument", "invalid labels: __name__ is required")
            labels.setdefault("service_name",
                              "unspecified" if self.server.state.version == "1.13" else "unknown_service")
            for raw, _sid in s["samples"]:
                self.store_pprof(tenant, dict(labels), raw, now_ms, None, ingest=False)
        self.send(200, b"{}" if is_json else b"", "application/json" if is_json else "application/proto")

    # --- shared: decode, validate, rate limit, store -----------------------

    def store_pprof(self, tenant, labels, data, fallback_ms, spy, ingest):
        """The distributor's order: decode, rate limit, labels, profile."""
        st = self.server.state
        try:
            raw = pprof.maybe_gunzip(data)
            prof = pprof.decode(raw)
        except DecodeError as e:
            if ingest:
                raise HttpError(422, "unknown", INGEST_PARSE_FAILED +
                                "invalid_argument: failed to parse pprof: %s" % e)
            raise HttpError(400, "invalid_argument", "failed to parse pprof: %s" % e)
        if not prof.samples:
            st.count("accepted_empty")
            return
        if spy is not None:
            labels["__name__"] = metric_name(prof.sample_types)
            labels["__delta__"] = "false"
            labels["pyroscope_spy"] = spy
        size = len(raw) + sum(len(k) + len(v) for k, v in labels.items())
        if not st.limiter.allow(tenant, size):
            st.count("rate_limited")
            raise post_parse_error(ingest, "resource_exhausted",
                                   rate_limit_message(st.limiter.rate, size))
        labels, err = self.validate_labels(labels, prof)
        if err:
            raise post_parse_error(ingest, "invalid_argument", err)
        err = pprof.validate(prof, labels_text(labels), len(raw), now_ns=time.time_ns())
        if err:
            raise post_parse_error(ingest, "invalid_argument", err)
        ts_ns = prof.time_nanos if prof.time_nanos else fallback_ms * 1000000
        lost = st.store.add_profile(tenant, labels, prof, ts_ns)
        if lost:
            st.count("split_lost_samples", lost)
        st.count("accepted")

    def validate_labels(self, labels, prof):
        """ValidateLabels: 1.13 refuses a name starting with a digit and
        stores '.' as '_' (a collision is a duplicate); 2.0 keeps any
        non-empty UTF-8 name (validation.disable-label-sanitization)."""
        text = labels_text(labels)
        names = set(labels)
        for smp in prof.samples:
            names.update(k for k in smp["labels"] if k not in labels)
        if len(names) > 30:
            return labels, "profile series '%s' has %d label names; limit 30" % (text, len(names))
        out = {}
        for n in sorted(labels):
            v = labels[n]
            if len(n) > 1024:
                return labels, "profile with labels '%s' has label name too long: '%s'" % (text, n)
            if len(v) > 2048:
                return labels, "profile with labels '%s' has label value too long: '%s'" % (text, v)
            name = n
            if self.server.state.version == "1.13":
                if not n or not ingestion.LEGACY_LABEL_NAME.match(n):
                    return labels, ("invalid labels '%s' with error: invalid label name '%s'"
                                    % (text, n))
                name = n.replace(".", "_")
            elif not n:
                return labels, "invalid labels '%s' with error: invalid label name ''" % text
            if name in out:
                return labels, ("profile with labels '%s' has duplicate label name: '%s'"
                                % (text, n))
            out[name] = v
        return out, None

    # --- queries -------------------------------------------------------------

    def handle_render(self):
        """GET /pyroscope/render?query=<type>{selector}&from=&until=&format=json"""
        st = self.server.state
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        one = lambda k: q[k][-1] if k in q else None  # noqa: E731
        try:
            tenant = self.tenant()
            query = one("query") or ""
            brace = query.find("{")
            type_id = query if brace < 0 else query[:brace]
            selector = "{}" if brace < 0 else query[brace:]
            now = int(time.time() * 1000)
            start = ingestion.parse_time_ms(one("from") or "now-1h", now)
            end = ingestion.parse_time_ms(one("until"), now)
            if (one("format") or "json") != "json":
                raise HttpError(400, "invalid_argument", "stand-in renders format=json only")
            merged, stype, _ptype = st.store.select_merge(tenant, type_id, selector, start, end)
            units = {"bytes": "bytes", "count": "objects", "nanoseconds": "samples"}.get(stype[1], stype[1])
            body = json.dumps(queries.flamebearer(merged, units)).encode()
        except QueryError as e:
            self.send(400, json_error("invalid_argument", str(e)))
            return
        except HttpError as e:
            self.send(e.status, json_error(e.code, e.message))
            return
        self.send(200, body)

    def handle_query(self, method):
        st = self.server.state
        body, _n = self.read_body()
        ctype = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        is_json = ctype == "application/json"
        try:
            tenant = self.tenant()
            try:
                req = queries.decode_request(method, body, is_json)
            except (DecodeError, ValueError) as e:
                raise HttpError(400, "invalid_argument", "invalid request: %s" % e)
            if method == "SelectMergeProfile":
                merged, stype, ptype = st.store.select_merge(
                    tenant, req["profileTypeID"], req["labelSelector"], req["start"], req["end"])
                # v2 (2.2.1) answers a range that holds nothing in
                # protobuf with HTTP 200 and an empty body; v1 with a
                # profile of the type and no samples
                if not merged and not is_json and st.store.storage == "v2":
                    out = b""
                else:
                    out = queries.merge_response(merged, stype, ptype, is_json)
            elif method == "SelectSeries":
                series = st.store.select_series(
                    tenant, req["profileTypeID"], req["labelSelector"], req["start"], req["end"],
                    req["step"], req["groupBy"], req["aggregation"])
                out = queries.series_response(series, is_json)
            elif method == "LabelValues":
                out = queries.label_values_response(
                    st.store.label_values(tenant, req["name"], req["matchers"], req["start"], req["end"]),
                    is_json)
            else:
                out = queries.profile_types_response(
                    st.store.profile_types(tenant, req["start"], req["end"]), is_json)
        except QueryError as e:
            self.send(400, json_error("invalid_argument", str(e)))
            return
        except HttpError as e:
            self.send(e.status, json_error(e.code, e.message))
            return
        self.send(200, out, "application/json" if is_json else "application/proto")


class ControlHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def reply(self, status, obj, ctype="application/json"):
        body = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        st = self.server.state
        path = urllib.parse.urlsplit(self.path).path
        if path == "/status":
            with st.lock:
                self.reply(200, {"data_port": st.port, "up": st.data_server is not None,
                                 "fault": dict(st.fault), "storage": st.store.storage,
                                 "version": st.version,
                                 "multitenancy": st.multitenancy})
        elif path == "/requests":
            with st.lock:
                reqs = [dict(r, body=base64.b64encode(r["body"] or b"").decode()) for r in st.requests]
            self.reply(200, {"requests": reqs})
        elif path == "/summary":
            with st.lock:
                c = dict(st.counters)
            c["profiles"] = st.store.profiles_accepted
            c["records"] = len(st.store.dump())
            text = "".join("%s %d\n" % (k, v) for k, v in sorted(c.items()))
            self.reply(200, text.encode(), "text/plain")
        elif path == "/profiles.tsv":
            lines = []
            for r in st.store.dump():
                labels = ";".join("%s=%s" % kv for kv in sorted(r.labels.items()))
                lines.append("%s\t%d\t%s\t%d\t%s\n" % (r.tenant, r.ts_ms, r.type_id, r.total(), labels))
            self.reply(200, "".join(lines).encode(), "text/plain")
        else:
            self.reply(404, {"error": "no such control endpoint"})

    def do_POST(self):
        st = self.server.state
        path = urllib.parse.urlsplit(self.path).path
        n = int(self.headers.get("Content-Length", "0") or 0)
        try:
            msg = json.loads(self.rfile.read(n).decode() or "{}")
            if path == "/fault":
                st.set_fault(msg.get("mode", "none"), msg.get("count"), msg.get("slow_ms"),
                             msg.get("duration_ms"))
            elif path == "/config":
                if "multitenancy" in msg:
                    st.multitenancy = bool(msg["multitenancy"])
                if "body_limit" in msg:
                    st.body_limit = int(msg["body_limit"])
                if "auth" in msg:
                    st.auth = msg["auth"] or None
                if "version" in msg:
                    if msg["version"] not in VERSIONS:
                        raise ValueError("version must be one of %s" % ", ".join(VERSIONS))
                    st.version = msg["version"]
                    st.store = Store(msg.get("storage") or STORAGE_OF[st.version], st.version)
                elif "storage" in msg:
                    st.store = Store(msg["storage"], st.version)
                if "rate_limit_mb" in msg or "rate_burst_mb" in msg:
                    st.limiter = RateLimiter(float(msg.get("rate_limit_mb", 4)) * 1048576,
                                             float(msg.get("rate_burst_mb", 2)) * 1048576)
            elif path == "/reset":
                st.set_fault("none")
                st.store.reset()
                with st.lock:
                    st.requests = []
                    st.counters = {}
            else:
                self.reply(404, {"error": "no such control endpoint"})
                return
        except (ValueError, TypeError) as e:
            self.reply(400, {"error": str(e)})
            return
        self.reply(200, {"ok": True})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0, help="data port (0 = ephemeral)")
    ap.add_argument("--control-port", type=int, default=0, help="control port (0 = ephemeral)")
    ap.add_argument("--version", choices=VERSIONS, default="2.0",
                    help="the server modelled: 1.13 (label split loss, label sanitization, no "
                         "body limit, v1 storage) or 2.0 (default, v2 storage)")
    ap.add_argument("--storage", choices=("v1", "v2"), default=None,
                    help="v1: ingester with server-side delta; v2: stored as sent "
                         "(default: the version's)")
    ap.add_argument("--multitenancy", action="store_true", help="require X-Scope-OrgID (401 without)")
    ap.add_argument("--body-limit", type=int, default=256 * 1048576,
                    help="2.0's ingestion body limit in bytes, before decompression "
                         "(default 256 MiB; 1.13 has none)")
    ap.add_argument("--rate-limit-mb", type=float, default=4.0, help="MiB/s per tenant (0 = off)")
    ap.add_argument("--rate-burst-mb", type=float, default=2.0, help="burst in MiB")
    ap.add_argument("--auth", default=None,
                    help="emulate an authenticating proxy: basic:USER:PASS or bearer:TOKEN")
    ap.add_argument("--fault", choices=FAULT_MODES, default="none", help="initial fault mode")
    ap.add_argument("--fault-count", type=int, default=None,
                    help="apply the fault to this many ingestion requests, then none")
    ap.add_argument("--slow-ms", type=int, default=2000, help="delay of the slow fault")
    ap.add_argument("--tls-cert", default=None, help="serve HTTPS with this PEM certificate")
    ap.add_argument("--tls-key", default=None, help="its private key")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)

    st = State(args)
    if args.fault != "down":
        st.start_data()
    else:
        probe = socket.socket()
        probe.bind(("127.0.0.1", args.port))
        st.port = probe.getsockname()[1]
        probe.close()
    ctl = ThreadingHTTPServer(("127.0.0.1", args.control_port), ControlHandler)
    ctl.daemon_threads = True
    ctl.state = st
    print("READY data=%d control=%d" % (st.port, ctl.server_address[1]), flush=True)
    try:
        ctl.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
