# SPDX-License-Identifier: MIT
"""Synthetic mimprof runs for the report tests (standard library only):
reports, peaks and threshold reports as `mimprof run` names and comments
them, written with the workspace's test-only pprof writer."""
import gzip
import os

import pprof_wire

MiB = 1 << 20
T0 = 1_800_000_000_000_000_000  # ns
pb = pprof_wire.pb


class Heap:
    """A heap profile under construction: samples with an optional age."""

    def __init__(self, program="/usr/bin/svc"):
        self.b = pprof_wire.Builder(pprof_wire.HEAP_TYPES, ("space", "bytes"), 524288)
        self.b.mapping(1, 0x1000, 0x9000, 0, program)
        self.comments = []
        self.time = self.duration = 0

    def sample(self, stack, inuse, alloc=0, age=None):
        ids = [self.b.location(n) for n in stack]
        values = [1 if alloc else 0, alloc, 1 if inuse else 0, inuse]
        label = b""
        if age is not None:
            label = pb.f_bytes(3, pb.f_varint(1, self.b.s("age")) + pb.f_varint(3, age)
                               + pb.f_varint(4, self.b.s("seconds")))
        self.b.samples.append(pb.f_packed(1, ids) + pb.f_packed(2, values) + label)

    def encode(self):
        ids = [self.b.s(c) for c in self.comments]
        out = self.b.encode() + b"".join(pb.f_varint(13, i) for i in ids)
        if self.time:
            out += pb.f_varint(9, self.time) + pb.f_varint(10, self.duration)
        return gzip.compress(out, compresslevel=1)


def memory_comments(rss, resident, live, profiler=300 * 1024):
    return ["memory rss: %d bytes (the process's resident set)" % rss,
            "memory allocator: mimalloc resident=%d committed=%d (bytes)" % (resident, 2 * rss),
            "memory live heap: %d bytes (estimated: the sum of inuse_space)" % live,
            "memory profiler: %d bytes (live table, stacks, thread records, symbol data)" % profiler]


def phased_run(d, pid=42, n=6):
    """n reports a second apart: early_site (4 MiB, old) kept, leak growing
    1 MiB a second (young); the peak of the window after report 2 holds a
    20 MiB spike_site; report 3 is a threshold report. Returns the paths."""
    os.makedirs(d, exist_ok=True)
    paths = []
    for i in range(n):
        h = Heap()
        h.sample(["early_site", "main"], 4 * MiB, age=10 + i)
        h.sample(["leak", "handle", "main"], (i + 1) * MiB, alloc=8 * MiB, age=0)
        h.sample(["cache_put", "handle", "main"], MiB // 2, alloc=2 * MiB, age=1)
        live = 4 * MiB + (i + 1) * MiB + MiB // 2
        h.comments = memory_comments(live + 6 * MiB, live + MiB, live)
        if i == 3:
            h.comments.append("report-above: written because the RSS (12.5MiB) crossed 12MiB "
                              "(--report-above 12m; the next report at 13.2MiB)")
        h.time, h.duration = T0 + i * 10**9, 10**9
        paths.append(os.path.join(d, "heap.%d.%d.pb.gz" % (pid, i)))
        with open(paths[-1], "wb") as f:
            f.write(h.encode())
        p = Heap()
        spike = 20 * MiB if i == 2 else 0
        p.sample(["early_site", "main"], 4 * MiB)
        p.sample(["leak", "handle", "main"], (i + 1) * MiB)
        if spike:
            p.sample(["spike_site", "handle", "main"], spike)
        t = T0 + i * 10**9 + 5 * 10**8
        total = 5 * MiB + (i + 1) * MiB + spike
        p.comments = ["peak: %d bytes estimated live at - (x MiB, 1 objects)" % total,
                      "peak: time_nanos=%d bytes=%d samples=3 window - .. - (the highest "
                      "estimated live heap of the window, within 1/64 below it)" % (t, total)]
        p.time = t
        paths.append(os.path.join(d, "heap.%d.%d.peak.pb.gz" % (pid, i)))
        with open(paths[-1], "wb") as f:
            f.write(p.encode())
    return paths
