# SPDX-License-Identifier: MIT
"""pprof (perftools.profiles.Profile == google.v1.Profile) decode, validate
and encode, on top of pbwire. Field numbers from profile.proto."""

import gzip
import time

import pbwire as pb
from pbwire import DecodeError

GZIP_MAGIC = b"\x1f\x8b"


class Profile:
    def __init__(self):
        self.sample_types = []      # [(type_str, unit_str)]
        self.samples = []           # [{"locs": [ids], "values": [ints], "labels": {k: str}, "num_labels": {k: n}}]
        self.mappings = {}          # id -> dict
        self.locations = {}         # id -> {"mapping": id, "address": n, "lines": [(func_id, line)]}
        self.functions = {}         # id -> {"name": str, "system_name": str, "filename": str}
        self.strings = []
        self.time_nanos = 0
        self.duration_nanos = 0
        self.period_type = ("", "")
        self.period = 0
        self.raw_size = 0

    def frame_names(self, loc_id):
        """Names of a location's frames, innermost first (inline order)."""
        loc = self.locations.get(loc_id)
        if loc is None:
            return ["<missing location %d>" % loc_id]
        names = []
        for fid, _line in loc["lines"]:
            fn = self.functions.get(fid)
            names.append(fn["name"] if fn and fn["name"] else "<func %d>" % fid)
        if not names:
            names.append("0x%x" % loc["address"])
        return names

    def stack(self, sample):
        """Frame names root first."""
        names = []
        for lid in sample["locs"]:
            names.extend(self.frame_names(lid))
        return tuple(reversed(names))


def maybe_gunzip(data, limit=None):
    if data[:2] == GZIP_MAGIC:
        try:
            out = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise DecodeError("bad gzip: %s" % e) from e
        return out
    return data


def _str(strings, idx):
    if idx < 0 or idx >= len(strings):
        raise DecodeError("string index %d out of range" % idx)
    return strings[idx]


def decode(data):
    """Decodes uncompressed pprof bytes. Raises DecodeError."""
    p = Profile()
    p.raw_size = len(data)
    raw_sample_types = []
    raw_samples = []
    raw_mappings = []
    raw_locations = []
    raw_functions = []
    raw_period_type = None
    for num, wt, val in pb.fields(data):
        if num == 1 and wt == pb.LEN:
            t = u = 0
            for n2, w2, v2 in pb.fields(val):
                if n2 == 1 and w2 == pb.VARINT:
                    t = pb.to_int64(v2)
                elif n2 == 2 and w2 == pb.VARINT:
                    u = pb.to_int64(v2)
            raw_sample_types.append((t, u))
        elif num == 2 and wt == pb.LEN:
            locs, values, labels = [], [], []
            for n2, w2, v2 in pb.fields(val):
                if n2 == 1:
                    locs.extend(pb.packed_varints(w2, v2))
                elif n2 == 2:
                    values.extend(pb.to_int64(x) for x in pb.packed_varints(w2, v2))
                elif n2 == 3 and w2 == pb.LEN:
                    lab = {"key": 0, "str": 0, "num": 0}
                    for n3, w3, v3 in pb.fields(v2):
                        if w3 != pb.VARINT:
                            continue
                        if n3 == 1:
                            lab["key"] = pb.to_int64(v3)
                        elif n3 == 2:
                            lab["str"] = pb.to_int64(v3)
                        elif n3 == 3:
                            lab["num"] = pb.to_int64(v3)
                    labels.append(lab)
            raw_samples.append((locs, values, labels))
        elif num == 3 and wt == pb.LEN:
            m = {"id": 0, "start": 0, "limit": 0, "offset": 0, "filename": 0, "build_id": 0,
                 "has_functions": False}
            for n2, w2, v2 in pb.fields(val):
                if w2 != pb.VARINT:
                    continue
                name = {1: "id", 2: "start", 3: "limit", 4: "offset", 5: "filename", 6: "build_id",
                        7: "has_functions"}.get(n2)
                if name:
                    m[name] = bool(v2) if name == "has_functions" else v2
            raw_mappings.append(m)
        elif num == 4 and wt == pb.LEN:
            loc = {"id": 0, "mapping": 0, "address": 0, "lines": []}
            for n2, w2, v2 in pb.fields(val):
                if n2 == 1 and w2 == pb.VARINT:
                    loc["id"] = v2
                elif n2 == 2 and w2 == pb.VARINT:
                    loc["mapping"] = v2
                elif n2 == 3 and w2 == pb.VARINT:
                    loc["address"] = v2
                elif n2 == 4 and w2 == pb.LEN:
                    fid = line = 0
                    for n3, w3, v3 in pb.fields(v2):
                        if n3 == 1 and w3 == pb.VARINT:
                            fid = v3
                        elif n3 == 2 and w3 == pb.VARINT:
                            line = pb.to_int64(v3)
                    loc["lines"].append((fid, line))
            raw_locations.append(loc)
        elif num == 5 and wt == pb.LEN:
            fn = {"id": 0, "name": 0, "system_name": 0, "filename": 0}
            for n2, w2, v2 in pb.fields(val):
                if w2 != pb.VARINT:
                    continue
                name = {1: "id", 2: "name", 3: "system_name", 4: "filename"}.get(n2)
                if name:
                    fn[name] = v2
            raw_functions.append(fn)
        elif num == 6 and wt == pb.LEN:
            p.strings.append(pb.utf8(val))
        elif num == 9 and wt == pb.VARINT:
            p.time_nanos = pb.to_int64(val)
        elif num == 10 and wt == pb.VARINT:
            p.duration_nanos = pb.to_int64(val)
        elif num == 11 and wt == pb.LEN:
            t = u = 0
            for n2, w2, v2 in pb.fields(val):
                if n2 == 1 and w2 == pb.VARINT:
                    t = pb.to_int64(v2)
                elif n2 == 2 and w2 == pb.VARINT:
                    u = pb.to_int64(v2)
            raw_period_type = (t, u)
        elif num == 12 and wt == pb.VARINT:
            p.period = pb.to_int64(val)
    s = p.strings
    if not s:
        s.append("")
    if s[0] != "":
        raise DecodeError("string_table[0] must be empty")
    p.sample_types = [(_str(s, t), _str(s, u)) for t, u in raw_sample_types]
    if raw_period_type:
        p.period_type = (_str(s, raw_period_type[0]), _str(s, raw_period_type[1]))
    for m in raw_mappings:
        p.mappings[m["id"]] = dict(m, filename=_str(s, m["filename"]), build_id=_str(s, m["build_id"]))
    for fn in raw_functions:
        p.functions[fn["id"]] = {"id": fn["id"], "name": _str(s, fn["name"]),
                                 "system_name": _str(s, fn["system_name"]),
                                 "filename": _str(s, fn["filename"])}
    for loc in raw_locations:
        p.locations[loc["id"]] = loc
    for locs, values, labels in raw_samples:
        str_labels, num_labels = {}, {}
        for lab in labels:
            k = _str(s, lab["key"])
            if lab["str"]:
                str_labels[k] = _str(s, lab["str"])
            else:
                num_labels[k] = lab["num"]
        p.samples.append({"locs": locs, "values": values, "labels": str_labels,
                          "num_labels": num_labels})
    p._raw_ids = ([loc["id"] for loc in raw_locations], [fn["id"] for fn in raw_functions])
    return p


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
