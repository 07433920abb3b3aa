# SPDX-License-Identifier: MIT
"""A client of the collector's channel (cli/runtime/rt_collector.h) for
tests: packets as a process of the tree (or anyone who read its
MIMPROF_COLLECTOR) could send them."""
import os
import socket
import struct

MAGIC = 0x4d50433275
REPORT, MESSAGE, HELLO = 1, 2, 3
WRITE = 2
HDR = struct.Struct("=Q16sIIqQQQqq")


def channel(spec=None):
    """(abstract address, token) from MIMPROF_COLLECTOR's value."""
    spec = spec or os.environ["MIMPROF_COLLECTOR"]
    name, token = spec.rsplit(":", 1)
    return "\0" + name, bytes.fromhex(token)


def connect(spec=None):
    addr, _ = channel(spec)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(addr)
    return s


def send(kind, pid, seq=0, payload=b"", text=b"", flags=0, spec=None, token=None):
    """One packet on a connection of its own (as the runtime sends)."""
    addr, tok = channel(spec)
    s = connect(spec)
    try:
        hdr = HDR.pack(MAGIC, token if token is not None else tok, kind, flags, pid, seq,
                       len(payload) if kind == REPORT else len(text), 0, 0, 0)
        if kind == REPORT:
            fd = os.memfd_create("forged")
            os.write(fd, payload)
            socket.send_fds(s, [hdr], [fd])
            os.close(fd)
        else:
            s.send(hdr + text)
    finally:
        s.close()
