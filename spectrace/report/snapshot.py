"""What one process folder's files hold, read without trusting them: its resource
(`resource.json`), its findings' events (`events.jsonl`), a finished request's span, and
the totals of one metrics snapshot by figure (`RawTotals`, the sums processes are added up
by). Malformed points, values and attributes are left out."""
from __future__ import annotations

import json
import math

from .. import server_settings, signals
from ..families.breakdowns import BREAKDOWNS
from .reader import iter_jsonl
from .records import PassCount, RawTotals, RequestRecord


MAX_POINTS = 500  # timeline points, events' times and request records kept per process
MAX_RESOURCE_BYTES = 1 << 20  # resource.json is a few hundred bytes; more is not ours


def num(v) -> float | int | None:
    """A finite number, or None (bools, strings, nested values and nan do not count)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def key_of(v):
    """A usable attribute value (str or number), or None."""
    if isinstance(v, str):
        return v
    n = num(v)
    return n


def sort_key(k):
    """Numbers (and numeric strings) first in numeric order, then other strings."""
    if isinstance(k, str):
        try:
            return (0, int(k), "")
        except ValueError:
            return (1, 0, k)
    return (0, k, "")


def text_of(v, limit: int = 2000) -> str | None:
    return v[:limit] if isinstance(v, str) else None


def points(metrics: dict, spec: signals.MetricSpec) -> list[dict]:
    """The data points of one metric; malformed ones are left out."""
    raw = metrics.get(spec.name)
    if not isinstance(raw, list):
        return []
    out = []
    for p in raw:
        if not isinstance(p, dict) or num(p.get("value")) is None:
            continue
        attrs = p.get("attributes")
        out.append({"attributes": attrs if isinstance(attrs, dict) else {},
                    "value": p["value"]})
    return out


def total(metrics: dict, spec: signals.MetricSpec) -> float:
    return sum(p["value"] for p in points(metrics, spec))


def by_attr(metrics: dict, spec: signals.MetricSpec, attr) -> dict:
    """Values summed by one attribute, or by a tuple of attributes (keys: tuples)."""
    out: dict = {}
    for p in points(metrics, spec):
        if isinstance(attr, tuple):
            key = tuple(key_of(p["attributes"].get(a)) for a in attr)
            key = None if None in key else key
        else:
            key = key_of(p["attributes"].get(attr))
        if key is not None:
            out[key] = out.get(key, 0) + p["value"]
    return out


def read_resource(path: str) -> tuple[dict, float | None]:
    """The resource attributes (scalars only) and the time the process started."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_RESOURCE_BYTES + 1)
    except OSError:
        return {}, None
    if len(data) > MAX_RESOURCE_BYTES:
        return {}, None
    try:
        loaded = json.loads(data)
    except (ValueError, RecursionError):
        return {}, None
    if not isinstance(loaded, dict):
        return {}, None
    attrs = loaded.get("attributes")
    if not isinstance(attrs, dict):
        return {}, num(loaded.get("started"))
    return ({k: v for k, v in attrs.items() if isinstance(v, (str, int, float))
             and (not isinstance(v, bool) or k.startswith(server_settings.PREFIX))},
            num(loaded.get("started")))


def finite_sum(values) -> float:
    total = sum(values)
    return total if math.isfinite(total) else 0


def read_events(path: str, stats: dict) -> dict[str, dict]:
    """Each finding code's working entry (`_finding_summaries` makes them records)."""
    findings: dict[str, dict] = {}
    for e in iter_jsonl(path, stats):
        code = e.get("code")
        if not isinstance(code, str):
            stats["skipped"] += 1
            continue
        details = e.get("details")
        f = findings.setdefault(code, {"code": code, "severity": text_of(e.get("severity"), 40),
                                       "message": text_of(e.get("message")),
                                       "details": details if isinstance(details, dict) else None,
                                       "events": 0, "times": []})
        f["events"] += 1
        t = num(e.get("time"))
        if t is not None and len(f["times"]) < MAX_POINTS:
            f["times"].append(t)
    return findings


