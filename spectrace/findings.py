"""A finding: one named problem with a checkpoint or a running draft, shared by
`spectrace doctor` (static checks) and the run-time instrumentation (the same checks
on what SGLang really loaded), so both speak with the same codes and words."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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
