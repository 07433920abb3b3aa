# SPDX-License-Identifier: MIT
"""Protocol-buffers wire format, written by hand (standard library only).

Independent of any C encoder of the project: the test server decodes what
clients send with this module alone.
"""

import struct

VARINT, I64, LEN, I32 = 0, 1, 2, 5


class DecodeError(ValueError):
    """The bytes are not a valid protobuf message."""


def read_varint(buf, pos):
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise DecodeError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift >= 70:
            raise DecodeError("varint too long")
    return result & 0xFFFFFFFFFFFFFFFF, pos


def fields(buf):
    """Yields (field_number, wire_type, value); LEN values are bytes,
    VARINT values unsigned ints, I64/I32 raw bytes."""
    buf = memoryview(buf).tobytes() if not isinstance(buf, bytes) else buf
    pos = 0
    n = len(buf)
    while pos < n:
        key, pos = read_varint(buf, pos)
        num, wt = key >> 3, key & 7
        if num == 0:
            raise DecodeError("field number 0")
        if wt == VARINT:
            val, pos = read_varint(buf, pos)
        elif wt == I64:
            if pos + 8 > n:
                raise DecodeError("truncated fixed64")
            val, pos = buf[pos:pos + 8], pos + 8
        elif wt == LEN:
            ln, pos = read_varint(buf, pos)
            if ln > n - pos:
                raise DecodeError("truncated length-delimited field")
            val, pos = buf[pos:pos + ln], pos + ln
        elif wt == I32:
            if pos + 4 > n:
                raise DecodeError("truncated fixed32")
            val, pos = buf[pos:pos + 4], pos + 4
        else:
            raise DecodeError("unsupported wire type %d" % wt)
        yield num, wt, val


def to_int64(u):
    return u - (1 << 64) if u >= (1 << 63) else u


def packed_varints(wt, val):
    """A repeated varint field: packed (LEN) or one unpacked element."""
    if wt == VARINT:
        return [val]
    if wt != LEN:
        raise DecodeError("bad wire type for repeated varint")
    out = []
    pos = 0
    while pos < len(val):
        v, pos = read_varint(val, pos)
        out.append(v)
    return out


def utf8(val):
    try:
        return val.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DecodeError("invalid UTF-8 in string field") from e


def as_double(wt, val):
    if wt != I64:
        raise DecodeError("double field with wire type %d" % wt)
    return struct.unpack("<d", val)[0]


# --- encoding -------------------------------------------------------------

def enc_varint(v):
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


def key(num, wt):
    return enc_varint((num << 3) | wt)


def f_varint(num, v):
    return key(num, VARINT) + enc_varint(v) if v else b""


def f_bool(num, v):
    return key(num, VARINT) + b"\x01" if v else b""


def f_bytes(num, b):
    return key(num, LEN) + enc_varint(len(b)) + b


def f_str(num, s):
    return f_bytes(num, s.encode("utf-8")) if s else b""


def f_msg(num, b):
    return f_bytes(num, b)


def f_double(num, d):
    return key(num, I64) + struct.pack("<d", d) if d else b""


def f_packed(num, values):
    if not values:
        return b""
    return f_bytes(num, b"".join(enc_varint(v) for v in values))