# The `RawTotals` figures: field -> (metric, the attribute it is kept by, or None for
# one number). `combine` adds a `counted_once` metric's figures over the processes that
# count once only (`spectrace.counting`), the others over every process.
SUMMED = {
    "steps": (signals.SPEC_STEPS, None),
    "drafts": (signals.SPEC_DRAFTS, None),
    "no_draft_steps": (signals.SPEC_NO_DRAFT_STEPS, None),
    "draft_tokens": (signals.SPEC_DRAFT_TOKENS, None),
    "accepted_tokens": (signals.SPEC_ACCEPTED_TOKENS, None),
    "per_position": (signals.SPEC_ACCEPTED_PER_POSITION, signals.ATTR_POSITION),
    "agreement_drafts": (signals.SPEC_AGREEMENT_DRAFTS, None),
    "agreement_positions": (signals.SPEC_AGREEMENT_PER_POSITION, signals.ATTR_POSITION),
    "lengths": (signals.SPEC_ACCEPT_LENGTH, signals.ATTR_LENGTH),
    "finding_counts": (signals.FINDINGS, signals.ATTR_CODE),
    "fc_bypass": (signals.EAGLE3_FC_BYPASS, None),
    "width_mismatch": (signals.EAGLE3_WIDTH_MISMATCH, None),
    "internal_errors": (signals.INTERNAL_ERRORS, None),
    "telemetry_dropped": (signals.TELEMETRY_DROPPED, None),
    "requests": (signals.SPEC_REQUESTS, signals.ATTR_REQUEST_LENGTH),
    "requests_by_label": (signals.SPEC_REQUESTS,
                          (signals.ATTR_REQUEST_LABEL, signals.ATTR_REQUEST_LENGTH)),
    "request_label_overflow": (signals.SPEC_REQUEST_LABEL_OVERFLOW,
                               signals.ATTR_REQUEST_LABEL_KEY),
}


PASSES_COUNTED_ONCE = signals.EAGLE3_PASSES.counted_once


def raw_totals(metrics: dict) -> RawTotals:
    """What one snapshot holds, by figure: the sums that processes can be added up by."""
    return RawTotals(
        **{key: total(metrics, spec) if attr is None else by_attr(metrics, spec, attr)
           for key, (spec, attr) in SUMMED.items()},
        passes=tuple(PassCount(key_of(p["attributes"].get(signals.ATTR_PASS_KIND)),
                               key_of(p["attributes"].get(signals.ATTR_WIDTH)), p["value"])
                     for p in points(metrics, signals.EAGLE3_PASSES)
                     if p["attributes"].get(signals.ATTR_PASS_KIND) is not None
                     or p["attributes"].get(signals.ATTR_WIDTH) is not None),
        breakdowns={b.name: by_attr(metrics, b.accept_length, (b.attribute, signals.ATTR_LENGTH))
                    for b in BREAKDOWNS},
        expected_widths={str(k): v for k, v in by_attr(
            metrics, signals.EAGLE3_EXPECTED_WIDTH, "kind").items()},
        draft_context={str(k): v for k, v in by_attr(
            metrics, signals.EAGLE3_DRAFT_CONTEXT, signals.ATTR_KIND).items()},
        phase_costs=phase_costs(metrics),
        request_rates=histogram_counts(metrics, signals.SPEC_REQUEST_ACCEPTANCE),
        drafted_per_position=by_attr(metrics, signals.SPEC_DRAFTS_PER_POSITION,
                                      signals.ATTR_POSITION),
        topk=next(iter(by_attr(metrics, signals.SPEC_TOPK, signals.ATTR_WORKER).values()),
                  None))


PHASE_FIELDS = (signals.SPEC_PHASE_TIME, signals.SPEC_PHASE_TIME_SQUARES,
                signals.SPEC_PHASE_SAMPLES, signals.SPEC_PHASE_TOKENS,
                signals.SPEC_PHASE_TOKENS_SQUARES, signals.SPEC_PHASE_TIME_TOKENS,
                signals.SPEC_PHASE_REQUESTS)


