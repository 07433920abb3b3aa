# SPDX-License-Identifier: MIT
"""A test-only pprof (profile.proto) wire encoder and decoder, standard
library only, independent of the C reader under test.

encode_profile(...) builds a profile from stacks of function names;
decode_profile(bytes) returns a plain dict with resolved stacks.
"""
import gzip
import struct


# ---------------------------------------------------------------- encoding

def _varint(v):
    if v < 0:
        v += 1 << 64
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(field, wire):
    return _varint((field << 3) | wire)


def _f_varint(field, v):
    return _key(field, 0) + _varint(v) if v else b""


def _f_bytes(field, b):
    return _key(field, 2) + _varint(len(b)) + b


def _f_packed(field, values):
    if not values:
        return b""
    return _f_bytes(field, b"".join(_varint(v) for v in values))


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
            _f_varint(1, mid) + _f_varint(2, start) + _f_varint(3, limit) + _f_varint(4, offset)
            + _f_varint(5, self.s(filename)) + _f_varint(6, self.s(build_id)))

    def sample(self, stack, values, labels=()):
        """stack: names or location ids (ints), leaf first."""
        ids = [x if isinstance(x, int) else self.location(x) for x in stack]
        lab = b"".join(_f_bytes(3, _f_varint(1, self.s(k)) + _f_varint(2, self.s(v)))
                       for k, v in labels)
        self.samples.append(_f_packed(1, ids) + _f_packed(2, list(values)) + lab)

    def encode(self, gz=False):
        out = bytearray()
        for t, u in self.sample_types:
            out += _f_bytes(1, _f_varint(1, t) + _f_varint(2, u))
        for smp in self.samples:
            out += _f_bytes(2, smp)
        for m in self.mappings:
            out += _f_bytes(3, m)
        for lid, mid, addr, fids in self.raw_locations:
            body = _f_varint(1, lid) + _f_varint(2, mid) + _f_varint(3, addr)
            for fid in fids:
                body += _f_bytes(4, _f_varint(1, fid) + _f_varint(2, 10))
            out += _f_bytes(4, body)
        for name, fid in self.functions.items():
            sys_name = self.system_names.get(name)
            out += _f_bytes(5, _f_varint(1, fid) + _f_varint(2, self.s(name))
                            + (_f_varint(3, self.s(sys_name)) if sys_name else b""))
        for st in self.strings:
            out += _f_bytes(6, st)
        if self.period_type:
            out += _f_bytes(11, _f_varint(1, self.period_type[0]) + _f_varint(2, self.period_type[1]))
        out += _f_varint(12, self.period)
        out += _f_varint(14, self.default_type)
        data = bytes(out)
        return gzip.compress(data) if gz else data


HEAP_TYPES = [("alloc_objects", "count"), ("alloc_space", "bytes"),
              ("inuse_objects", "count"), ("inuse_space", "bytes")]


# ---------------------------------------------------------------- decoding

def _read_varint(buf, i):
    v = shift = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def _fields(buf):
    i = 0
    while i < len(buf):
        key, i = _read_varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _read_varint(buf, i)
        elif wire == 2:
            n, i = _read_varint(buf, i)
            v = buf[i:i + n]
            i += n
        elif wire == 1:
            v = struct.unpack_from("<q", buf, i)[0]
            i += 8
        elif wire == 5:
            v = struct.unpack_from("<i", buf, i)[0]
            i += 4
        else:
            raise ValueError("bad wire type %d" % wire)
        yield field, wire, v


def _signed(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def _ints(wire, v):
    if wire == 0:
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = _read_varint(v, i)
        out.append(x)
    return out


def _msg(buf):
    d = {}
    for f, w, v in _fields(buf):
        d.setdefault(f, []).append((w, v))
    return d


def _one(d, f, default=0):
    return d[f][-1][1] if f in d else default


def decode_profile(data):
    """Returns {'types': [(type, unit)], 'samples': [(frames, values, labels)],
    'mappings': [...], 'period': int, 'period_type': (type, unit)} where
    frames are function names (inlined frames expanded, leaf first) or
    '0x<addr>' for locations without lines; labels {key: str}, a numeric
    label as "num unit" (mimprof's age: "600 seconds")."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    top = _msg(data)
    strings = [v.decode("utf-8", "replace") for _, v in top.get(6, [])]
    functions, locations, mappings = {}, {}, []
    for _, v in top.get(5, []):
        m = _msg(v)
        functions[_one(m, 1)] = {"name": strings[_one(m, 2)], "system_name": strings[_one(m, 3)],
                                 "filename": strings[_one(m, 4)]}
    for _, v in top.get(3, []):
        m = _msg(v)
        mappings.append({"id": _one(m, 1), "start": _one(m, 2), "limit": _one(m, 3),
                         "offset": _one(m, 4), "filename": strings[_one(m, 5)],
                         "build_id": strings[_one(m, 6)]})
    for _, v in top.get(4, []):
        m = _msg(v)
        lines = []
        for _, lv in m.get(4, []):
            lm = _msg(lv)
            fn = functions.get(_one(lm, 1), {"name": "?", "filename": ""})
            lines.append((fn["name"], fn["filename"], _one(lm, 2)))
        locations[_one(m, 1)] = {"address": _one(m, 3), "mapping": _one(m, 2), "lines": lines}
    types = []
    for _, v in top.get(1, []):
        m = _msg(v)
        types.append((strings[_one(m, 1)], strings[_one(m, 2)]))
    samples = []
    for _, v in top.get(2, []):
        m = _msg(v)
        ids = [x for w, val in m.get(1, []) for x in _ints(w, val)]
        values = [_signed(x) for w, val in m.get(2, []) for x in _ints(w, val)]
        labels = {}
        for _, lv in m.get(3, []):
            lm = _msg(lv)
            if _one(lm, 2) == 0 and (3 in lm or 4 in lm):  # numeric: "num unit"
                labels[strings[_one(lm, 1)]] = "%d %s" % (_signed(_one(lm, 3)),
                                                          strings[_one(lm, 4)])
            else:
                labels[strings[_one(lm, 1)]] = strings[_one(lm, 2)]
        frames, mapped = [], []
        for lid in ids:
            loc = locations[lid]
            if loc["lines"]:
                frames.extend(n for n, _, _ in loc["lines"])
            else:
                frames.append("0x%x" % loc["address"])
            mapped.append(loc)
        samples.append((frames, values, labels, mapped))
    pt = _msg(top[11][-1][1]) if 11 in top else {}
    return {"types": types, "samples": samples, "mappings": mappings,
            "period": _signed(_one(top, 12)),
            "time_nanos": _signed(_one(top, 9)), "duration_nanos": _signed(_one(top, 10)),
            "period_type": (strings[_one(pt, 1)], strings[_one(pt, 2)]) if pt else ("", ""),
            "locations": locations, "functions": functions,
            "comments": [strings[x] for w, val in top.get(13, []) for x in _ints(w, val)]}


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
