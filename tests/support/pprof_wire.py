# SPDX-License-Identifier: MIT
"""pprof (profile.proto == google.v1.Profile) for the tests, on top of
pbwire, standard library only and independent of every encoder under test.
Field numbers from profile.proto.

decode(bytes) returns a Profile with the string indices resolved (the
Pyroscope stand-in's model; DecodeError on malformed input);
decode_profile(bytes) the plain dict of the command's tests, with resolved
stacks; Builder builds a profile from stacks of function names.
"""
import gzip

import pbwire as pb
from pbwire import DecodeError

GZIP_MAGIC = b"\x1f\x8b"


# ---------------------------------------------------------------- decoding

class Profile:
    def __init__(self):
        self.sample_types = []      # [(type_str, unit_str)]
        self.samples = []           # [{"locs": [ids], "values": [ints], "labels": {k: str}, "num_labels": {k: n}}]
        self.mappings = {}          # id -> dict
        self.mapping_list = []      # the same dicts, in file order
        self.locations = {}         # id -> {"mapping": id, "address": n, "lines": [(func_id, line)]}
        self.functions = {}         # id -> {"name": str, "system_name": str, "filename": str}
        self.strings = []
        self.comments = []          # string indices
        self.drop_frames = 0        # string index
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


def _value_type(val):
    t = u = 0
    for n2, w2, v2 in pb.fields(val):
        if n2 == 1 and w2 == pb.VARINT:
            t = pb.to_int64(v2)
        elif n2 == 2 and w2 == pb.VARINT:
            u = pb.to_int64(v2)
    return t, u


def _label(val):
    """{"key", "str", "num", "num_unit"} string indices and number;
    "has_num" when the number or its unit is written."""
    lab = {"key": 0, "str": 0, "num": 0, "num_unit": 0, "has_num": False}
    for n3, w3, v3 in pb.fields(val):
        if w3 != pb.VARINT:
            continue
        name = {1: "key", 2: "str", 3: "num", 4: "num_unit"}.get(n3)
        if name:
            lab[name] = pb.to_int64(v3)
            lab["has_num"] = lab["has_num"] or n3 in (3, 4)
    return lab


def decode(data, utf8_errors="strict"):
    """Decodes uncompressed pprof bytes. Raises DecodeError (invalid UTF-8
    in a string too, unless utf8_errors is "replace")."""
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
            raw_sample_types.append(_value_type(val))
        elif num == 2 and wt == pb.LEN:
            locs, values, labels = [], [], []
            for n2, w2, v2 in pb.fields(val):
                if n2 == 1:
                    locs.extend(pb.packed_varints(w2, v2))
                elif n2 == 2:
                    values.extend(pb.to_int64(x) for x in pb.packed_varints(w2, v2))
                elif n2 == 3 and w2 == pb.LEN:
                    labels.append(_label(v2))
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
            p.strings.append(pb.utf8(val) if utf8_errors == "strict"
                             else val.decode("utf-8", utf8_errors))
        elif num == 7 and wt == pb.VARINT:
            p.drop_frames = pb.to_int64(val)
        elif num == 9 and wt == pb.VARINT:
            p.time_nanos = pb.to_int64(val)
        elif num == 10 and wt == pb.VARINT:
            p.duration_nanos = pb.to_int64(val)
        elif num == 11 and wt == pb.LEN:
            raw_period_type = _value_type(val)
        elif num == 12 and wt == pb.VARINT:
            p.period = pb.to_int64(val)
        elif num == 13:
            p.comments.extend(pb.to_int64(x) for x in pb.packed_varints(wt, val))
    s = p.strings
    if not s:
        s.append("")
    if s[0] != "":
        raise DecodeError("string_table[0] must be empty")
    p.sample_types = [(_str(s, t), _str(s, u)) for t, u in raw_sample_types]
    if raw_period_type:
        p.period_type = (_str(s, raw_period_type[0]), _str(s, raw_period_type[1]))
    for m in raw_mappings:
        m = dict(m, filename=_str(s, m["filename"]), build_id=_str(s, m["build_id"]))
        p.mappings[m["id"]] = m
        p.mapping_list.append(m)
    for fn in raw_functions:
        p.functions[fn["id"]] = {"id": fn["id"], "name": _str(s, fn["name"]),
                                 "system_name": _str(s, fn["system_name"]),
                                 "filename": _str(s, fn["filename"])}
    for loc in raw_locations:
        p.locations[loc["id"]] = loc
    for locs, values, labels in raw_samples:
        str_labels, num_labels, all_labels = {}, {}, {}
        for lab in labels:
            k = _str(s, lab["key"])
            if lab["str"]:
                str_labels[k] = _str(s, lab["str"])
            else:
                num_labels[k] = lab["num"]
            if lab["str"] == 0 and lab["has_num"]:  # numeric: "num unit"
                all_labels[k] = "%d %s" % (lab["num"], _str(s, lab["num_unit"]))
            else:
                all_labels[k] = _str(s, lab["str"])
        p.samples.append({"locs": locs, "values": values, "labels": str_labels,
                          "num_labels": num_labels, "all_labels": all_labels})
    p._raw_ids = ([loc["id"] for loc in raw_locations], [fn["id"] for fn in raw_functions])
    return p


