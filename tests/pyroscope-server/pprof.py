# SPDX-License-Identifier: MIT
"""pprof for the stand-in: the tests' decoder (tests/support/pprof_wire.py,
re-exported here), Pyroscope's validation and the encoder of query
answers, on top of pbwire. Field numbers from profile.proto."""

import time

import pbwire as pb
from pprof_wire import DecodeError, Profile, decode, maybe_gunzip  # noqa: F401


def _ms_text(ns):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 10**9)) + ".%03dZ" % (ns // 10**6 % 1000)


def validate(p, labels_text, size, max_samples=16000, max_bytes=4 * 1048576, max_depth=1000,
             now_ns=None):
    """Pyroscope's ValidateProfile with the default limits (reference
    section 1), in its order and with its messages (pkg/validation/
    validate.go at v1.13.4 and v2.0.2). `labels_text` is the series as the
    server prints it, `size` the uncompressed size. Returns an error
    sentence or None; truncates deep stacks in place."""
    if p.time_nanos and now_ns is not None:
        start, end = now_ns - 3600 * 10**9, now_ns + 600 * 10**9
        if not start < p.time_nanos < end:
            return ("profile with labels '%s' is outside of ingestion window (profile timestamp: "
                    "%s, the ingestion window starts at %s and ends at %s)"
                    % (labels_text, _ms_text(p.time_nanos), _ms_text(start), _ms_text(end)))
    if max_bytes and size > max_bytes:
        return ("the profile with labels '%s' exceeds the size limit (max_profile_size_byte, "
                "actual: %d, limit: %d)" % (labels_text, size, max_bytes))
    if max_samples and len(p.samples) > max_samples:
        return ("the profile with labels '%s' exceeds the samples count limit "
                "(max_profile_stacktrace_samples, actual: %d, limit: %d)"
                % (labels_text, len(p.samples), max_samples))
    for smp in p.samples:
        if len(smp["locs"]) > max_depth:
            smp["locs"] = smp["locs"][len(smp["locs"]) - max_depth:]
    loc_ids, fn_ids = p._raw_ids
    if any(i == 0 for i in loc_ids):
        return "location id is 0"
    if any(i == 0 for i in fn_ids):
        return "function id is 0"
    for t, _u in p.sample_types:
        if "-" in t:
            return "sample type contains -"
    for smp in p.samples:
        if len(smp["values"]) != len(p.sample_types):
            return "sample value count %d != sample type count %d" % (
                len(smp["values"]), len(p.sample_types))
    return None


class Builder:
    """Encodes a pprof from (stack names root-first, value) pairs."""

    def __init__(self, sample_type, period_type=("", ""), period=0, time_nanos=0, duration_nanos=0):
        self.strings = {"": 0}
        self.string_list = [""]
        self.functions = {}
        self.locations = {}
        self.samples = []
        self.sample_type = sample_type
        self.period_type = period_type
        self.period = period
        self.time_nanos = time_nanos
        self.duration_nanos = duration_nanos

    def s(self, text):
        if text not in self.strings:
            self.strings[text] = len(self.string_list)
            self.string_list.append(text)
        return self.strings[text]

    def loc(self, name):
        if name not in self.locations:
            fid = len(self.functions) + 1
            self.functions[name] = fid
            self.locations[name] = fid
        return self.locations[name]

    def add(self, stack_root_first, values):
        ids = [self.loc(n) for n in reversed(stack_root_first)]
        self.samples.append((ids, values))

    def encode(self):
        out = bytearray()
        st = [(self.s(t), self.s(u)) for t, u in self.sample_type]
        pt = (self.s(self.period_type[0]), self.s(self.period_type[1]))
        for name, fid in self.functions.items():
            self.s(name)
        for t, u in st:
            out += pb.f_msg(1, pb.f_varint(1, t) + pb.f_varint(2, u))
        for ids, values in self.samples:
            out += pb.f_msg(2, pb.f_packed(1, ids) + pb.f_packed(2, values))
        for name, lid in self.locations.items():
            line = pb.f_varint(1, self.functions[name])
            out += pb.f_msg(4, pb.f_varint(1, lid) + pb.f_msg(4, line))
        for name, fid in self.functions.items():
            out += pb.f_msg(5, pb.f_varint(1, fid) + pb.f_varint(2, self.s(name)))
        for text in self.string_list:
            out += pb.f_bytes(6, text.encode("utf-8"))
        out += pb.f_varint(9, self.time_nanos)
        out += pb.f_varint(10, self.duration_nanos)
        if pt != (0, 0):
            out += pb.f_msg(11, pb.f_varint(1, pt[0]) + pb.f_varint(2, pt[1]))
        out += pb.f_varint(12, self.period)
        return bytes(out)

    def to_json(self):
        """protojson of google.v1.Profile (int64 as strings, camelCase)."""
        st = [(self.s(t), self.s(u)) for t, u in self.sample_type]
        pt = (self.s(self.period_type[0]), self.s(self.period_type[1]))
        for name in self.functions:
            self.s(name)
        js = {"sampleType": [{"type": str(t), "unit": str(u)} for t, u in st],
              "sample": [{"locationId": [str(i) for i in ids], "value": [str(v) for v in vals]}
                         for ids, vals in self.samples],
              "location": [{"id": str(lid), "line": [{"functionId": str(self.functions[n])}]}
                           for n, lid in self.locations.items()],
              "function": [{"id": str(fid), "name": str(self.s(n))}
                           for n, fid in self.functions.items()],
              "stringTable": list(self.string_list)}
        if self.time_nanos:
            js["timeNanos"] = str(self.time_nanos)
        if self.duration_nanos:
            js["durationNanos"] = str(self.duration_nanos)
        if pt != (0, 0):
            js["periodType"] = {"type": str(pt[0]), "unit": str(pt[1])}
        if self.period:
            js["period"] = str(self.period)
        return js
