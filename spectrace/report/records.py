"""The report's data, as `summary` builds it and `text`, `html`, `watch` and
`findings` read it: one record per thing a figure belongs to (a process, all processes
together, a finding, a hidden-state pass kind and width, a timeline).

Each record's `to_json()` is its part of `spectrace report --json`, written out key by
key: the JSON is a documented output (its keys name the figures the HTML tables carry in
`data-key`), so a field added here reaches it only when `to_json` says so. The working
sums a combined view is added up from (`RawTotals`, the timeline's `TimelinePoint`s) stay
out of it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple, Union

from ..server_settings import combine

Number = Union[int, float]


class TimelinePoint(NamedTuple):
    """The cumulative totals of one metrics snapshot, at its time."""
    time: Number
    drafts: Number
    accepted_tokens: Number
    draft_tokens: Number


@dataclass(frozen=True, slots=True)
class PassCount:
    """How many draft passes of one kind received hidden states of one width."""
    pass_kind: Any  # str, or a number from a file not written by spectrace
    width: Any
    count: Number


@dataclass(frozen=True, slots=True)
class RawTotals:
    """What one snapshot holds, by figure: the sums that processes are added up by
    (`summary.SUMMED` names the metric of each)."""
    steps: Number
    drafts: Number
    draft_tokens: Number
    accepted_tokens: Number
    per_position: dict
    agreement_drafts: Number
    agreement_positions: dict
    lengths: dict
    finding_counts: dict
    fc_bypass: Number
    width_mismatch: Number
    internal_errors: Number
    telemetry_dropped: Number
    passes: tuple[PassCount, ...]
    expected_widths: dict[str, Number]
    # breakdown name -> request-steps by (bucket, accept length) (`families.breakdowns`)
    breakdowns: dict = field(default_factory=dict)
    requests: dict = None  # finished requests by mean accept length bucket
    requests_by_label: dict = None  # finished requests by (label value, mean length bucket)
    request_label_overflow: dict = None  # label key -> requests counted as `other`
    request_rates: dict = None  # finished requests by acceptance-rate bucket (histogram)
    draft_context: dict = None  # what the draft's config says about its context
    # step cost: (phase, batch-size bucket, K) -> [seconds, squared seconds, samples]
    phase_costs: dict = field(default_factory=dict)
    drafted_per_position: dict = field(default_factory=dict)  # position -> request-steps
    topk: Any = None  # the draft's top-k, when a worker said
    runtime: Any = None  # the runtime of the process (resource), for the advisor's flags
    no_draft_steps: Number = 0  # request-steps run with no draft (adaptive K = 0)


@dataclass(frozen=True, slots=True)
class HiddenStatePass:
    """A pass kind and width seen, with the width expected for the kind and the finding
    code it raises (None where the draft's widths are unknown or it is as expected)."""
    pass_kind: Any
    width: Any
    count: Number
    expected: int | None
    finding: str | None

    def to_json(self) -> dict[str, Any]:
        return {"pass_kind": self.pass_kind, "width": self.width, "count": self.count,
                "expected": self.expected, "finding": self.finding}


@dataclass(frozen=True, slots=True)
class FindingSummary:
    """One finding code: as first written to events (severity, message, details), how
    many events and their times, and its metric count (None where no metric counted it)."""
    code: str
    severity: str | None
    message: str | None
    details: dict | None
    events: int
    times: tuple[Number, ...]
    count: Number | None
    first_time: Number | None

    @classmethod
    def judged(cls, f) -> "FindingSummary":
        """A finding the report's rules judged from the totals (`judgement`): no events,
        counted once."""
        return cls(code=f.code, severity=f.severity, message=f.message, details=f.details,
                   events=0, times=(), count=1, first_time=None)

    def to_json(self) -> dict[str, Any]:
        out = {"code": self.code, "severity": self.severity, "message": self.message,
               "details": self.details, "events": self.events, "times": list(self.times)}
        if self.count is not None:
            out["count"] = self.count
        out["first_time"] = self.first_time
        return out


@dataclass(frozen=True, slots=True)
class TimelineFigures:
    """Per snapshot: its time, the cumulative totals, and the mean acceptance length and
    acceptance rate of the interval since the snapshot before (None where nothing was
    verified, or where a total went down or time back)."""
    time: tuple[Number, ...]
    drafts: tuple[Number, ...]
    accepted_tokens: tuple[Number, ...]
    draft_tokens: tuple[Number, ...]
    mean_acceptance_length: tuple[float | None, ...]
    acceptance_rate: tuple[float | None, ...]

    def to_json(self) -> dict[str, list]:
        return {"time": list(self.time), "drafts": list(self.drafts),
                "accepted_tokens": list(self.accepted_tokens),
                "draft_tokens": list(self.draft_tokens),
                "mean_acceptance_length": list(self.mean_acceptance_length),
                "acceptance_rate": list(self.acceptance_rate)}


@dataclass(frozen=True, slots=True)
class BucketRow:
    """Acceptance in one bucket of a breakdown."""
    bucket: str
    drafts: Number
    accepted_tokens: Number
    mean_acceptance_length: float | None
    acceptance_per_position: tuple[float, ...]

    def to_json(self, name: str) -> dict[str, Any]:
        return {name: self.bucket, "drafts": self.drafts,
                "accepted_tokens": self.accepted_tokens,
                "mean_acceptance_length": self.mean_acceptance_length,
                "acceptance_per_position": list(self.acceptance_per_position)}


@dataclass(frozen=True, slots=True)
class BreakdownFigures:
    """Acceptance by one breakdown (`families.breakdowns`: its `name` and `title`), a row
    per bucket seen, in the breakdown's order; `by_<name>` in `--json`."""
    name: str
    title: str
    rows: tuple[BucketRow, ...]
    buckets: tuple = ()  # the same as `rules.buckets.BucketFigures`, for the rules

    def to_json(self) -> list[dict[str, Any]]:
        return [r.to_json(self.name) for r in self.rows]


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One finished request as its sampled span recorded it (the runtime's request id)."""
    request_id: str
    verify_steps: Number
    accepted_tokens: Number
    mean_acceptance_length: float
    sampling: str | None
    draft_tokens: Number | None = None  # the drafts it could accept (older spans: none)

    def to_json(self) -> dict[str, Any]:
        return {"request_id": self.request_id, "verify_steps": self.verify_steps,
                "accepted_tokens": self.accepted_tokens,
                "mean_acceptance_length": self.mean_acceptance_length,
                "sampling": self.sampling, "draft_tokens": self.draft_tokens}


@dataclass(frozen=True, slots=True)
class LabelFigures:
    """The finished requests of one `SPECTRACE_REQUEST_LABEL` value (`other`: the values
    past the cap)."""
    value: str
    finished: Number
    by_mean_acceptance_length: dict[str, Number]

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "finished": self.finished,
                "by_mean_acceptance_length": dict(self.by_mean_acceptance_length)}


@dataclass(frozen=True, slots=True)
class RequestFigures:
    """Finished requests: how many, by mean accept length bucket, and the recorded ones
    with the lowest mean accept length (from the sampled request spans); with a request
    label set, the same by label value, and how many requests came past the label cap."""
    finished: Number
    by_mean_acceptance_length: dict[str, Number]
    recorded: Number
    lowest: tuple[RequestRecord, ...]
    label_key: str | None = None  # the request field SPECTRACE_REQUEST_LABEL names
    by_label: tuple[LabelFigures, ...] = ()
    label_overflow: Number = 0  # requests counted as `other` (past SPECTRACE_REQUEST_LABEL_CAP)
    by_acceptance_rate: dict = None  # finished requests by acceptance-rate bucket, in order

    def to_json(self) -> dict[str, Any]:
        return {"finished": self.finished,
                "by_acceptance_rate": dict(self.by_acceptance_rate or {}),
                "by_mean_acceptance_length": dict(self.by_mean_acceptance_length),
                "recorded": self.recorded, "lowest": [r.to_json() for r in self.lowest],
                "label_key": self.label_key, "by_label": [x.to_json() for x in self.by_label],
                "label_overflow": self.label_overflow}


@dataclass(frozen=True, slots=True)
class Figures:
    """The figures every view shows, of one process or of all together: numbers only (what
    the rules found in them is the view's `findings`, judged apart: `judgement`)."""
    steps: Number
    drafts: Number
    # request-steps run with no draft token (adaptive K = 0), kept out of every other figure
    no_draft_steps: Number
    draft_tokens: Number
    accepted_tokens: Number
    mean_acceptance_length: float | None
    acceptance_rate: float | None
    accepted_per_position: tuple[Number, ...]
    acceptance_per_position: tuple[float, ...]
    agreement_drafts: Number
    agreed_per_position: tuple[Number, ...]
    agreement_per_position: tuple[float, ...]
    accept_length_counts: dict[str, Number]  # lengths seen, in order
    hidden_state_passes: tuple[HiddenStatePass, ...]
    expected_widths: dict[str, Number]
    fc_bypass: Number
    width_mismatch: Number
    internal_errors: Number
    telemetry_dropped: Number
    timeline: TimelineFigures
    # every declared breakdown, in declaration order (rows only where counted)
    breakdowns: tuple[BreakdownFigures, ...] = ()
    draft_context: dict = None
    requests: RequestFigures | None = None
    # is speculation paying off, and the best number of draft tokens (spectrace.report.advisor)
    speculation: Any = None

    def to_json(self, findings: tuple[FindingSummary, ...] = ()) -> dict[str, Any]:
        """The figures' part of `--json`, with the view's `findings` where `--json` has
        always had them (after the counts, before the timeline)."""
        return {
            "steps": self.steps,
            "drafts": self.drafts,
            "no_draft_steps": self.no_draft_steps,
            "draft_tokens": self.draft_tokens,
            "accepted_tokens": self.accepted_tokens,
            "mean_acceptance_length": self.mean_acceptance_length,
            "acceptance_rate": self.acceptance_rate,
            "accepted_per_position": list(self.accepted_per_position),
            "acceptance_per_position": list(self.acceptance_per_position),
            "agreement_drafts": self.agreement_drafts,
            "agreed_per_position": list(self.agreed_per_position),
            "agreement_per_position": list(self.agreement_per_position),
            "accept_length_counts": dict(self.accept_length_counts),
            "hidden_state_passes": [x.to_json() for x in self.hidden_state_passes],
            "expected_widths": dict(self.expected_widths),
            "fc_bypass": self.fc_bypass,
            "width_mismatch": self.width_mismatch,
            "internal_errors": self.internal_errors,
            "telemetry_dropped": self.telemetry_dropped,
            "findings": [f.to_json() for f in findings],
            "timeline": self.timeline.to_json(),
            **{f"by_{b.name}": b.to_json() for b in self.breakdowns},
            "draft_context": dict(self.draft_context or {}),
            "requests": self.requests.to_json() if self.requests else None,
            "speculation": None if self.speculation is None else self.speculation.to_json(),
        }


@dataclass(frozen=True, slots=True)
class ProcessSummary:
    """One process folder: who wrote it (from resource.json), how much was read, its
    figures, and the raw totals and timeline points the combined view adds up."""
    process: str  # the folder's name
    pid: Any
    role: Any
    tp_rank: Any
    dp_rank: Any
    pp_rank: Any
    # `copy`: its request-steps and draft passes are its group's rank 0's (left out of
    # the totals); `once` (or nothing, from an older spectrace: a single process)
    counted: str
    model: Any
    draft_model: Any
    spec_algorithm: Any  # SGLang: the speculative algorithm and the worker class running it
    spec_worker: Any
    runtime: Any
    runtime_version: Any
    sglang_version: Any
    spectrace_version: Any
    started: Number | None
    metric_snapshots: int
    skipped_lines: int
    spans: int
    figures: Figures
    findings: tuple[FindingSummary, ...]  # by code: the events' and the report's rules'
    raw: RawTotals
    points: tuple[TimelinePoint, ...]
    # the server settings that change acceptance (`server_settings`: key -> value)
    settings: dict = field(default_factory=dict)
    # the recorded requests kept (`snapshot.RequestSample`), for the combined view
    request_sample: Any = field(default=None, compare=False)
    # its totals per snapshot by breakdown bucket (`drift_windows.History`), for drift
    drift_history: Any = field(default=None, compare=False)
    # the acceptance its draft should reach (`rules.reference.Reference`), if known
    reference: Any = field(default=None, compare=False)
    # the content hashes of the target and the draft (`model_hash`), where recorded
    model_hash: Any = None
    draft_hash: Any = None
    service_name: Any = None  # its deployment (OTEL_SERVICE_NAME), where recorded

    def to_json(self) -> dict[str, Any]:
        return {"process": self.process, "pid": self.pid, "role": self.role,
                "tp_rank": self.tp_rank, "dp_rank": self.dp_rank, "pp_rank": self.pp_rank,
                "counted": self.counted, "model": self.model, "draft_model": self.draft_model,
                "spec_algorithm": self.spec_algorithm, "spec_worker": self.spec_worker,
                "runtime": self.runtime, "runtime_version": self.runtime_version,
                "sglang_version": self.sglang_version,
                "spectrace_version": self.spectrace_version, "started": self.started,
                "metric_snapshots": self.metric_snapshots,
                "skipped_lines": self.skipped_lines, "spans": self.spans,
                "settings": dict(self.settings), "model_hash": self.model_hash,
                "draft_hash": self.draft_hash, "service_name": self.service_name,
                **self.figures.to_json(self.findings)}


@dataclass(frozen=True, slots=True)
class UnreadableProcess:
    """A process folder that could not be read, and why."""
    process: str
    error: str

    def to_json(self) -> dict[str, str]:
        return {"process": self.process, "error": self.error}


@dataclass(frozen=True, slots=True)
class CombinedSummary:
    """All readable processes together (`summary.combine`): which were added up, which
    counted once, which were copies left out of the counted-once figures."""
    processes: tuple[str, ...]
    counted_once: tuple[str, ...]
    copies: tuple[str, ...]
    figures: Figures
    findings: tuple[FindingSummary, ...] = ()  # each process's events' and those judged here
    # a deployment's processes together (`Report.groups`): what they share (resource
    # attribute -> value: service.name, the draft) and their own verdict; None for all
    group: dict | None = None
    verdict: Any = None

    def to_json(self) -> dict[str, Any]:
        head = {} if self.group is None else {
            "group": dict(self.group),
            "verdict": self.verdict.to_json() if self.verdict is not None else None}
        return {**head, "processes": list(self.processes),
                "counted_once": list(self.counted_once), "copies": list(self.copies),
                **self.figures.to_json(self.findings)}


@dataclass(frozen=True, slots=True)
class Report:
    """Everything `spectrace report DIR` shows."""
    directory: str
    processes: tuple[ProcessSummary | UnreadableProcess, ...]
    combined: CombinedSummary | None
    verdict: Any = None  # `verdict.Verdict`, judged when the report is built (`summary`)
    # each deployment's processes together, when they are of more than one (a fleet:
    # `summary.GROUP_BY`), each with its verdict; none for one deployment
    groups: tuple[CombinedSummary, ...] = ()

    @property
    def settings(self) -> dict:
        """The server settings of every readable process together (`server_settings.combine`)."""
        return combine(p.settings for p in self.readable)

    @property
    def readable(self) -> tuple[ProcessSummary, ...]:
        return tuple(p for p in self.processes if isinstance(p, ProcessSummary))

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict.to_json(), "directory": self.directory,
                "settings": self.settings, "processes": [p.to_json() for p in self.processes],
                "combined": self.combined.to_json() if self.combined else None,
                "groups": [g.to_json() for g in self.groups]}
