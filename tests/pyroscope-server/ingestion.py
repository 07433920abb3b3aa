# SPDX-License-Identifier: MIT
"""Request parsing of the two ingestion paths (protocol reference
sections 1 and 2): the `name` parameter, timestamps, multipart bodies and
the Push protobuf/JSON message."""

import base64
import json
import re
import time

import pbwire as pb
from pbwire import DecodeError

SERVICE_CHARS = re.compile(r"^[A-Za-z0-9_.\-/]+$")
LABEL_NAME_CHARS = re.compile(r"^[A-Za-z0-9_.]+$")
# 1.13's SanitizeLabelName: no leading digit; '.' allowed (stored as '_')
LEGACY_LABEL_NAME = re.compile(r"^[A-Za-z_.][A-Za-z0-9_.]*$")


class NameError400(ValueError):
    """A bad `name` parameter (400)."""


def parse_name(name):
    """`service{k=v,k2=v2}` -> (service, {labels}). Braces optional; a value
    ends at the first `,` or `}`; keys and values are whitespace-trimmed; a
    repeated key keeps the last value; keys starting with `__` are dropped
    except `__session_id__`."""
    if name is None:
        raise NameError400("missing name parameter")
    brace = name.find("{")
    service = (name if brace < 0 else name[:brace]).strip()
    if not service or not SERVICE_CHARS.match(service):
        raise NameError400("invalid application name %r" % service)
    labels = {}
    if brace >= 0:
        rest = name[brace + 1:]
        pos = 0
        closed = False
        while pos < len(rest):
            if rest[pos] == "}":
                closed = True
                pos += 1
                break
            eq = rest.find("=", pos)
            if eq < 0:
                raise NameError400("invalid tag: missing '=' in %r" % rest[pos:])
            key = rest[pos:eq].strip()
            end = eq + 1
            while end < len(rest) and rest[end] not in ",}":
                end += 1
            value = rest[eq + 1:end].strip()
            if not key or not LABEL_NAME_CHARS.match(key):
                raise NameError400("invalid tag key %r" % key)
            labels[key] = value
            if end >= len(rest):
                break
            if rest[end] == "}":
                closed = True
                pos = end + 1
                break
            pos = end + 1
        if not closed:
            raise NameError400("invalid name: unterminated '{'")
        if rest[pos:].strip():
            raise NameError400("invalid name: text after '}'")
    labels = {k: v for k, v in labels.items() if not k.startswith("__") or k == "__session_id__"}
    return service, labels


_REL = re.compile(r"^now(?:-(\d+)([smhd]))?$")


def parse_time_ms(text, now_ms=None):
    """`from`/`until`: 13 digits = ms, 16 = us, 19 = ns, other digits =
    seconds; `now`, `now-1h`; missing or invalid = now."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    if not text:
        return now_ms
    text = text.strip()
    if text.isdigit():
        n = int(text)
        if len(text) == 13:
            return n
        if len(text) == 16:
            return n // 1000
        if len(text) == 19:
            return n // 1000000
        return n * 1000
    m = _REL.match(text)
    if m:
        if not m.group(1):
            return now_ms
        mult = {"s": 1000, "m": 60000, "h": 3600000, "d": 86400000}[m.group(2)]
        return now_ms - int(m.group(1)) * mult
    return now_ms


def parse_multipart(content_type, body):
    """Returns [(headers dict lower-case, name, filename or None, data)]."""
    m = re.search(r'boundary="?([^";]+)"?', content_type or "")
    if not m:
        raise DecodeError("multipart without boundary")
    boundary = b"--" + m.group(1).encode("latin-1")
    parts = []
    chunks = body.split(boundary)
    if len(chunks) < 2:
        raise DecodeError("multipart boundary not found")
    for chunk in chunks[1:]:
        if chunk.startswith(b"--"):
            break
        if chunk.startswith(b"\r\n"):
            chunk = chunk[2:]
        head, sep, data = chunk.partition(b"\r\n\r\n")
        if not sep:
            raise DecodeError("multipart part without header end")
        if data.endswith(b"\r\n"):
            data = data[:-2]
        headers = {}
        for line in head.split(b"\r\n"):
            if b":" in line:
                k, v = line.split(b":", 1)
                headers[k.strip().lower().decode("latin-1")] = v.strip().decode("latin-1")
        disp = headers.get("content-disposition", "")
        nm = re.search(r'(?:^|;)\s*name="([^"]*)"', disp)
        fn = re.search(r'(?:^|;)\s*filename="([^"]*)"', disp)
        parts.append((headers, nm.group(1) if nm else None, fn.group(1) if fn else None, data))
    return parts


# --- Push -----------------------------------------------------------------

def decode_push_proto(body):
    """PushRequest -> [{"labels": [(name, value)], "samples": [(raw, id)]}]."""
    series = []
    for num, wt, val in pb.fields(body):
        if num != 1 or wt != pb.LEN:
            continue
        labels, samples = [], []
        for n2, w2, v2 in pb.fields(val):
            if n2 == 1 and w2 == pb.LEN:
                name = value = ""
                for n3, w3, v3 in pb.fields(v2):
                    if n3 == 1 and w3 == pb.LEN:
                        name = pb.utf8(v3)
                    elif n3 == 2 and w3 == pb.LEN:
                        value = pb.utf8(v3)
                labels.append((name, value))
            elif n2 == 2 and w2 == pb.LEN:
                raw, sid = b"", ""
                for n3, w3, v3 in pb.fields(v2):
                    if n3 == 1 and w3 == pb.LEN:
                        raw = v3
                    elif n3 == 2 and w3 == pb.LEN:
                        sid = pb.utf8(v3)
                samples.append((raw, sid))
        series.append({"labels": labels, "samples": samples})
    return series


def decode_push_json(body):
    try:
        msg = json.loads(body.decode("utf-8") or "{}")
    except (UnicodeDecodeError, ValueError) as e:
        raise DecodeError("invalid JSON: %s" % e) from e
    series = []
    for s in msg.get("series", []) or []:
        labels = [(lp.get("name", ""), lp.get("value", "")) for lp in s.get("labels", []) or []]
        samples = []
        for smp in s.get("samples", []) or []:
            raw = base64.b64decode(smp.get("rawProfile", "") or "")
            samples.append((raw, smp.get("ID", "") or ""))
        series.append({"labels": labels, "samples": samples})
    return series


def encode_push_proto(series):
    """For tests: [{"labels": [(n, v)], "samples": [(raw, id)]}] -> bytes."""
    out = b""
    for s in series:
        body = b""
        for n, v in s["labels"]:
            body += pb.f_msg(1, pb.f_str(1, n) + pb.f_str(2, v))
        for raw, sid in s["samples"]:
            body += pb.f_msg(2, pb.f_bytes(1, raw) + pb.f_str(2, sid))
        out += pb.f_msg(1, body)
    return out