def decode_profile(data):
    """Returns {'types': [(type, unit)], 'samples': [(frames, values, labels, locations)],
    'mappings': [...], 'period': int, 'period_type': (type, unit),
    'drop_frames': str ('' when none)} where
    frames are function names (inlined frames expanded, leaf first) or
    '0x<addr>' for locations without lines; labels {key: str}, a numeric
    label as "num unit" (mimprof's age: "600 seconds"). Gzipped or not;
    invalid UTF-8 in names decodes with replacement characters."""
    p = decode(maybe_gunzip(data), utf8_errors="replace")
    functions = {i: {"name": f["name"], "system_name": f["system_name"], "filename": f["filename"]}
                 for i, f in p.functions.items()}
    locations = {}
    for lid, loc in p.locations.items():
        lines = []
        for fid, line in loc["lines"]:
            fn = functions.get(fid, {"name": "?", "filename": ""})
            lines.append((fn["name"], fn["filename"], line))
        locations[lid] = {"address": loc["address"], "mapping": loc["mapping"], "lines": lines}
    samples = []
    for smp in p.samples:
        frames, mapped = [], []
        for lid in smp["locs"]:
            loc = locations[lid]
            if loc["lines"]:
                frames.extend(n for n, _, _ in loc["lines"])
            else:
                frames.append("0x%x" % loc["address"])
            mapped.append(loc)
        samples.append((frames, smp["values"], smp["all_labels"], mapped))
    mappings = [{k: m[k] for k in ("id", "start", "limit", "offset", "filename", "build_id")}
                for m in p.mapping_list]
    return {"types": p.sample_types, "samples": samples, "mappings": mappings,
            "period": p.period, "time_nanos": p.time_nanos, "duration_nanos": p.duration_nanos,
            "period_type": p.period_type, "locations": locations, "functions": functions,
            "comments": [_str(p.strings, x) for x in p.comments],
            "drop_frames": _str(p.strings, p.drop_frames)}


def totals(profile, type_name):
    """Sum of one sample type over all samples."""
    t = [n for n, _ in profile["types"]].index(type_name)
    return sum(s[1][t] for s in profile["samples"])


def per_function(profile, type_name):
    """{name: (flat, cum)} as pprof computes them (cum once per sample)."""
    t = [n for n, _ in profile["types"]].index(type_name)
    out = {}
    for frames, values, _, _ in profile["samples"]:
        v = values[t]
        if not frames or v == 0:
            continue
        f, c = out.get(frames[0], (0, 0))
        out[frames[0]] = (f + v, c)
        for name in set(frames):
            f, c = out.get(name, (0, 0))
            out[name] = (f, c + v)
    return out


# ---------------------------------------------------------------- encoding

