# SPDX-License-Identifier: MIT
"""Connect query API of the stand-in (protocol reference section 6):
request decoding and response encoding in JSON and protobuf."""

import json

import pbwire as pb
from pprof import Builder

AGG_NAMES = {"TIME_SERIES_AGGREGATION_TYPE_SUM": 0, "TIME_SERIES_AGGREGATION_TYPE_AVERAGE": 1}


def _int(v):
    return int(v) if v not in (None, "") else 0


def decode_request(method, body, is_json):
    """-> dict with keys profileTypeID, labelSelector, start, end, groupBy,
    step, aggregation, name, matchers (whatever the method uses)."""
    if is_json:
        msg = json.loads(body.decode("utf-8") or "{}")
        agg = msg.get("aggregation", 0)
        if isinstance(agg, str):
            agg = AGG_NAMES.get(agg, 0)
        return {"profileTypeID": msg.get("profileTypeID", msg.get("profile_typeID", "")),
                "labelSelector": msg.get("labelSelector", msg.get("label_selector", "")),
                "start": _int(msg.get("start")), "end": _int(msg.get("end")),
                "groupBy": msg.get("groupBy", msg.get("group_by", [])) or [],
                "step": float(msg.get("step", 0) or 0), "aggregation": agg,
                "name": msg.get("name", ""), "matchers": msg.get("matchers", []) or []}
    req = {"profileTypeID": "", "labelSelector": "", "start": 0, "end": 0, "groupBy": [],
           "step": 0.0, "aggregation": 0, "name": "", "matchers": []}
    for num, wt, val in pb.fields(body):
        if method == "ProfileTypes":
            if num == 1 and wt == pb.VARINT:
                req["start"] = pb.to_int64(val)
            elif num == 2 and wt == pb.VARINT:
                req["end"] = pb.to_int64(val)
        elif method == "LabelValues":
            if num == 1 and wt == pb.LEN:
                req["name"] = pb.utf8(val)
            elif num == 2 and wt == pb.LEN:
                req["matchers"].append(pb.utf8(val))
            elif num == 3 and wt == pb.VARINT:
                req["start"] = pb.to_int64(val)
            elif num == 4 and wt == pb.VARINT:
                req["end"] = pb.to_int64(val)
        else:
            if num == 1 and wt == pb.LEN:
                req["profileTypeID"] = pb.utf8(val)
            elif num == 2 and wt == pb.LEN:
                req["labelSelector"] = pb.utf8(val)
            elif num == 3 and wt == pb.VARINT:
                req["start"] = pb.to_int64(val)
            elif num == 4 and wt == pb.VARINT:
                req["end"] = pb.to_int64(val)
            elif method == "SelectSeries" and num == 5 and wt == pb.LEN:
                req["groupBy"].append(pb.utf8(val))
            elif method == "SelectSeries" and num == 6:
                req["step"] = pb.as_double(wt, val)
            elif method == "SelectSeries" and num == 7 and wt == pb.VARINT:
                req["aggregation"] = val
    return req


def merge_response(merged, sample_type, period_type, is_json):
    b = Builder([sample_type], period_type=period_type)
    for stack in sorted(merged):
        b.add(stack, [merged[stack]])
    return json.dumps(b.to_json()).encode() if is_json else b.encode()


def series_response(series, is_json):
    if is_json:
        return json.dumps({"series": [
            {"labels": [{"name": n, "value": v} for n, v in labels],
             "points": [{"value": val, "timestamp": str(ts)} for val, ts in points]}
            for labels, points in series]}).encode()
    out = b""
    for labels, points in series:
        body = b""
        for n, v in labels:
            body += pb.f_msg(1, pb.f_str(1, n) + pb.f_str(2, v))
        for val, ts in points:
            body += pb.f_msg(2, pb.f_double(1, val) + pb.f_varint(2, ts))
        out += pb.f_msg(1, body)
    return out


def label_values_response(names, is_json):
    if is_json:
        return json.dumps({"names": names}).encode()
    return b"".join(pb.f_bytes(1, n.encode("utf-8")) for n in names)


def profile_types_response(types, is_json):
    if is_json:
        return json.dumps({"profileTypes": types}).encode()
    out = b""
    for t in types:
        out += pb.f_msg(1, pb.f_str(1, t["ID"]) + pb.f_str(2, t["name"]) +
                        pb.f_str(4, t["sampleType"]) + pb.f_str(5, t["sampleUnit"]) +
                        pb.f_str(6, t["periodType"]) + pb.f_str(7, t["periodUnit"]))
    return out


def flamebearer(merged, units, spy="unknown"):
    """The `format=json` answer of GET /pyroscope/render: Pyroscope's
    flamebearer "single" format. levels[i] holds, per node of depth i,
    [x offset from the previous node's end on that level, total, self,
    name index]; names[0] is "total"."""
    root = {"name": "total", "total": 0, "self": 0, "children": {}}
    for stack, value in merged.items():
        root["total"] += value
        node = root
        for name in stack:
            node = node["children"].setdefault(name, {"name": name, "total": 0, "self": 0, "children": {}})
            node["total"] += value
        node["self"] += value
    names, index, levels, max_self = [], {}, [], 0

    def name_id(n):
        if n not in index:
            index[n] = len(names)
            names.append(n)
        return index[n]

    prev_end = []

    def walk(node, depth, start):
        nonlocal max_self
        while len(levels) <= depth:
            levels.append([])
            prev_end.append(0)
        levels[depth] += [start - prev_end[depth], node["total"], node["self"], name_id(node["name"])]
        prev_end[depth] = start + node["total"]
        max_self = max(max_self, node["self"])
        x = start
        for child in sorted(node["children"].values(), key=lambda c: c["name"]):
            walk(child, depth + 1, x)
            x += child["total"]

    walk(root, 0, 0)
    return {"version": 1,
            "flamebearer": {"names": names, "levels": levels, "numTicks": root["total"], "maxSelf": max_self},
            "metadata": {"format": "single", "spyName": spy, "sampleRate": 100, "units": units}}
