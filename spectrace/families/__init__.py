"""Signal families: one module per family of signals, each owning its metric declarations,
its hot-path methods, its fold (in the metric reader's thread) and its observable
callbacks. `Recorder` composes them for one process; `signals` exports the union of their
declarations (`ALL_METRICS`), from which the dashboards, alert rules and docs are made.

| family | module | what it counts |
|---|---|---|
| steps | `steps` | speculative steps per worker, the draft's top-k, step spans, the step in flight |
| acceptance | `acceptance` | request-steps, draft and accepted tokens, per position, accept lengths, the per-step breakdowns |
| breakdowns | `breakdowns` | the breakdowns of acceptance, declared once (context, sampling, batch size, request label) |
| requests | `requests` | finished requests, the per-request breakdowns, sampled request spans |
| agreement | `agreement` | draft/target token agreement per position |
| step cost | `step_cost` | measured time per phase, batch-size bucket and K; the clocks |
| draft passes | `draft_passes` | draft passes by kind and width, expected widths, fc bypass, load counts, draft context |
| findings | `findings` | run-time findings, spectrace's internal errors and dropped telemetry |
"""
from __future__ import annotations

from . import acceptance, agreement, breakdowns, draft_passes, findings, requests, step_cost, steps

FAMILIES = (steps, acceptance, breakdowns, requests, agreement, step_cost, draft_passes, findings)
ALL_METRICS = tuple(m for family in FAMILIES for m in family.METRICS)
METRICS_BY_NAME = {m.name: m for m in ALL_METRICS}
