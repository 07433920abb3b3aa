#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the seed corpus of fuzz_heap_image.c into DIR:

  make_heap_image_corpus.py DIR [IMAGE...]

structured-*: programs (mode byte 1) that build a complete, valid heap of
the schema (and a few near misses); image-*: the IMAGE files given (heap
images written by mp_profiler_write_image, e.g. by tests/image/himg-target
with HIMG_SCALE=100) behind mode byte 0. See fuzz_heap_image.c for the
program encoding."""
import os
import struct
import sys

STR, WORDS, REFS, MAPPING, STACK, LIVE, INTERVAL, ROOT = range(8)
META, VERSION, CONFIG, COUNTERS, MAPPINGS, LIVES, INTERVALS = range(7)


def small(v):
    return bytes([1, v])


def word(v):
    return bytes([2]) + struct.pack("<Q", v)


def dbl(d):
    return bytes([2]) + struct.pack("<d", d)


def biased(v):
    return bytes([3]) + struct.pack("<I", v)


def strlen_of(k):
    return bytes([4, k])


def zero():
    return bytes([0])


def obj(t, values, n=None):
    head = bytes([t]) + (bytes([n]) if n is not None else b"")
    return head + b"".join(values)


def root(r, k):
    return bytes([ROOT, r, k])


def valid(frames=(0x2000, 0x2010), weight=1.0, schema=2, nstacks=1, seg=(0x1000, 0x100000)):
    p = b""
    p += obj(STR, [small(5), small(1)])                                   # 0 version
    p += obj(WORDS, [small(schema), small(1), word(2000), word(1000), small(1), small(1),
                     small(1), small(nstacks)], n=8)                      # 1 meta
    p += obj(WORDS, [word(4096), small(64), small(255), small(1), zero(), zero(), small(1),
                     small(1)], n=8)                                      # 2 config
    p += obj(WORDS, [zero()] * 17, n=17)                                  # 3 counters
    p += obj(STR, [strlen_of(2), small(2)])                               # 4 path
    p += obj(STR, [strlen_of(3), small(3)])                               # 5 build-id
    p += obj(WORDS, [biased(seg[0]), biased(seg[1]), word(0x1000)], n=3)  # 6 segments
    p += obj(MAPPING, [small(4), small(5), small(6), biased(0), small(3)])  # 7 mapping
    p += obj(REFS, [small(7)], n=1)                                       # 8 mappings
    p += obj(STACK, [zero(), zero()] + [biased(f) for f in frames], n=2 + len(frames))  # 9
    sample = [small(64), dbl(weight), small(1)]        # size, weight, generation
    if schema != 1:
        sample.append(word(3 * 10 ** 9))               # schema 2: age at the snapshot (3 s)
    p += obj(WORDS, sample, n=len(sample))                                # 10 one sample
    p += obj(LIVE, [small(9), small(10)])                                 # 11 its stack's samples
    p += obj(INTERVAL, [small(9), dbl(1.0), dbl(64.0), small(1)])         # 12 interval
    p += obj(REFS, [small(11)], n=1)                                      # 13 live
    p += obj(REFS, [small(12)], n=1)                                      # 14 intervals
    p += root(META, 1) + root(VERSION, 0) + root(CONFIG, 2) + root(COUNTERS, 3)
    p += root(MAPPINGS, 8) + root(LIVES, 13) + root(INTERVALS, 14)
    return bytes([1]) + p


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    seeds = {
        "structured-valid": valid(),
        "structured-deep": valid(frames=tuple(0x2000 + 16 * i for i in range(20))),
        "structured-outside": valid(frames=(0x2000, 0x200000)),
        "structured-bad-weight": valid(weight=-1.0),
        "structured-schema-1": valid(schema=1),   # before ages: 3 words per sample
        "structured-schema-3": valid(schema=3),   # a schema this reader does not know
        "structured-stacks-miscounted": valid(nstacks=3),
        "structured-empty-segment": valid(seg=(0x1000, 0x1000)),
    }
    for i, path in enumerate(sys.argv[2:]):
        with open(path, "rb") as f:
            seeds["image-%d" % i] = b"\x00" + f.read()
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
