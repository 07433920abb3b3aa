# SPDX-License-Identifier: MIT
"""Storage and queries of the Pyroscope stand-in (protocol reference
sections 3 and 6): series labels, v1 server-side delta or v2 as-sent
storage, and the four query methods."""

import re
import threading

MEMORY_MARKERS = ("alloc_", "inuse_")
DELTA_TYPES = ("alloc_objects", "alloc_space")


class QueryError(ValueError):
    """An invalid query (400 invalid_argument)."""


def metric_name(sample_types):
    for t, _u in sample_types:
        if any(m in t for m in MEMORY_MARKERS) or t in ("space", "objects"):
            return "memory"
    for t, u in sample_types:
        if t in ("cpu", "samples") or u == "nanoseconds":
            return "process_cpu"
    return "unknown"


# --- label selectors ------------------------------------------------------

_SEL_ITEM = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*')


def parse_selector(text):
    """`{k="v", k2!="v", k3=~"re", k4!~"re"}` -> [(name, op, value)]."""
    text = (text or "").strip()
    if text == "":
        return []
    if not (text.startswith("{") and text.endswith("}")):
        raise QueryError("parse error: label selector must be enclosed in {}: %r" % text)
    body = text[1:-1]
    out = []
    pos = 0
    while pos < len(body):
        if body[pos:].strip() == "":
            break
        m = _SEL_ITEM.match(body, pos)
        if not m:
            raise QueryError("parse error in label selector at %r" % body[pos:])
        value = bytes(m.group(3), "utf-8").decode("unicode_escape")
        if m.group(2) in ("=~", "!~"):
            try:
                re.compile(value)
            except re.error as e:
                raise QueryError("bad regex %r: %s" % (value, e)) from e
        out.append((m.group(1), m.group(2), value))
        pos = m.end()
        if pos < len(body):
            if body[pos] != ",":
                raise QueryError("parse error: expected , at %r" % body[pos:])
            pos += 1
    return out


def matches(labels, selector):
    for name, op, value in selector:
        have = labels.get(name, "")
        if op == "=" and have != value:
            return False
        if op == "!=" and have == value:
            return False
        if op == "=~" and not re.fullmatch(value, have):
            return False
        if op == "!~" and re.fullmatch(value, have):
            return False
    return True


# --- storage --------------------------------------------------------------

class Record:
    """One stored profile of one profile type in one series."""
    __slots__ = ("tenant", "labels", "type_id", "ts_ns", "stacks", "period_type", "sample_type")

    def __init__(self, tenant, labels, type_id, ts_ns, stacks, sample_type, period_type):
        self.tenant = tenant
        self.labels = labels
        self.type_id = type_id
        self.ts_ns = ts_ns                # the profile's time_nanos, kept in ns
        self.stacks = stacks            # {stack tuple (root first): value}
        self.sample_type = sample_type
        self.period_type = period_type

    @property
    def ts_ms(self):
        return self.ts_ns // 1000000

    def in_range(self, start_ms, end_ms):
        """Pyroscope compares time_nanos with the range's milliseconds
        scaled to ns, both ends included (phlaredb block_querier.go)."""
        return start_ms * 1000000 <= self.ts_ns <= end_ms * 1000000

    def replica_key(self):
        """What makes two stored profiles replicas of one: series, type and
        millisecond (v1 deduplicates at query time, block_querier.go's
        merge with deduplicate=true; v2 at compaction)."""
        return (self.tenant, tuple(sorted(self.labels.items())), self.type_id, self.ts_ms)

    def total(self):
        return sum(self.stacks.values())


