"""Findings raised at run time: counted by code and severity (every run-time code's series
exists at 0 from the start, so a healthy deployment shows 0 and the alert rules have a
series to evaluate), written in full for their first occurrences (the events file and a
span, and an event on the step span in flight), and logged once per code and process. Also
spectrace's own health: its internal errors."""
from __future__ import annotations

import logging
import threading
import time
from typing import Any

from opentelemetry import trace as otel_trace
from opentelemetry.metrics import Observation

from .. import names
from ..findings import Finding, FindingSpec
from ..rules import aux, finite, synthetic, vocab, weights, widths
from ..safety import INTERNAL_ERRORS as ERRORS_SEEN
from ..names import COUNTER, MetricSpec
from .instruments import counter, observe

log = logging.getLogger("spectrace")

EVENTS_PER_CODE = 20  # findings written in full per code and process; the rest are counted

FINDINGS = MetricSpec(
    "spectrace.findings", COUNTER, "{finding}",
    "Findings raised at run time (fc bypass, aux capture, weights, vocabulary map, "
    "synthetic acceptance, non-finite draft values).",
    (names.ATTR_CODE, names.ATTR_SEVERITY))
INTERNAL_ERRORS = MetricSpec(
    "spectrace.internal_errors", COUNTER, "{error}",
    "Exceptions raised inside spectrace hooks (caught; the runtime's call ran normally).",
    (names.ATTR_HOOK,))
TELEMETRY_DROPPED = MetricSpec(
    "spectrace.telemetry.dropped", COUNTER, "{item}",
    "Telemetry items dropped because an exporter queue was full or a sink failed.",
    (names.ATTR_SIGNAL,))
METRICS = (FINDINGS, INTERNAL_ERRORS, TELEMETRY_DROPPED)


# The findings raised at run time, each declared beside its rule: `spectrace.findings`
# starts at 0 for each (code, severity), so a healthy deployment shows 0 and the alert
# rules have a series to evaluate; docs/metrics.md's table of them is written from these.
RUNTIME_SPECS: tuple[FindingSpec, ...] = (
    widths.SPECS + aux.SPECS + weights.SPECS + vocab.SPECS + synthetic.SPECS + finite.SPECS)


class Findings:
    """The findings of one process (`add`)."""

    def __init__(self, tel) -> None:
        self.tel = tel
        self.counts: dict[str, int] = {}  # occurrences per code
        self._warned: set[str] = set()
        self._lock = threading.Lock()
        self._counter = None
        self._also: dict[str, object] = {}  # code -> what else counts it (`count_also`)

    def count_also(self, code: str, count) -> None:
        """Have `count()` run for every finding of `code` too (another family's metric of
        it: the draft family's fc-bypass passes)."""
        self._also[code] = count

    def register(self, meter, scope: dict) -> None:
        self._counter = counter(meter, FINDINGS)
        for s in RUNTIME_SPECS:
            self._counter.add(0, {names.ATTR_CODE: s.code, names.ATTR_SEVERITY: s.severity})
        observe(meter, INTERNAL_ERRORS, lambda: [
            Observation(v, {names.ATTR_HOOK: h})
            for h, v in dict(ERRORS_SEEN.counts).items()] or [Observation(0)], scope)

    def add(self, f: Finding, span_attributes: dict[str, Any] | None = None,
            warn_once: bool = True) -> None:
        """Count a finding; write it (event file, span) in full for its first occurrences;
        log its message once per process."""
        self._counter.add(1, {names.ATTR_CODE: f.code, names.ATTR_SEVERITY: f.severity})
        also = self._also.get(f.code)
        if also is not None:
            also()
        with self._lock:
            n = self.counts[f.code] = self.counts.get(f.code, 0) + 1
            first = f.code not in self._warned
            self._warned.add(f.code)
        if n <= EVENTS_PER_CODE:
            record = {"time": time.time(), "occurrence": n, **f.to_dict()}
            if self.tel.events is not None:
                self.tel.events.write(record)
            attrs = {names.SPAN_ATTR_FINDING_CODE: f.code,
                     names.SPAN_ATTR_FINDING_SEVERITY: f.severity,
                     names.SPAN_ATTR_FINDING_MESSAGE: f.message, names.SPAN_ATTR_ANOMALY: True}
            attrs.update(span_attributes or {})
            # An anomaly is always recorded, whether or not its step was sampled.
            current = otel_trace.get_current_span()
            if current.is_recording():
                current.set_attribute(names.SPAN_ATTR_ANOMALY, True)
                current.add_event(f.code, attrs)
            with self.tel.tracer.start_as_current_span(names.SPAN_FINDING, attributes=attrs) as s:
                s.add_event(f.code, attrs)
        if first and warn_once:
            level = logging.WARNING if f.severity != "info" else logging.INFO
            log.log(level, "spectrace [%s]: %s", f.code, f.message)
