"""The figures every view of `spectrace report` shows (`Figures`), from raw totals: one
process's, or their sum over processes (`summary.combine`). Numbers only: what the rules
find in them is `judgement`'s."""
from __future__ import annotations

from .. import signals
from . import advisor
from ..rules import requests as req_rule
from ..rules.widths import ExpectedWidths, check_width, expected_width
from .breakdown_figures import breakdown_figures
from .records import (
    Figures, HiddenStatePass, LabelFigures, PassCount, RawTotals,
    RequestFigures, RequestRecord, TimelinePoint,
)
from .snapshot import finite_sum, num, sort_key
from .timeline import timeline_figures


LOWEST_REQUESTS = 10  # recorded requests listed, lowest mean accept length first


def _speculation(raw: RawTotals):
    """The advisor's view of these totals (None without measured step costs)."""
    if not raw.phase_costs or not raw.drafts:
        return None
    keys = sorted(raw.per_position, key=sort_key)
    return advisor.advise(
        {k: tuple(v) for k, v in raw.phase_costs.items()},
        [raw.per_position[k] for k in keys],
        [raw.drafted_per_position.get(k, 0) for k in keys], raw.drafts, raw.lengths,
        runtime=raw.runtime, topk=raw.topk)


def _judged_passes(passes: tuple[PassCount, ...], expected: dict
                   ) -> tuple[HiddenStatePass, ...]:
    """Each (pass kind, width) with the width expected for its kind and the finding code it
    raises (`rules.widths`), when the draft's expected widths are known."""
    try:
        exp = ExpectedWidths(*(int(expected[k]) for k in (
            "fc_in", "draft_hidden", "target_hidden", "num_aux")))
    except (KeyError, TypeError, ValueError, OverflowError):
        exp = None
    out = []
    for x in passes:
        kind, width = x.pass_kind, num(x.width)
        expected_w = finding = None
        if exp is not None and width is not None and kind in (signals.PASS_TARGET_FED,
                                                              signals.PASS_DRAFT_DECODE):
            expected_w = expected_width(kind, exp)
            f = check_width(kind, int(width), exp)
            finding = f.code if f else None
        out.append(HiddenStatePass(x.pass_kind, x.width, x.count, expected_w, finding))
    return tuple(out)


def _request_figures(raw: RawTotals, records: list[RequestRecord], recorded: int
                     ) -> RequestFigures | None:
    dist = {str(k): v for k, v in (raw.requests or {}).items() if v}
    rates = {k: v for k, v in (raw.request_rates or {}).items() if v}
    if not dist and not records and not rates:
        return None
    order = req_rule.REQUEST_ORDER
    lowest = sorted(records, key=lambda r: (r.mean_acceptance_length, r.request_id))
    overflow = raw.request_label_overflow or {}
    return RequestFigures(
        finished=finite_sum(dist.values()),
        by_mean_acceptance_length={k: dist[k] for k in sorted(
            dist, key=lambda b: (order.get(b, len(order)), b))},
        recorded=recorded, lowest=tuple(lowest[:LOWEST_REQUESTS]),
        label_key=", ".join(sorted(str(k) for k in overflow)) or None,
        by_label=_label_figures(raw.requests_by_label or {}),
        label_overflow=finite_sum(overflow.values()),
        by_acceptance_rate={k: rates[k] for k in sorted(rates, key=_lower_edge)})


def _lower_edge(bucket: str) -> float:
    try:
        return float(bucket.split("-")[0])
    except ValueError:
        return float("inf")


def _label_figures(by_label: dict) -> tuple[LabelFigures, ...]:
    """Finished requests per label value, the most requests first, `other` last."""
    order = req_rule.REQUEST_ORDER
    values: dict[str, dict] = {}
    for (value, bucket), n in by_label.items():
        if n:
            values.setdefault(str(value), {})[str(bucket)] = n
    figures = [LabelFigures(v, finite_sum(d.values()), {k: d[k] for k in sorted(
        d, key=lambda b: (order.get(b, len(order)), b))}) for v, d in values.items()]
    return tuple(sorted(figures, key=lambda x: (x.value == req_rule.LABEL_OVERFLOW,
                                                -x.finished, x.value)))


def figures_of(raw: RawTotals, points: list[TimelinePoint], requests=None) -> Figures:
    """The figures every view shows, from raw totals (one process's, or their sum), their
    `TimelinePoint`s and the recorded requests kept (`snapshot.RequestSample`, or None)."""
    records = requests.records() if requests is not None else []
    breakdowns = breakdown_figures(raw.breakdowns, len(raw.per_position))
    drafts, accepted = raw.drafts, raw.accepted_tokens
    draft_tokens, agr_drafts = raw.draft_tokens, raw.agreement_drafts
    per_pos, agr_pos, lengths = raw.per_position, raw.agreement_positions, raw.lengths
    pos_keys = sorted(per_pos, key=sort_key)
    agr_keys = sorted(agr_pos, key=sort_key)
    return Figures(
        steps=raw.steps,
        drafts=drafts,
        no_draft_steps=raw.no_draft_steps,
        draft_tokens=draft_tokens,
        accepted_tokens=accepted,
        mean_acceptance_length=(1 + accepted / drafts) if drafts else None,
        acceptance_rate=(accepted / draft_tokens) if draft_tokens else None,
        accepted_per_position=tuple(per_pos[k] for k in pos_keys),
        acceptance_per_position=tuple(per_pos[k] / drafts for k in pos_keys) if drafts else (),
        agreement_drafts=agr_drafts,
        agreed_per_position=tuple(agr_pos[k] for k in agr_keys),
        agreement_per_position=(tuple(agr_pos[k] / agr_drafts for k in agr_keys)
                                if agr_drafts else ()),
        accept_length_counts={str(k): lengths[k] for k in sorted(lengths, key=sort_key)
                              if lengths[k]},  # lengths seen (series start at 0)
        hidden_state_passes=_judged_passes(raw.passes, raw.expected_widths),
        expected_widths=raw.expected_widths,
        fc_bypass=raw.fc_bypass,
        width_mismatch=raw.width_mismatch,
        internal_errors=raw.internal_errors,
        telemetry_dropped=raw.telemetry_dropped,
        timeline=timeline_figures(points),
        breakdowns=tuple(breakdowns.values()),
        draft_context=dict(raw.draft_context or {}),
        requests=_request_figures(raw, records, requests.seen if requests is not None else 0),
        speculation=_speculation(raw),
    )
