"""Everything one instrumented process reports, composed from the signal families
(`spectrace.families`): each family owns its metrics, its hot-path methods and its fold;
the Recorder makes them for the process and registers their instruments on its meter.

Hooks reach a family through the Recorder (`recorder().acceptance.add(...)`,
`.steps.begin(...)`, `.cost.due()`, `.findings.add(...)`) and never assign its fields;
what the hooks of one step pass each other is `steps.inflight` (`families.steps`).

The decode loop only appends references or bumps plain ints; the work that grows with
batch size (folding accept-count lists into totals) happens when the metric reader
collects, in its own thread, through observable instruments.
"""
from __future__ import annotations

from . import signals
from .config import Config
from .export.providers import ProcessTelemetry
from .families.acceptance import Acceptance
from .families.agreement import Agreement
from .families.draft_passes import DraftPasses
from .families.findings import Findings
from .families.requests import Requests, draft_identity
from .families.step_cost import StepCosts
from .families.steps import Steps
from .findings import Finding


class Recorder:
    """The signal families of one process. `counted`: whether this process counts its
    request-steps and draft passes once or is a copy of its group's rank 0
    (`spectrace.counting`); the points of every `counted_once` metric carry it."""

    def __init__(self, cfg: Config, tel: ProcessTelemetry,
                 counted: str = signals.COUNTED_ONCE) -> None:
        if counted not in (signals.COUNTED_ONCE, signals.COUNTED_COPY):
            raise ValueError(f"counted: expected {signals.COUNTED_ONCE!r} or "
                             f"{signals.COUNTED_COPY!r}, got {counted!r}")
        self.cfg = cfg
        self.tel = tel
        self.counted = counted
        self.steps = Steps(cfg, tel.tracer)
        self.inflight = self.steps.inflight  # what one step's hooks pass each other
        self.acceptance = Acceptance(cfg)
        self.requests = Requests(cfg, tel.tracer,
                                 lambda: len(self.acceptance.totals.per_position),
                                 draft_identity(getattr(tel, "resource", None)))
        self.agreement = Agreement()
        self.cost = StepCosts(cfg, self.steps.inflight)
        self.findings = Findings(tel)
        self.draft = DraftPasses(self.findings)
        scope = {signals.ATTR_COUNTED: counted}
        for family in (self.findings, self.draft, self.steps, self.acceptance, self.requests,
                       self.agreement, self.cost):
            family.register(tel.meter, scope)

    def finding(self, f: Finding, span_attributes: dict | None = None,
                warn_once: bool = True) -> None:
        """Raise a run-time finding (`families.findings`)."""
        self.findings.add(f, span_attributes, warn_once)

    def emit_request_spans(self) -> None:
        """The sampled finished requests' spans, before a final flush exports spans."""
        self.requests.emit_spans()
