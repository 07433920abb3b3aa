# SPDX-License-Identifier: MIT
"""Private memory per process, as the memory benchmarks measure it
(workers_memory.py, pg_memory.py): /proc/PID/smaps_rollup read while the
processes run, averaged over them, and the table both print."""

KEYS = ("Private_Dirty", "Anonymous", "Rss")


def rollup(pid):
    """The kB counters of /proc/PID/smaps_rollup, by name."""
    out = {}
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[2] == "kB":
                out[parts[0].rstrip(":")] = int(parts[1])
    return out


def mean(rows):
    """The mean of each of KEYS over rollup() results."""
    n = len(rows)
    return {k: sum(r.get(k, 0) for r in rows) / n for k in KEYS}


def print_table(what, rows):
    """Prints (name, mean()) rows, `what` ("per worker (kB)") heading the
    names: Private_Dirty, what it is beyond the first row's (the allocator
    alone), Anonymous."""
    base = rows[0][1]["Private_Dirty"]
    print("%-30s %14s %14s %10s" % (what, "Private_Dirty", "beyond alloc.", "Anonymous"))
    for name, r in rows:
        print("%-30s %14.0f %14.0f %10.0f" % (name, r["Private_Dirty"], r["Private_Dirty"] - base,
                                              r["Anonymous"]))