class Builder:
    """Builds a pprof from samples given as stacks of names (leaf first)."""

    def __init__(self, sample_types, period_type=None, period=0, default_type=None):
        self.strings = [b""]
        self.index = {b"": 0}
        self.sample_types = [(self.s(t), self.s(u)) for t, u in sample_types]
        self.period_type = (self.s(period_type[0]), self.s(period_type[1])) if period_type else None
        self.period = period
        self.default_type = self.s(default_type) if default_type else 0
        self.functions = {}   # name -> id
        self.system_names = {}  # name -> system name, where one is given
        self.locations = {}   # (name, inline tuple) -> id
        self.mappings = []    # encoded
        self.samples = []
        self.raw_locations = []  # (id, mapping_id, address, [function ids])

    def s(self, text):
        if isinstance(text, str):
            text = text.encode("utf-8", "surrogateescape")
        if text not in self.index:
            self.index[text] = len(self.strings)
            self.strings.append(text)
        return self.index[text]

    def function(self, name):
        if name not in self.functions:
            self.functions[name] = len(self.functions) + 1
        return self.functions[name]

    def location(self, names):
        """names: one name, or a tuple (innermost inlined first)."""
        key = names if isinstance(names, tuple) else (names,)
        if key not in self.locations:
            lid = len(self.locations) + len(self.raw_locations) + 1
            self.locations[key] = lid
            self.raw_locations.append((lid, 0, 0x1000 + 16 * lid, [self.function(n) for n in key]))
        return self.locations[key]

    def address_location(self, address, mapping_id=0):
        lid = len(self.locations) + len(self.raw_locations) + 1
        self.raw_locations.append((lid, mapping_id, address, []))
        return lid

    def mapping(self, mid, start, limit, offset, filename, build_id=""):
        self.mappings.append(
            pb.f_varint(1, mid) + pb.f_varint(2, start) + pb.f_varint(3, limit) + pb.f_varint(4, offset)
            + pb.f_varint(5, self.s(filename)) + pb.f_varint(6, self.s(build_id)))

    def sample(self, stack, values, labels=()):
        """stack: names or location ids (ints), leaf first."""
        ids = [x if isinstance(x, int) else self.location(x) for x in stack]
        lab = b"".join(pb.f_bytes(3, pb.f_varint(1, self.s(k)) + pb.f_varint(2, self.s(v)))
                       for k, v in labels)
        self.samples.append(pb.f_packed(1, ids) + pb.f_packed(2, list(values)) + lab)

    def encode(self, gz=False):
        out = bytearray()
        for t, u in self.sample_types:
            out += pb.f_bytes(1, pb.f_varint(1, t) + pb.f_varint(2, u))
        for smp in self.samples:
            out += pb.f_bytes(2, smp)
        for m in self.mappings:
            out += pb.f_bytes(3, m)
        for lid, mid, addr, fids in self.raw_locations:
            body = pb.f_varint(1, lid) + pb.f_varint(2, mid) + pb.f_varint(3, addr)
            for fid in fids:
                body += pb.f_bytes(4, pb.f_varint(1, fid) + pb.f_varint(2, 10))
            out += pb.f_bytes(4, body)
        for name, fid in self.functions.items():
            sys_name = self.system_names.get(name)
            out += pb.f_bytes(5, pb.f_varint(1, fid) + pb.f_varint(2, self.s(name))
                            + (pb.f_varint(3, self.s(sys_name)) if sys_name else b""))
        for st in self.strings:
            out += pb.f_bytes(6, st)
        if self.period_type:
            out += pb.f_bytes(11, pb.f_varint(1, self.period_type[0]) + pb.f_varint(2, self.period_type[1]))
        out += pb.f_varint(12, self.period)
        out += pb.f_varint(14, self.default_type)
        data = bytes(out)
        return gzip.compress(data) if gz else data


HEAP_TYPES = [("alloc_objects", "count"), ("alloc_space", "bytes"),
              ("inuse_objects", "count"), ("inuse_space", "bytes")]
