#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Checks the Pyroscope stand-in against the protocol reference
(sections 1, 2, 3, 6) with raw HTTP requests. Standard library only."""

import base64
import gzip
import http.client
import json
import os
import socket
import ssl
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "support"))

import ingestion  # noqa: E402
import pbwire as pb  # noqa: E402
import pprof  # noqa: E402
import store  # noqa: E402

HEAP_TYPES = [("alloc_objects", "count"), ("alloc_space", "bytes"),
              ("inuse_objects", "count"), ("inuse_space", "bytes")]
NOW_NS = time.time_ns()


def heap_profile(samples, time_nanos=None, sample_labels=None, types=HEAP_TYPES, labelled=None):
    """samples: [(stack root-first, [values])] -> pprof bytes; the string
    labels `sample_labels` on the samples whose index is in `labelled`
    (None: all)."""
    b = pprof.Builder(types, period_type=("space", "bytes"), period=524288,
                      time_nanos=NOW_NS if time_nanos is None else time_nanos)
    for stack, values in samples:
        b.add(stack, values)
    data = b.encode()
    if sample_labels:
        # re-encode with a string label on every sample: key/str indexes appended
        p = pprof.decode(data)
        strings = p.strings + list(sample_labels.keys()) + list(sample_labels.values())
        out = b""
        index = -1
        for num, wt, val in pb.fields(data):
            if num == 2:
                index += 1
                if labelled is not None and index not in labelled:
                    out += pb.f_msg(2, val)
                    continue
                lab = b""
                for i, k in enumerate(sample_labels):
                    ki = len(p.strings) + i
                    vi = len(p.strings) + len(sample_labels) + i
                    lab += pb.f_msg(3, pb.f_varint(1, ki) + pb.f_varint(2, vi))
                out += pb.f_msg(2, val + lab)
            elif num == 6:
                continue
            else:
                out += pb.key(num, wt) + (pb.enc_varint(len(val)) + val if wt == pb.LEN else
                                          pb.enc_varint(val) if wt == pb.VARINT else val)
        for s in strings:
            out += pb.f_bytes(6, s.encode())
        data = out
    return data


def multipart(parts, boundary="mimprofboundary123"):
    body = b""
    for name, filename, data in parts:
        disp = 'form-data; name="%s"' % name
        if filename is not None:
            disp += '; filename="%s"' % filename
        body += b"--" + boundary.encode() + b"\r\n"
        body += b"Content-Disposition: " + disp.encode() + b"\r\n"
        body += b"Content-Type: application/octet-stream\r\n\r\n" + data + b"\r\n"
    body += b"--" + boundary.encode() + b"--\r\n"
    return body, "multipart/form-data; boundary=" + boundary


class Server:
    def __init__(self, *args):
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "server.py")] + list(args),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("READY"):
            self.proc.kill()
            raise RuntimeError("server did not start: %r %s" % (line, self.proc.stderr.read()))
        kv = dict(x.split("=") for x in line.split()[1:])
        self.port, self.control = int(kv["data"]), int(kv["control"])

    def close(self):
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()

    def request(self, method, path, body=b"", headers=None, port=None, tls=None):
        if tls:
            conn = http.client.HTTPSConnection("127.0.0.1", port or self.port, timeout=10, context=tls)
        else:
            conn = http.client.HTTPConnection("127.0.0.1", port or self.port, timeout=10)
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        conn.close()
        return r.status, dict(r.getheaders()), data

    def ctl(self, method, path, obj=None):
        body = json.dumps(obj).encode() if obj is not None else b""
        return self.request(method, path, body, {"Content-Type": "application/json"}, port=self.control)

    def ingest(self, name, prof, extra_query="", headers=None, gz=True, filename="profile.pprof"):
        data = gzip.compress(prof) if gz else prof
        body, ctype = multipart([("profile", filename, data)])
        h = {"Content-Type": ctype}
        h.update(headers or {})
        q = "/ingest?name=" + pb_quote(name) + extra_query
        return self.request("POST", q, body, h)

    def push(self, series, headers=None, ctype="application/proto"):
        h = {"Content-Type": ctype}
        h.update(headers or {})
        return self.request("POST", "/push.v1.PusherService/Push", ingestion.encode_push_proto(series), h)

    def query(self, method, obj, headers=None):
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        st, _h, data = self.request("POST", "/querier.v1.QuerierService/" + method,
                                    json.dumps(obj).encode(), h)
        return st, json.loads(data.decode() or "{}")

    def summary(self):
        st, _h, data = self.ctl("GET", "/summary")
        assert st == 200
        return {k: int(v) for k, v in (line.split() for line in data.decode().splitlines())}

    def series_total(self, type_id, selector, headers=None):
        st, js = self.query("SelectSeries", {"profileTypeID": type_id, "labelSelector": selector,
                                             "start": now_ms() - 3600000, "end": now_ms() + 60000,
                                             "step": 1}, headers)
        assert st == 200, js
        return sum(p["value"] for s in js["series"] for p in s["points"])


def pb_quote(s):
    import urllib.parse
    return urllib.parse.quote(s, safe="")


def now_ms():
    return int(time.time() * 1000)


ALLOC_SPACE = "memory:alloc_space:bytes:space:bytes"
INUSE_SPACE = "memory:inuse_space:bytes:space:bytes"


class WireTests(unittest.TestCase):
    """The decoder against hand-assembled bytes."""

    def test_varint_and_fields(self):
        self.assertEqual(pb.read_varint(b"\xac\x02", 0), (300, 2))
        fields = list(pb.fields(b"\x08\x96\x01\x12\x03abc"))
        self.assertEqual(fields, [(1, 0, 150), (2, 2, b"abc")])
        with self.assertRaises(pb.DecodeError):
            list(pb.fields(b"\x12\x05ab"))

    def test_pprof_literal(self):
        # sample_type {type:1 unit:2}, sample {location_id:[1] value:[7]},
        # location {id:1 line{function_id:1}}, function {id:1 name:3}, strings
        data = (b"\x0a\x04\x08\x01\x10\x02" b"\x12\x06\x0a\x01\x01\x12\x01\x07"
                b"\x22\x06\x08\x01\x22\x02\x08\x01" b"\x2a\x04\x08\x01\x10\x03"
                b"\x32\x00" b"\x32\x0binuse_space" b"\x32\x05bytes" b"\x32\x04main")
        p = pprof.decode(data)
        self.assertEqual(p.sample_types, [("inuse_space", "bytes")])
        self.assertEqual(p.samples[0]["values"], [7])
        self.assertEqual(p.stack(p.samples[0]), ("main",))


class NameTests(unittest.TestCase):
    def test_parse(self):
        P = ingestion.parse_name
        self.assertEqual(P("app"), ("app", {}))
        self.assertEqual(P("my.app-1/x{env=prod,region=eu}"), ("my.app-1/x", {"env": "prod", "region": "eu"}))
        self.assertEqual(P("app{ k = v , k2=v2 }"), ("app", {"k": "v", "k2": "v2"}))
        self.assertEqual(P("app{k=a,k=b}"), ("app", {"k": "b"}))
        self.assertEqual(P("app{__x=1,__session_id__=s,y=2}"), ("app", {"__session_id__": "s", "y": "2"}))
        self.assertEqual(P("app{service_name=svc}"), ("app", {"service_name": "svc"}))
        self.assertEqual(P("app{}"), ("app", {}))
        for bad in ["", "{a=b}", "app name", "app{a}", "app{a-b=c}", "app{a=b", "app!"]:
            with self.assertRaises(ingestion.NameError400, msg=bad):
                P(bad)

    def test_times(self):
        T = ingestion.parse_time_ms
        self.assertEqual(T("1700000000", 5), 1700000000000)
        self.assertEqual(T("1700000000123", 5), 1700000000123)
        self.assertEqual(T("1700000000123456", 5), 1700000000123)
        self.assertEqual(T("1700000000123456789", 5), 1700000000123)
        self.assertEqual(T(None, 5), 5)
        self.assertEqual(T("now-1h", 3600000 * 2), 3600000)
        self.assertEqual(T("garbage", 9), 9)

    def test_selector(self):
        sel = store.parse_selector('{service_name="a", env!="x", r=~"e.*", q!~"z"}')
        self.assertTrue(store.matches({"service_name": "a", "env": "y", "r": "eu", "q": "w"}, sel))
        self.assertFalse(store.matches({"service_name": "b"}, sel))
        with self.assertRaises(store.QueryError):
            store.parse_selector("service_name=a")


class ServerCase(unittest.TestCase):
    args = []

    def unnamed_push_service(self):
        """The service_name a Push without one is stored under."""
        prof = heap_profile([(("main",), [1, 1, 1, 1])])
        st, _h, _b = self.srv.push([{"labels": [("__name__", "memory")], "samples": [(prof, "")]}])
        self.assertEqual(st, 200)
        return self.srv.query("LabelValues", {"name": "service_name"})[1]["names"]

    def setUp(self):
        self.srv = Server(*self.args)

    def tearDown(self):
        self.srv.close()


class IngestTests(ServerCase):
    def test_multipart_gzip_stored_and_queried(self):
        prof = heap_profile([(("main", "alloc"), [10, 1000, 2, 200]), (("main", "other"), [1, 50, 1, 50])])
        st, _h, body = self.srv.ingest("svc{env=test}", prof, "&spyName=mimprof")
        self.assertEqual((st, body), (200, b""))
        self.assertEqual(self.srv.series_total(ALLOC_SPACE, '{service_name="svc"}'), 1050)
        self.assertEqual(self.srv.series_total(INUSE_SPACE, '{service_name="svc",env="test"}'), 250)
        st, js = self.srv.query("LabelValues", {"name": "pyroscope_spy", "start": now_ms() - 60000,
                                                "end": now_ms() + 60000})
        self.assertEqual(js["names"], ["mimprof"])
        st, js = self.srv.query("LabelValues", {"name": "__delta__"})
        self.assertEqual(js["names"], [])  # v2 removes the label
        st, js = self.srv.query("ProfileTypes", {})
        ids = [t["ID"] for t in js["profileTypes"]]
        self.assertIn(ALLOC_SPACE, ids)
        self.assertIn("memory:inuse_objects:count:space:bytes", ids)
        st, js = self.srv.query("SelectMergeProfile", {"profileTypeID": ALLOC_SPACE,
                                                       "labelSelector": '{service_name="svc"}',
                                                       "start": now_ms() - 60000, "end": now_ms() + 60000})
        self.assertEqual(st, 200)
        names = js["stringTable"]
        self.assertIn("alloc", names)
        self.assertEqual(sorted(int(s["value"][0]) for s in js["sample"]), [50, 1000])

    def test_render_flamebearer(self):
        self.srv.ingest("svc", heap_profile([(("main", "a"), [1, 30, 1, 30]), (("main", "b"), [1, 10, 1, 10])]))
        q = "/pyroscope/render?query=" + pb_quote(INUSE_SPACE + '{service_name="svc"}') + "&from=now-1h&format=json"
        st, _h, data = self.srv.request("GET", q)
        self.assertEqual(st, 200)
        fb = json.loads(data)["flamebearer"]
        self.assertEqual(fb["numTicks"], 40)
        names = fb["names"]
        self.assertEqual(fb["levels"][0], [0, 40, 0, names.index("total")])
        self.assertEqual(fb["levels"][1], [0, 40, 0, names.index("main")])
        self.assertEqual(fb["levels"][2], [0, 30, 30, names.index("a"), 0, 10, 10, names.index("b")])

    def test_proto_queries(self):
        self.srv.ingest("svc", heap_profile([(("main",), [1, 64, 1, 64])]))
        req = (pb.f_str(1, INUSE_SPACE) + pb.f_str(2, '{service_name="svc"}') +
               pb.f_varint(3, now_ms() - 60000) + pb.f_varint(4, now_ms() + 60000))
        st, h, data = self.srv.request("POST", "/querier.v1.QuerierService/SelectMergeProfile", req,
                                       {"Content-Type": "application/proto"})
        self.assertEqual((st, h["Content-Type"]), (200, "application/proto"))
        p = pprof.decode(data)
        self.assertEqual(p.sample_types, [("inuse_space", "bytes")])
        self.assertEqual(p.samples[0]["values"], [64])
        st, h, data = self.srv.request("POST", "/querier.v1.QuerierService/SelectSeries",
                                       req + pb.f_double(6, 1.0), {"Content-Type": "application/proto"})
        series = [v for n, w, v in pb.fields(data)]
        points = [v2 for n, w, v in pb.fields(series[0]) if n == 2 for v2 in [v]]
        value = [pb.as_double(w, v) for n, w, v in pb.fields(points[0]) if n == 1][0]
        self.assertEqual(value, 64.0)

    def test_proto_merge_of_nothing_is_an_empty_body(self):
        # as v2.2.1 answers: HTTP 200 and 0 bytes (an empty protobuf message)
        req = (pb.f_str(1, INUSE_SPACE) + pb.f_str(2, '{service_name="none"}') +
               pb.f_varint(3, now_ms() - 60000) + pb.f_varint(4, now_ms() + 60000))
        st, _h, data = self.srv.request("POST", "/querier.v1.QuerierService/SelectMergeProfile",
                                        req, {"Content-Type": "application/proto"})
        self.assertEqual((st, data), (200, b""))

    def test_filename_rule(self):
        prof = gzip.compress(heap_profile([(("main",), [1, 1, 1, 1])]))
        body, ctype = multipart([("profile", None, prof)])
        st, _h, _b = self.srv.request("POST", "/ingest?name=svc", body, {"Content-Type": ctype})
        self.assertEqual(st, 200)
        self.assertEqual(self.srv.series_total(INUSE_SPACE, '{service_name="svc"}'), 0)

    def test_prev_profile_422(self):
        prof = gzip.compress(heap_profile([(("main",), [1, 1, 1, 1])]))
        body, ctype = multipart([("profile", "p.pprof", prof), ("prev_profile", "pp.pprof", prof)])
        st, _h, data = self.srv.request("POST", "/ingest?name=svc", body, {"Content-Type": ctype})
        self.assertEqual(st, 422)
        msg = json.loads(data)["message"]
        self.assertTrue(msg.startswith("parsing IngestInput-pprof failed "), msg)
        self.assertIn("unsupported client version", msg)

    def test_empty_profile_and_missing_part(self):
        st, _h, _b = self.srv.ingest("svc", heap_profile([]))
        self.assertEqual(st, 200)
        body, ctype = multipart([("other", "x", b"abc")])
        st, _h, _b = self.srv.request("POST", "/ingest?name=svc", body, {"Content-Type": ctype})
        self.assertEqual(st, 200)
        _s, _h, summary = self.srv.ctl("GET", "/summary")
        self.assertIn(b"profiles 0\n", summary)

    def test_invalid_profile_422_json(self):
        st, h, data = self.srv.ingest("svc", b"\xff\xff\xff not a profile")
        self.assertEqual(st, 422)
        self.assertEqual(h["Content-Type"], "application/json")
        err = json.loads(data)
        self.assertEqual(set(err), {"code", "message"})

    def test_bad_name_400(self):
        st, _h, data = self.srv.ingest("bad name{", heap_profile([(("m",), [1, 1, 1, 1])]))
        self.assertEqual(st, 400)
        self.assertIn("message", json.loads(data))

    def test_raw_format_pprof(self):
        prof = heap_profile([(("main",), [1, 10, 1, 10])])
        st, _h, _b = self.srv.request("POST", "/ingest?name=raw&format=pprof", gzip.compress(prof),
                                      {"Content-Type": "application/octet-stream"})
        self.assertEqual(st, 200)
        self.assertEqual(self.srv.series_total(INUSE_SPACE, '{service_name="raw"}'), 10)
        body, ctype = multipart([("profile", "p", gzip.compress(prof))])
        st, _h, _b = self.srv.request("POST", "/ingest?name=raw&format=pprof", body, {"Content-Type": ctype})
        self.assertEqual(st, 422)

    def test_from_is_fallback_for_time_nanos_0(self):
        prof = heap_profile([(("main",), [1, 10, 1, 10])], time_nanos=0)
        t = now_ms() - 120000
        self.srv.ingest("svc", prof, "&from=%d&until=%d" % (t, t + 10000))
        _s, _h, tsv = self.srv.ctl("GET", "/profiles.tsv")
        self.assertEqual({int(line.split("\t")[1]) for line in tsv.decode().splitlines()}, {t})

    def test_validation_422(self):
        old = heap_profile([(("main",), [1, 1, 1, 1])], time_nanos=NOW_NS - 7200 * 10**9)
        self.assertEqual(self.srv.ingest("svc", old)[0], 422)
        dash = heap_profile([(("main",), [1])], types=[("inuse-space", "bytes")])
        self.assertEqual(self.srv.ingest("svc", dash)[0], 422)
        b = pprof.Builder([("inuse_space", "bytes")])
        b.add(("main",), [1, 2])
        self.assertEqual(self.srv.ingest("svc", b.encode())[0], 422)
        tags = ",".join("t%d=v" % i for i in range(27))
        self.assertEqual(self.srv.ingest("svc{%s}" % tags, heap_profile([(("m",), [1, 1, 1, 1])]))[0], 422)
        tags = ",".join("t%d=v" % i for i in range(26))
        self.assertEqual(self.srv.ingest("svc{%s}" % tags, heap_profile([(("m",), [1, 1, 1, 1])]))[0], 200)

    def test_body_limit_413(self):
        self.srv.ctl("POST", "/config", {"body_limit": 300})
        big = heap_profile([(("f%d" % i,), [1, 1, 1, 1]) for i in range(200)])
        st, _h, data = self.srv.ingest("svc", big, gz=False)
        self.assertEqual(st, 413)
        self.assertEqual(json.loads(data)["message"], "request body too large")

    def test_rate_limit_is_422_on_ingest_429_on_push(self):
        # the distributor's resource_exhausted: /ingest wraps it in a 422
        self.srv.ctl("POST", "/config", {"rate_limit_mb": 0.001, "rate_burst_mb": 0.002})
        prof = heap_profile([(("f%d" % i,), [1, 1, 1, 1]) for i in range(40)])
        answers = [self.srv.ingest("svc", prof) for _ in range(5)]
        self.assertEqual(answers[0][0], 200)
        limited = [json.loads(b) for st, _h, b in answers if st == 422]
        self.assertTrue(limited)
        self.assertEqual(limited[0]["code"], "unknown")
        self.assertRegex(limited[0]["message"],
                         r"^pushing IngestInput-pprof failed resource_exhausted: push rate limit "
                         r"\(1.0 KiB\) exceeded while adding [0-9.]+ KiB$")
        st, _h, body = self.srv.push([{"labels": [("__name__", "memory"), ("service_name", "p")],
                                        "samples": [(prof, "")]}])
        self.assertEqual((st, json.loads(body)["code"]), (429, "resource_exhausted"))

    def test_validation_error_is_422_invalid_argument(self):
        big = heap_profile([(("f%d" % i,), [1, 1, 1, 1]) for i in range(16001)])
        st, _h, body = self.srv.ingest("svc", big)
        self.assertEqual(st, 422)
        msg = json.loads(body)["message"]
        self.assertTrue(msg.startswith("pushing IngestInput-pprof failed invalid_argument: the "
                                       "profile with labels '{"), msg)
        self.assertIn("exceeds the samples count limit (max_profile_stacktrace_samples, "
                      "actual: 16001, limit: 16000)", msg)


class TenantTests(ServerCase):
    args = ["--multitenancy"]

    def test_401_and_isolation(self):
        prof = heap_profile([(("main",), [1, 5, 1, 5])])
        st, _h, data = self.srv.ingest("svc", prof)
        self.assertEqual(st, 401)
        self.assertEqual(json.loads(data)["code"], "unauthenticated")
        self.assertEqual(self.srv.ingest("svc", prof, headers={"X-Scope-OrgID": "t1"})[0], 200)
        self.assertEqual(self.srv.series_total(INUSE_SPACE, '{service_name="svc"}', {"X-Scope-OrgID": "t1"}), 5)
        self.assertEqual(self.srv.series_total(INUSE_SPACE, '{service_name="svc"}', {"X-Scope-OrgID": "t2"}), 0)
        st, _js = self.srv.query("ProfileTypes", {})
        self.assertEqual(st, 401)


class AuthProxyTests(ServerCase):
    args = ["--auth", "basic:123:tok"]

    def test_basic(self):
        prof = heap_profile([(("main",), [1, 5, 1, 5])])
        self.assertEqual(self.srv.ingest("svc", prof)[0], 401)
        good = "Basic " + base64.b64encode(b"123:tok").decode()
        self.assertEqual(self.srv.ingest("svc", prof, headers={"Authorization": good})[0], 200)


class PushTests(ServerCase):
    def labels(self, **extra):
        lab = [("__name__", "memory"), ("service_name", "psvc")]
        return lab + list(extra.items())

    def test_push_proto_and_defaults(self):
        prof = gzip.compress(heap_profile([(("main",), [2, 20, 1, 10])]))
        st, h, body = self.srv.push([{"labels": self.labels(env="x"), "samples": [(prof, "")]}])
        self.assertEqual((st, body), (200, b""))
        self.assertEqual(h["Content-Type"], "application/proto")
        self.assertEqual(self.srv.series_total(ALLOC_SPACE, '{service_name="psvc",env="x"}'), 20)
        raw = heap_profile([(("main",), [1, 1, 1, 1])])
        self.srv.push([{"labels": [("__name__", "memory")], "samples": [(raw, "")]}])
        st, js = self.srv.query("LabelValues", {"name": "service_name"})
        self.assertEqual(js["names"], ["psvc", "unknown_service"])

    def test_one_profile_per_series_and_millisecond(self):
        """Pyroscope keeps one profile per series, type and millisecond:
        a second one in the same millisecond (a part of a split report, a
        forked child's report) is a replica and not counted; another
        millisecond or another series is."""
        base = NOW_NS - NOW_NS % 1000000
        for ns, env, v in [(base, "a", 100), (base + 999999, "a", 7), (base + 1000000, "a", 20),
                           (base, "b", 3000)]:
            prof = heap_profile([(("main",), [1, v, 1, v])], time_nanos=ns)
            st, _h, _b = self.srv.push([{"labels": self.labels(env=env), "samples": [(prof, "")]}])
            self.assertEqual(st, 200)
        self.assertEqual(self.srv.series_total(ALLOC_SPACE, '{service_name="psvc",env="a"}'), 120)
        self.assertEqual(self.srv.series_total(ALLOC_SPACE, '{service_name="psvc"}'), 3120)
        # the range compares time_nanos with its milliseconds in ns, both
        # ends included: base + 1 ms is in [base - 1 ms, base + 1 ms] only
        ms = base // 1000000
        st, js = self.srv.query("SelectMergeProfile", {
            "profileTypeID": ALLOC_SPACE, "labelSelector": '{env="a"}', "start": ms, "end": ms})
        self.assertEqual(sum(js.get("sample", [{}])[0].get("value", ["0"]) and
                             int(x["value"][0]) for x in js.get("sample", [])), 100)

    def test_push_missing_name_400(self):
        prof = heap_profile([(("main",), [1, 1, 1, 1])])
        st, h, data = self.srv.push([{"labels": [("service_name", "x")], "samples": [(prof, "")]}])
        self.assertEqual(st, 400)
        self.assertEqual(json.loads(data)["code"], "invalid_argument")

    def test_push_gzip_body_and_json(self):
        prof = heap_profile([(("main",), [1, 7, 1, 7])])
        body = gzip.compress(ingestion.encode_push_proto([{"labels": self.labels(), "samples": [(prof, "")]}]))
        st, _h, _b = self.srv.request("POST", "/push.v1.PusherService/Push", body,
                                      {"Content-Type": "application/proto", "Content-Encoding": "gzip"})
        self.assertEqual(st, 200)
        js = {"series": [{"labels": [{"name": "__name__", "value": "memory"},
                                     {"name": "service_name", "value": "jsvc"}],
                          "samples": [{"rawProfile": base64.b64encode(prof).decode()}]}]}
        st, _h, body = self.srv.request("POST", "/push.v1.PusherService/Push", json.dumps(js).encode(),
                                        {"Content-Type": "application/json"})
        self.assertEqual((st, body), (200, b"{}"))
        self.assertEqual(self.srv.series_total(INUSE_SPACE, '{service_name=~"psvc|jsvc"}'), 14)


class DeltaV1Tests(ServerCase):
    args = ["--storage", "v1"]
    sent = 0

    def next_ns(self):
        """A millisecond of its own for each profile (one per millisecond
        is kept)."""
        self.sent += 1
        return NOW_NS + self.sent * 1000000

    def push_alloc(self, value, delta_label=None, sample_labels=None):
        lab = [("__name__", "memory"), ("service_name", "d")]
        if delta_label is not None:
            lab.append(("__delta__", delta_label))
        prof = heap_profile([(("main",), [value, value * 10, 1, 100])], sample_labels=sample_labels,
                            time_nanos=self.next_ns())
        st, _h, _b = self.srv.push([{"labels": lab, "samples": [(prof, "")]}])
        self.assertEqual(st, 200)

    def test_server_side_delta_without_label(self):
        for v in (5, 8, 3, 7):   # stored: empty, 3, reset: dropped and rebaselined, 4
            self.push_alloc(v)
        self.assertEqual(self.srv.series_total("memory:alloc_objects:count:space:bytes", "{}"), 7)
        self.assertEqual(self.srv.series_total(INUSE_SPACE, "{}"), 400)  # never delta'd

    def test_delta_false_series_label(self):
        for v in (5, 8, 3):
            self.push_alloc(v, "false")
        self.assertEqual(self.srv.series_total("memory:alloc_objects:count:space:bytes", "{}"), 16)
        st, js = self.srv.query("LabelValues", {"name": "__delta__"})
        self.assertEqual(js["names"], [], "1.x removes __delta__ before storing")

    def test_delta_false_sample_label_promoted(self):
        for v in (5, 8):
            self.push_alloc(v, None, {"__delta__": "false"})
        self.assertEqual(self.srv.series_total("memory:alloc_objects:count:space:bytes", "{}"), 13)

    def test_ingest_is_never_delta(self):
        for v in (5, 8):
            self.srv.ingest("isvc", heap_profile([(("main",), [v, v, 1, 1])], time_nanos=self.next_ns()))
        self.assertEqual(self.srv.series_total("memory:alloc_objects:count:space:bytes", "{}"), 13)


def freed_spike_profile():
    """What mimprof's profiling library reports: per stack an interval
    sample labelled __delta__="false" and a live sample without labels.
    `spike` was allocated and freed (no live twin); `kept` is still live."""
    return heap_profile([(("main", "spike"), [5, 5000, 0, 0]),
                         (("main", "kept"), [2, 200, 0, 0]),
                         (("main", "kept"), [0, 0, 1, 100])],
                        sample_labels={"__delta__": "false"}, labelled={0, 1})


class Version113Tests(ServerCase):
    args = ["--version", "1.13"]
    ALLOC = "memory:alloc_space:bytes:space:bytes"

    def push_labels(self, extra, prof=None):
        lab = [("__name__", "memory"), ("service_name", "v")] + extra
        prof = prof or heap_profile([(("main",), [1, 1, 1, 1])])
        return self.srv.push([{"labels": lab, "samples": [(prof, "")]}])

    def test_label_split_loses_samples_without_an_unlabelled_twin(self):
        # pprof_split merges the labelled group into the unlabelled one
        # through a copy: `spike` is lost, `kept`'s twin is summed
        st, _h, _b = self.srv.ingest("svc", freed_spike_profile())
        self.assertEqual(st, 200)
        self.assertEqual(self.srv.series_total(self.ALLOC, '{service_name="svc"}'), 200)
        self.assertEqual(self.srv.summary()["split_lost_samples"], 1)
        st, _h, _b = self.push_labels([("__delta__", "false")], freed_spike_profile())
        self.assertEqual(st, 200)
        self.assertEqual(self.srv.series_total(self.ALLOC, '{service_name="v"}'), 200)

    def test_unlabelled_profile_kept_whole(self):
        prof = heap_profile([(("main", "spike"), [5, 5000, 0, 0]), (("main", "kept"), [2, 200, 1, 100])])
        self.assertEqual(self.srv.ingest("svc", prof)[0], 200)
        self.assertEqual(self.srv.series_total(self.ALLOC, '{service_name="svc"}'), 5200)

    def test_label_names_sanitized(self):
        st, _h, body = self.push_labels([("1az", "x")])
        self.assertEqual(st, 400)
        self.assertIn("invalid label name '1az'", json.loads(body)["message"])
        st, _h, body = self.srv.ingest("svc{1az=x}", heap_profile([(("main",), [1, 1, 1, 1])]))
        self.assertEqual(st, 422)
        self.assertIn("pushing IngestInput-pprof failed invalid_argument: invalid labels",
                      json.loads(body)["message"])
        self.assertEqual(self.push_labels([("k8s.pod", "p1")])[0], 200)
        st, js = self.srv.query("LabelValues", {"name": "k8s_pod"})
        self.assertEqual(js["names"], ["p1"])
        st, _h, body = self.push_labels([("a.b", "1"), ("a_b", "2")])
        self.assertEqual(st, 400)
        self.assertIn("duplicate label name", json.loads(body)["message"])

    def test_push_without_service_name_is_unspecified(self):
        self.assertEqual(self.unnamed_push_service(), ["unspecified"])

    def test_no_body_limit(self):
        self.srv.ctl("POST", "/config", {"body_limit": 300})
        big = heap_profile([(("f%d" % i,), [1, 1, 1, 1]) for i in range(200)])
        self.assertEqual(self.srv.ingest("svc", big, gz=False)[0], 200)


class Version20Tests(ServerCase):
    args = ["--version", "2.0"]

    def test_label_split_keeps_every_sample(self):
        self.assertEqual(self.srv.ingest("svc", freed_spike_profile())[0], 200)
        self.assertEqual(self.srv.series_total("memory:alloc_space:bytes:space:bytes",
                                               '{service_name="svc"}'), 5200)
        self.assertNotIn("split_lost_samples", self.srv.summary())

    def test_label_names_kept(self):
        lab = [("__name__", "memory"), ("service_name", "v"), ("1az", "x"), ("k8s.pod", "p1")]
        prof = heap_profile([(("main",), [1, 1, 1, 1])])
        self.assertEqual(self.srv.push([{"labels": lab, "samples": [(prof, "")]}])[0], 200)
        st, js = self.srv.query("LabelValues", {"name": "k8s.pod"})
        self.assertEqual(js["names"], ["p1"])

    def test_push_without_service_name_is_unknown_service(self):
        self.assertEqual(self.unnamed_push_service(), ["unknown_service"])


class QueryValidationTests(ServerCase):
    def test_ranges(self):
        t = now_ms()
        for start, end in [(0, t), (t, 0), (t, t - 1), (t - 25 * 3600000, t)]:
            st, js = self.srv.query("SelectSeries", {"profileTypeID": ALLOC_SPACE, "labelSelector": "{}",
                                                     "start": start, "end": end, "step": 1})
            self.assertEqual(st, 400, (start, end))
            self.assertEqual(js["code"], "invalid_argument")

    def test_series_buckets_group_by_average(self):
        base = (now_ms() // 10000) * 10000 - 60000
        for i, env in enumerate(["a", "b", "a"]):
            prof = heap_profile([(("main",), [1, 1, 1, 10 * (i + 1)])], time_nanos=(base + i * 1000) * 10**6)
            self.srv.ingest("svc{env=%s}" % env, prof)
        st, js = self.srv.query("SelectSeries", {"profileTypeID": INUSE_SPACE, "labelSelector": "{}",
                                                 "start": base, "end": base + 10000, "step": 10,
                                                 "groupBy": ["env"],
                                                 "aggregation": "TIME_SERIES_AGGREGATION_TYPE_AVERAGE"})
        got = {s["labels"][0]["value"]: [(p["value"], p["timestamp"]) for p in s["points"]]
               for s in js["series"]}
        self.assertEqual(got, {"a": [(20.0, str(base))], "b": [(20.0, str(base))]})


class FaultTests(ServerCase):
    def test_500_ratelimit_count_then_ok(self):
        prof = heap_profile([(("main",), [1, 1, 1, 1])])
        self.srv.ctl("POST", "/fault", {"mode": "500", "count": 1})
        st, _h, data = self.srv.ingest("svc", prof)
        self.assertEqual(st, 500)
        self.assertEqual(self.srv.ingest("svc", prof)[0], 200)
        self.srv.ctl("POST", "/fault", {"mode": "ratelimit"})
        st, _h, data = self.srv.ingest("svc", prof)
        self.assertEqual(st, 422)
        self.assertIn("pushing IngestInput-pprof failed resource_exhausted: push rate limit",
                      json.loads(data)["message"])
        st, _h, data = self.srv.push([{"labels": [("__name__", "memory")], "samples": [(prof, "")]}])
        self.assertEqual((st, json.loads(data)["code"]), (429, "resource_exhausted"))

    def test_down_refuses_then_up(self):
        self.srv.ctl("POST", "/fault", {"mode": "down"})
        with self.assertRaises(ConnectionRefusedError):
            self.srv.ingest("svc", heap_profile([(("main",), [1, 1, 1, 1])]))
        self.srv.ctl("POST", "/fault", {"mode": "none"})
        self.assertEqual(self.srv.ingest("svc", heap_profile([(("main",), [1, 1, 1, 1])]))[0], 200)

    def test_down_for_duration(self):
        self.srv.ctl("POST", "/fault", {"mode": "down", "duration_ms": 300})
        # back up after 300 ms by its own timer: waited for, not assumed
        # after a fixed sleep (a loaded machine runs the timer late)
        time.sleep(0.3)
        deadline = time.monotonic() + 30
        while not json.loads(self.srv.ctl("GET", "/status")[2])["up"]:
            self.assertLess(time.monotonic(), deadline, "not up again 30 s after a 300 ms outage")
            time.sleep(0.05)
        self.assertEqual(self.srv.ingest("svc", heap_profile([(("main",), [1, 1, 1, 1])]))[0], 200)

    def test_reset(self):
        self.srv.ctl("POST", "/fault", {"mode": "reset", "count": 1})
        with self.assertRaises((ConnectionResetError, http.client.RemoteDisconnected, BrokenPipeError)):
            self.srv.ingest("svc", heap_profile([(("main",), [1, 1, 1, 1])]))

    def test_slow(self):
        self.srv.ctl("POST", "/fault", {"mode": "slow", "slow_ms": 400, "count": 1})
        conn = http.client.HTTPConnection("127.0.0.1", self.srv.port, timeout=0.1)
        body, ctype = multipart([("profile", "p", heap_profile([(("main",), [1, 1, 1, 1])]))])
        conn.request("POST", "/ingest?name=svc", body, {"Content-Type": ctype})
        with self.assertRaises(socket.timeout):
            conn.getresponse()
        conn.close()

    def test_requests_recorded(self):
        self.srv.ingest("svc", heap_profile([(("main",), [1, 1, 1, 1])]), headers={"X-Test": "1"})
        _s, _h, data = self.srv.ctl("GET", "/requests")
        reqs = json.loads(data)["requests"]
        self.assertEqual(len(reqs), 1)
        self.assertIn(["X-Test", "1"], reqs[0]["headers"])
        self.assertTrue(base64.b64decode(reqs[0]["body"]).startswith(b"--mimprofboundary123"))


class TlsTests(ServerCase):
    args = ["--tls-cert", os.path.join(HERE, "testdata", "cert.pem"),
            "--tls-key", os.path.join(HERE, "testdata", "key.pem")]

    def test_https(self):
        ctx = ssl.create_default_context(cafile=os.path.join(HERE, "testdata", "cert.pem"))
        st, _h, body = self.srv.request("GET", "/ready", tls=ctx)
        self.assertEqual((st, body), (200, b"ready\n"))
        with self.assertRaises(ssl.SSLError):
            self.srv.request("GET", "/ready", tls=ssl.create_default_context())


if __name__ == "__main__":
    unittest.main(verbosity=1)