class Store:
    def __init__(self, storage="v2", version="2.0"):
        if storage not in ("v1", "v2"):
            raise ValueError("storage must be v1 or v2")
        self.storage = storage
        self.version = version
        self.lock = threading.Lock()
        self.records = []
        self.delta_prev = {}   # (tenant, labels tuple, type_id) -> {stack: highest}
        self.profiles_accepted = 0

    def reset(self):
        with self.lock:
            self.records = []
            self.delta_prev = {}
            self.profiles_accepted = 0

    def split(self, series_labels, prof):
        """The distributor's split of a profile by sample labels
        (pkg/model/pprof_split): groups by label set, the unlabelled one
        first; a sample label the series already has is ignored (the series
        wins). Groups whose resulting labels are equal are merged by stack.
        In 1.13 (and 1.14) the merge works on a copy: the later group's
        samples whose stack has a twin are added to it, the others are
        lost (fixed in 1.15 by grafana/pyroscope#4365). Returns
        ([(extra labels, samples)], samples lost)."""
        groups = {}
        for smp in prof.samples:
            groups.setdefault(tuple(sorted(smp["labels"].items())), []).append(smp)
        merged = {}
        lost = 0
        for key in sorted(groups):
            extra = tuple((k, v) for k, v in key if k not in series_labels)
            if extra not in merged:
                samples = [dict(s, values=list(s["values"])) for s in groups[key]]
                merged[extra] = (samples, {tuple(s["locs"]): s for s in samples})
                continue
            samples, index = merged[extra]
            for smp in groups[key]:
                twin = index.get(tuple(smp["locs"]))
                if twin is not None:
                    twin["values"] = [a + b for a, b in zip(twin["values"], smp["values"])]
                elif self.version == "1.13":
                    lost += 1
                else:
                    copy = dict(smp, values=list(smp["values"]))
                    samples.append(copy)
                    index[tuple(smp["locs"])] = copy
        return [(extra, samples) for extra, (samples, _i) in merged.items()], lost

    def add_profile(self, tenant, series_labels, prof, ts_ns):
        """Stores a decoded pprof under `series_labels` (already holding
        __name__, service_name and, for /ingest, __delta__ and
        pyroscope_spy). String sample labels are promoted to series labels
        unless the series has that label (split()). Returns the samples the
        split lost."""
        groups, lost = self.split(series_labels, prof)
        with self.lock:
            self.profiles_accepted += 1
            for extra, samples in groups:
                labels = dict(series_labels)
                labels.update(dict(extra))
                delta_on = self.storage == "v1" and labels.get("__delta__") != "false"
                # v1 removes it before storing (phlaredb/head.go), v2 too
                labels.pop("__delta__", None)
                for i, (stype, sunit) in enumerate(prof.sample_types):
                    type_id = "%s:%s:%s:%s:%s" % (labels.get("__name__", ""), stype, sunit,
                                                  prof.period_type[0], prof.period_type[1])
                    stacks = {}
                    for smp in samples:
                        v = smp["values"][i]
                        if v:
                            st = prof.stack(smp)
                            stacks[st] = stacks.get(st, 0) + v
                    if delta_on and labels.get("__name__") == "memory" and stype in DELTA_TYPES:
                        stacks = self._delta(tenant, labels, type_id, stacks)
                    self.records.append(Record(tenant, labels, type_id, ts_ns, stacks,
                                               (stype, sunit), prof.period_type))
        return lost

    def _delta(self, tenant, labels, type_id, cur):
        """v1 ingester delta (phlaredb/delta.go): the first profile of a
        series is stored empty; later ones store each stack's increase over
        its highest value; a decrease of any stack is a reset: the whole
        profile is dropped and becomes the new baseline."""
        key = (tenant, tuple(sorted(labels.items())), type_id)
        prev = self.delta_prev.get(key)
        if prev is None:
            self.delta_prev[key] = dict(cur)
            return {}
        out = {}
        for st, v in cur.items():
            p = prev.get(st)
            if p is not None and p > v:
                self.delta_prev[key] = dict(cur)
                return {}
            out[st] = v - (p or 0)
            prev[st] = v
        return {st: d for st, d in out.items() if d}

    # --- queries -----------------------------------------------------------

    @staticmethod
    def _check_range(start, end):
        if not start or not end:
            raise QueryError("start and end must be set")
        if start > end:
            raise QueryError("start must be before end")
        if end - start > 24 * 3600 * 1000:
            raise QueryError("the query time range exceeds the limit (max_query_length, limit: 24h)")

    def _select(self, tenant, type_id, selector, start, end):
        sel = parse_selector(selector)
        with self.lock:
            found = [r for r in self.records
                     if r.tenant == tenant and (type_id is None or r.type_id == type_id)
                     and r.in_range(start, end) and matches(r.labels, sel)]
        # one profile per series, type and millisecond: the first stored
        # (both versions; 2.0 only once compacted, modelled from the start)
        seen, kept = set(), []
        for r in found:
            key = r.replica_key()
            if key not in seen:
                seen.add(key)
                kept.append(r)
        return kept

    def select_merge(self, tenant, type_id, selector, start, end):
        self._check_range(start, end)
        merged = {}
        sample_type = period_type = None
        for r in self._select(tenant, type_id, selector, start, end):
            sample_type, period_type = r.sample_type, r.period_type
            for st, v in r.stacks.items():
                merged[st] = merged.get(st, 0) + v
        if sample_type is None:
            parts = (type_id or "::::").split(":")
            parts += [""] * (5 - len(parts))
            sample_type, period_type = (parts[1], parts[2]), (parts[3], parts[4])
        return merged, sample_type, period_type

    def select_series(self, tenant, type_id, selector, start, end, step_s, group_by, aggregation):
        self._check_range(start, end)
        step_ms = int(step_s * 1000) if step_s and step_s > 0 else 15000
        series = {}
        for r in self._select(tenant, type_id, selector, start, end):
            gkey = tuple((g, r.labels[g]) for g in group_by if g in r.labels)
            bucket = start + ((r.ts_ms - start) // step_ms) * step_ms
            series.setdefault(gkey, {}).setdefault(bucket, []).append(r.total())
        out = []
        for gkey in sorted(series):
            points = []
            for ts in sorted(series[gkey]):
                vals = series[gkey][ts]
                v = sum(vals) / len(vals) if aggregation == 1 else sum(vals)
                points.append((float(v), ts))
            out.append((list(gkey), points))
        return out

    def label_values(self, tenant, name, matchers, start, end):
        sels = [parse_selector(m) for m in matchers] or [[]]
        vals = set()
        with self.lock:
            for r in self.records:
                if r.tenant != tenant or name not in r.labels:
                    continue
                if start and end and not r.in_range(start, end):
                    continue
                if any(matches(r.labels, s) for s in sels):
                    vals.add(r.labels[name])
        return sorted(vals)

    def profile_types(self, tenant, start, end):
        types = {}
        with self.lock:
            for r in self.records:
                if r.tenant != tenant:
                    continue
                if start and end and not r.in_range(start, end):
                    continue
                types[r.type_id] = r
        out = []
        for tid in sorted(types):
            parts = (tid.split(":") + [""] * 5)[:5]
            out.append({"ID": tid, "name": parts[0], "sampleType": parts[1], "sampleUnit": parts[2],
                        "periodType": parts[3], "periodUnit": parts[4]})
        return out

    def dump(self):
        with self.lock:
            return list(self.records)
