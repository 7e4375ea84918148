"""A finding: one named problem with a checkpoint or a running draft, shared by
`spectrace doctor` (static checks) and the run-time instrumentation (the same checks
on what SGLang really loaded), so both speak with the same codes and words."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

ERROR = "error"
WARNING = "warning"
INFO = "info"
SEVERITIES = (ERROR, WARNING, INFO)


@dataclass(frozen=True)
class Finding:
    """`code` is stable (e.g. `vocab.d2t_absolute`); `message` says what is wrong, why it
    breaks speculation and how to fix it; `details` holds small JSON-able facts."""

    code: str
    severity: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"Finding.severity must be one of {SEVERITIES}, got {self.severity!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "severity": self.severity, "message": self.message,
                "details": self.details}


@dataclass(frozen=True)
class Alert:
    """The Prometheus alert rule that restates a finding, declared with it
    (`FindingSpec.alert`); `spectrace.grafana.alerts` writes the rule from it. Its `name`,
    `severity` label (critical or warning), how long its condition must hold (`for_`) and
    its words, in Prometheus's template forms (`{{ $labels.instance }}`, `{{ $value }}`).
    What it fires on: at the first count of the `counts` counters (metric names, their sum
    since process start), or with none, at the first finding of a code that declares it;
    `windowed` alerts compare rates over windows instead, their query built in
    `spectrace.grafana.alerts` from the rule's own constants, or declared with the rule:
    `query(flt)`, the PromQL the alert compares (`op` `threshold`), written beside the
    finding it restates."""

    name: str
    summary: str
    description: str
    severity: str = "critical"
    for_: str = "0m"
    counts: tuple[str, ...] = ()
    windowed: bool = False
    query: Callable[[str], str] | None = None  # flt -> PromQL (a report finding's alert)
    op: str = ">"
    threshold: float = 0

    def __post_init__(self) -> None:
        if self.severity not in ("critical", "warning"):
            raise ValueError(f"Alert.severity must be 'critical' or 'warning', "
                             f"got {self.severity!r} ({self.name})")


@dataclass(frozen=True)
class FindingSpec:
    """A kind of finding, declared once beside the rule that raises it: its `code`, its
    `severity` (the highest it is raised with), `what` it means and the `floor` it needs
    before it is raised (in words, from the rule's own constants: docs/metrics.md's
    findings table is written from them), the Prometheus `alert` that restates it (None for
    none), its words (`message`, a `messages.Message` over the rule's facts) and its
    section of docs/metrics.md (`doc_title`, `doc`), where it has one."""

    code: str
    severity: str
    what: str
    floor: str = ""
    alert: Alert | None = None
    message: Any = None
    # its section of docs/metrics.md, where it has one beyond the findings table: a title
    # and markdown paragraphs (from the rule's own constants), written beside the rule
    doc_title: str = ""
    doc: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"FindingSpec.severity must be one of {SEVERITIES}, "
                             f"got {self.severity!r}")

    def found(self, details: dict[str, Any], severity: str | None = None, **facts) -> Finding:
        """This finding, worded from `facts` (its message's fields), with `details`."""
        return Finding(self.code, severity or self.severity, self.message.render(**facts),
                       details)