def phase_costs(metrics: dict) -> dict:
    """(phase, bucket, K) -> [seconds, squared seconds, samples, tokens, squared tokens,
    seconds x tokens, requests] (the last four: the target forward's only)."""
    out: dict = {}
    for i, spec in enumerate(PHASE_FIELDS):
        for p in points(metrics, spec):
            a = p["attributes"]
            key = (key_of(a.get(signals.ATTR_PHASE)), key_of(a.get(signals.ATTR_BATCH_BUCKET)),
                   key_of(a.get(signals.ATTR_NUM_STEPS)))
            if None in key:
                continue
            out.setdefault(key, [0] * len(PHASE_FIELDS))[i] += p["value"]
    return out


def request_record(span: dict) -> RequestRecord | None:
    """A finished request's record from its span line, or None (another span, or bad)."""
    if span.get("name") != signals.SPAN_REQUEST or not isinstance(span.get("attributes"), dict):
        return None
    a = span["attributes"]
    steps, accepted = num(a.get(signals.SPAN_ATTR_REQUEST_STEPS)), num(
        a.get(signals.SPAN_ATTR_REQUEST_ACCEPTED))
    rid = a.get(signals.SPAN_ATTR_REQUEST_ID)
    if not isinstance(rid, str) or not steps or steps <= 0 or accepted is None:
        return None
    drafts = num(a.get(signals.SPAN_ATTR_REQUEST_DRAFT_TOKENS))
    return RequestRecord(rid[:200], steps, accepted, 1 + accepted / steps,
                         text_of(a.get(signals.SPAN_ATTR_REQUEST_SAMPLING), 40),
                         drafts if drafts and drafts > 0 else None)


class RequestSample:
    """The recorded requests a report keeps of a process, bounded: a uniform sample of
    them (a seeded reservoir: the same files give the same report), the reference the
    outlier rules compare with, and the `EXTREMES` lowest and highest by mean accept
    length, which the report lists and the outlier rules name."""

    SIZE = 2 * MAX_POINTS
    EXTREMES = 50

    def __init__(self) -> None:
        import random
        self.sample: list[RequestRecord] = []
        self.seen = 0
        self._rand = random.Random(0)
        self._low: list = []   # heaps of (key, n, record): the most extreme kept
        self._high: list = []

    def add(self, r: RequestRecord) -> None:
        import heapq
        self.seen += 1
        if len(self.sample) < self.SIZE:
            self.sample.append(r)
        else:
            j = self._rand.randrange(self.seen)
            if j < self.SIZE:
                self.sample[j] = r
        for heap, key in ((self._low, -r.mean_acceptance_length),
                          (self._high, r.mean_acceptance_length)):
            item = (key, self.seen, r)
            if len(heap) < self.EXTREMES:
                heapq.heappush(heap, item)
            elif item > heap[0]:
                heapq.heapreplace(heap, item)

    def extend(self, other: "RequestSample") -> None:
        """Another process's kept requests (the combined view)."""
        import heapq
        self.seen += other.seen
        self.sample += other.sample
        for mine, theirs in ((self._low, other._low), (self._high, other._high)):
            for item in theirs:
                heapq.heappush(mine, item)

    def records(self) -> list[RequestRecord]:
        """The sample and the extremes, each request once."""
        out = {id(r): r for r in self.sample}
        for _, _, r in self._low + self._high:
            out.setdefault(id(r), r)
        return list(out.values())


def histogram_counts(metrics: dict, spec: signals.MetricSpec) -> dict[str, float]:
    """A histogram's observations by bucket (`lo-hi`, the edges its points carry), summed
    over its points; malformed points are left out."""
    out: dict[str, float] = {}
    raw = metrics.get(spec.name)
    for p in raw if isinstance(raw, list) else ():
        v = p.get("value") if isinstance(p, dict) else None
        if not isinstance(v, dict):
            continue
        bounds, counts = v.get("bounds"), v.get("buckets")
        if (not isinstance(bounds, list) or not isinstance(counts, list)
                or len(counts) != len(bounds) + 1
                or any(num(x) is None for x in bounds + counts)):
            continue
        edges = [0] + bounds + [1]
        for lo, hi, n in zip(edges, edges[1:], counts):
            key = f"{lo:g}-{hi:g}"
            out[key] = out.get(key, 0) + n
    return out
