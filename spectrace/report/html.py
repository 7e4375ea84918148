"""`spectrace report DIR --html FILE`: the report as one self-contained HTML page.

Charts per process and for all processes together: acceptance and draft/target token
agreement per draft position, the accept-length distribution, mean acceptance length and
acceptance rate over time (with the dashboards' healthy-range bands and the findings on
the time axis), and the hidden-state widths each pass kind received against what the
draft expects. Every figure is also plain HTML text (tables), so the page reads printed
and without scripts.

The page opens offline and asks for nothing: the plotting library, uPlot (vendored in
`assets/`, see its README), and the page's own script are inline, allowed by their
SHA-256 in a Content-Security-Policy that forbids every request (`default-src 'none'`).
The data travels as inert JSON (`<script type="application/json">` with `<`, `>`, `&`
escaped), read with `JSON.parse` and shown with `textContent` only; the tables are
escaped. Nothing read from the files is executed or inserted as markup.
"""
from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import time

from .. import signals
from .format import (
    COPY_LINE, HEALTH_BANDS, combined_title, count_text, expected_widths_text, finding_count,
    finding_severity, group_title, process_identity, runtime_label, settings_lines,
)
from .html_parts import _cell, _e, _finite, _ratio, _table, _utc
from .html_speculation import SPECULATION_CHARTS, speculation_chart_data, speculation_tables
from .records import (
    CombinedSummary, Figures, FindingSummary, HiddenStatePass, ProcessSummary, Report,
)
from .verdict import verdict_of

ASSETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "assets")
DATA_ID = "spectrace-data"
TIMELINE_ROWS = 60  # rows of the timeline table (the chart has every point)


def _asset(name: str) -> str:
    with open(os.path.join(ASSETS, name), encoding="utf-8") as fh:
        return fh.read()


def inert_json(obj) -> str:
    """JSON that cannot end its `<script>` element or start markup."""
    return (json.dumps(obj, separators=(",", ":"), allow_nan=False)
            .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def _csp_hash(script: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()
                                         ).decode() + "'"


def _totals_table(v: Figures) -> str:
    rows = [
        ("speculative steps", "steps", count_text(v.steps)),
        ("request-steps verified", "drafts", count_text(v.drafts)),
        ("draft tokens proposed", "draft_tokens", count_text(v.draft_tokens)),
        ("draft tokens accepted", "accepted_tokens", count_text(v.accepted_tokens)),
        ("mean acceptance length (1.00 = no speed-up)", "mean_acceptance_length",
         _ratio(v.mean_acceptance_length)),
        ("acceptance rate", "acceptance_rate", _ratio(v.acceptance_rate)),
        ("fc bypass events", "fc_bypass", count_text(v.fc_bypass)),
        ("width mismatches", "width_mismatch", count_text(v.width_mismatch)),
        ("spectrace internal errors", "internal_errors", count_text(v.internal_errors)),
        ("telemetry items dropped", "telemetry_dropped", count_text(v.telemetry_dropped)),
    ]
    if v.no_draft_steps:
        rows.insert(2, ("request-steps with no draft (adaptive K = 0), kept out of acceptance",
                        "no_draft_steps", count_text(v.no_draft_steps)))
    return _table("Totals", ["figure", "value"], [
        f"<tr><th scope=row>{_e(label)}</th>{_cell(getattr(v, key), key, text)}</tr>"
        for label, key, text in rows])


def _positions_table(v: Figures) -> str:
    acc, agr = v.acceptance_per_position, v.agreement_per_position
    rows = []
    for i in range(max(len(acc), len(agr))):
        a = _cell(acc[i], f"acceptance_per_position.{i}", _ratio(acc[i])) if i < len(acc) \
            else "<td>-</td>"
        g = _cell(agr[i], f"agreement_per_position.{i}", _ratio(agr[i])) if i < len(agr) \
            else "<td>-</td>"
        rows.append(f"<tr><th scope=row>{i}</th>{a}{g}</tr>")
    note = (f" (agreement from {count_text(v.agreement_drafts)} sampled request-steps)"
            if agr else "")
    return _table("Per draft position" + note, ["position", "acceptance", "agreement"], rows)


def _lengths_table(v: Figures) -> str:
    return _table("Accept-length distribution (request-steps)", ["accept length", "count"], [
        f"<tr><th scope=row>{_e(k)}</th>{_cell(n, f'accept_length_counts.{k}', count_text(n))}</tr>"
        for k, n in v.accept_length_counts.items()])


def _verdict(p: HiddenStatePass) -> str:
    if p.expected is None:
        return "expected width unknown"
    if p.finding:
        return p.finding
    return "as expected"


def _widths_table(v: Figures) -> str:
    rows = []
    for i, p in enumerate(v.hidden_state_passes):
        cls = ' class="bad"' if p.finding else ""
        rows.append(f"<tr{cls}><th scope=row>{_e(p.pass_kind)}</th>"
                    f"{_cell(p.width, f'hidden_state_passes.{i}.width')}"
                    f"{_cell(p.count, f'hidden_state_passes.{i}.count', count_text(p.count))}"
                    f"{_cell(p.expected, None)}<td>{_e(_verdict(p))}</td></tr>")
    exp = expected_widths_text(v.expected_widths)
    return _table("Hidden-state widths the draft received" + (f" (expected: {exp})" if exp
                                                              else ""),
                  ["pass kind", "width", "passes", "expected width", "verdict"], rows)


def _findings_table(findings: tuple[FindingSummary, ...]) -> str:
    rows = []
    for i, f in enumerate(findings):
        n, sev = finding_count(f), finding_severity(f)
        key = f"findings.{i}.{'events' if f.count is None else 'count'}"
        rows.append(f'<tr class="sev-{_e(sev)}"><th scope=row>{_e(f.code)}</th>'
                    f"<td>{_e(sev)}</td>{_cell(n, key, count_text(n))}"
                    f"<td>{_e(_utc(f.first_time))}</td>"
                    f"<td class=msg>{_e(f.message or '')}</td></tr>")
    if not rows:
        return '<p class="none">Findings: none.</p>'
    return _table("Findings (what is wrong and how to fix it)",
                  ["code", "severity", "count", "first seen", "message"], rows, "wide")


def _timeline_table(v: Figures) -> str:
    tl = v.timeline
    n = len(tl.time)
    if n < 2:
        return ""
    step = max(1, math.ceil(n / TIMELINE_ROWS))
    idx = sorted(set(range(n - 1, -1, -step)))
    rows = [f"<tr><td>{_e(_utc(tl.time[i]))}</td>"
            f"{_cell(tl.drafts[i], None, count_text(tl.drafts[i]))}"
            f"<td>{_ratio(tl.mean_acceptance_length[i])}</td>"
            f"<td>{_ratio(tl.acceptance_rate[i])}</td></tr>" for i in idx]
    every = f", every {step}th point" if step > 1 else ""
    return (f"<details><summary>Timeline as a table ({n} snapshots{every})</summary>"
            + _table("Per export interval, ending at the time shown",
                     ["time", "request-steps so far", "mean acceptance length",
                      "acceptance rate"], rows) + "</details>")


CHARTS = (
    ("positions", "Acceptance and token agreement per draft position"),
    ("lengths", "Accept-length distribution"),
    ("mal", "Mean acceptance length over time"),
    ("rate", "Acceptance rate over time"),
    ("widths", "Hidden-state widths per pass kind"),
)


def _chart_data(view: ProcessSummary | CombinedSummary) -> dict:
    """What the page's script draws for one view (rounded: the tables hold exact values)."""
    v = view.figures
    tl = v.timeline
    lengths = {k: n for k, n in v.accept_length_counts.items() if k.isascii() and k.isdigit()}
    return {
        "positions": {"acceptance": [_finite(x, 4) for x in v.acceptance_per_position],
                      "agreement": [_finite(x, 4) for x in v.agreement_per_position]},
        "lengths": {"x": [int(k) for k in lengths], "y": [_finite(lengths[k]) for k in lengths]},
        "timeline": {"time": [_finite(t, 3) for t in tl.time],
                     "mal": [_finite(x, 4) for x in tl.mean_acceptance_length],
                     "rate": [_finite(x, 4) for x in tl.acceptance_rate]},
        "findings": [{"code": f.code, "severity": f.severity,
                      "times": [_finite(t, 3) for t in f.times]}
                     for f in view.findings],
        "widths": [{"label": f"{p.pass_kind} {p.width}", "count": _finite(p.count),
                    "ok": p.expected is not None and not p.finding}
                   for p in v.hidden_state_passes],
        **speculation_chart_data(v),
    }


def _has_data(kind: str, d: dict) -> bool:
    if kind == "positions":
        return any(x is not None for x in d["positions"]["acceptance"] + d["positions"]["agreement"])
    if kind == "lengths":
        return any(d["lengths"]["y"])
    if kind in ("mal", "rate"):
        return any(x is not None for x in d["timeline"][kind])
    if kind == "tokens_k":
        return any(y is not None for s in d["tokens_k"]["series"] for y in s["y"])
    if kind == "speedup":
        return any(x is not None for x in d["speedup"]["est"])
    return bool(d["widths"])


def _breakdown_table(b) -> str:
    """Acceptance by one breakdown (`by_<name>.<i>.*` in --json), a row per bucket seen."""
    if not b.rows:
        return ""
    width = max(len(c.acceptance_per_position) for c in b.rows)
    rows = []
    for i, c in enumerate(b.rows):
        key = f"by_{b.name}.{i}"
        pos = "".join(_cell(c.acceptance_per_position[p],
                            f"{key}.acceptance_per_position.{p}",
                            _ratio(c.acceptance_per_position[p]))
                      if p < len(c.acceptance_per_position) else "<td>-</td>"
                      for p in range(width))
        rows.append(f"<tr><th scope=row>{_e(c.bucket)}</th>"
                    f"{_cell(c.mean_acceptance_length, f'{key}.mean_acceptance_length', _ratio(c.mean_acceptance_length))}"
                    f"{pos}{_cell(c.drafts, f'{key}.drafts', count_text(c.drafts))}</tr>")
    return _table(f"Acceptance by {b.title}",
                  [b.name.replace("_", " "), "mean accept length"]
                  + [f"position {p}" for p in range(width)] + ["request-steps"], rows)


def _requests_table(v: Figures) -> str:
    """Finished requests by mean accept length, and the recorded ones lowest first."""
    r = v.requests
    if r is None:
        return ""
    rows = [f"<tr><th scope=row>{_e(k)}</th>"
            f"{_cell(n, f'requests.by_mean_acceptance_length.{k}', count_text(n))}</tr>"
            for k, n in r.by_mean_acceptance_length.items()]
    rows += [f"<tr><th scope=row>{_e(x.request_id)}</th>"
             f"{_cell(x.mean_acceptance_length, f'requests.lowest.{i}.mean_acceptance_length', _ratio(x.mean_acceptance_length))}</tr>"
             for i, x in enumerate(r.lowest)]
    rates = [f"<tr><th scope=row>{_e(k)}</th>"
             f"{_cell(n, f'requests.by_acceptance_rate.{k}', count_text(n))}</tr>"
             for k, n in (r.by_acceptance_rate or {}).items()]
    return (_table(f"Finished requests ({count_text(r.finished)}) by mean accept length; "
                   "recorded requests, lowest first", ["mean accept length / request id",
                                                       "requests / mean"], rows)
            + (_table("Finished requests by acceptance rate (accepted / proposed draft "
                      "tokens)", ["acceptance rate", "requests"], rates) if rates else "")
            + _labels_table(r))


def _labels_table(r) -> str:
    """Finished requests by request label value (`requests.by_label.<i>` in --json) and
    those past the label cap (`requests.label_overflow`)."""
    if not r.by_label and not r.label_overflow:
        return ""
    rows = [f"<tr><th scope=row>{_e(x.value)}</th>"
            f"{_cell(x.finished, f'requests.by_label.{i}.finished', count_text(x.finished))}"
            f"<td>{_e('  '.join(f'{k}: {count_text(n)}' for k, n in x.by_mean_acceptance_length.items()))}</td></tr>"
            for i, x in enumerate(r.by_label)]
    rows.append("<tr><th scope=row>past SPECTRACE_REQUEST_LABEL_CAP, counted as other</th>"
                f"{_cell(r.label_overflow, 'requests.label_overflow', count_text(r.label_overflow))}"
                "<td></td></tr>")
    return _table(f"Finished requests by request label {r.label_key or ''}",
                  ["label value", "requests", "by mean accept length"], rows)


def _view(vid: str, title: str, view: ProcessSummary | CombinedSummary, identity: str
          ) -> tuple[str, dict]:
    v = view.figures
    data = _chart_data(view)
    charts = []
    for kind, label in CHARTS + (SPECULATION_CHARTS if v.speculation is not None else ()):
        if _has_data(kind, data):
            charts.append(f'<figure class="chart-box"><figcaption>{_e(label)}</figcaption>'
                          f'<div class="chart" data-chart="{kind}" data-view="{vid}"></div>'
                          f"</figure>")
        else:
            charts.append(f'<figure class="chart-box empty"><figcaption>{_e(label)}'
                          f"</figcaption><p>no data</p></figure>")
    body = (f'<section class="view" id="view-{vid}" data-view="{vid}"><h2>{_e(title)}</h2>'
            f"{identity}<div class=grid>{''.join(charts)}</div>"
            f"<div class=tables>{_totals_table(v)}{_positions_table(v)}{_lengths_table(v)}"
            f"{_widths_table(v)}{''.join(_breakdown_table(b) for b in v.breakdowns)}{_requests_table(v)}{speculation_tables(v)}</div>{_findings_table(view.findings)}{_timeline_table(v)}</section>")
    return body, data


def _identity_table(report: Report) -> str:
    rows = []
    for p in report.processes:
        if not isinstance(p, ProcessSummary):
            rows.append(f"<tr><th scope=row>{_e(p.process)}</th>"
                        f"<td colspan=12>unreadable: {_e(p.error)}</td></tr>")
            continue
        rows.append(f"<tr><th scope=row>{_e(p.process)}</th>" + "".join(
            f"<td>{_e(x)}</td>" for x in (p.pid, p.role, p.tp_rank, p.dp_rank, p.pp_rank,
                                          p.counted, p.model, p.draft_model,
                                          p.spec_algorithm, p.spec_worker))
            + f"<td>{_e(runtime_label(p))}</td><td>{_e(_utc(p.started))}</td></tr>")
    return _table("Processes", ["process", "pid", "role", "tp rank", "dp rank", "pp rank",
                                "counted", "model", "draft", "algorithm", "worker",
                                "runtime", "started"], rows,
                  "wide")


STYLE = """
:root{--fg:#1d2330;--muted:#5b6475;--line:#d9dee7;--bg:#fff;--red:#d62728;--amber:#e69500;
--green:#2ca02c;font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg)}
body{margin:0 auto;padding:1rem;max-width:1400px;background:var(--bg);line-height:1.4}
h1{font-size:1.4rem;margin:.2rem 0}h2{font-size:1.15rem;border-bottom:2px solid var(--line);
padding-bottom:.2rem;margin-top:2rem}.meta{color:var(--muted);font-size:.9rem}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,420px),1fr));gap:1rem}
.chart-box{margin:0;border:1px solid var(--line);border-radius:6px;padding:.5rem;min-width:0;
break-inside:avoid}.chart-box figcaption{font-weight:600;font-size:.9rem;margin-bottom:.3rem}
.chart{width:100%;min-width:0;overflow:hidden}.empty p{color:var(--muted)}
.tables{display:flex;flex-wrap:wrap;gap:1rem;margin-top:1rem;align-items:flex-start}
.table{overflow-x:auto;max-width:100%}.table.wide{width:100%}
table{border-collapse:collapse;font-size:.85rem}caption{text-align:left;font-weight:600;
padding:.3rem 0}th,td{border:1px solid var(--line);padding:.2rem .45rem;text-align:left;
vertical-align:top}td[data-key]{text-align:right;font-variant-numeric:tabular-nums}
tr.bad td,tr.sev-error th{color:var(--red)}tr.sev-warning th{color:var(--amber)}
td.msg{min-width:20rem}.legend-bands span{display:inline-block;padding:0 .4rem;margin-right:.3rem;
border-radius:3px;font-size:.8rem}.verdict{font-weight:600;padding:.4rem .6rem;border-radius:3px}
.v-healthy{background:#e3f4e3}.v-broken{background:#fbe3e3}.v-underperforming{background:#fdf0d5}.v-slower{background:#fdf0d5}
.v-not_enough_data,.v-no_data{background:#eee}.b-red{background:#fbe3e3}.b-amber{background:#fdf0d5}
.b-green{background:#e3f4e3}details{margin-top:1rem}summary{cursor:pointer;font-weight:600}
@media (max-width:600px){body{padding:.5rem}td.msg{min-width:12rem}}
@media print{body{max-width:none;padding:0}.grid{grid-template-columns:1fr 1fr}
h2{break-before:page}section:first-of-type h2{break-before:auto}
details>*{display:block}.u-legend{display:none}}
"""


def _verdict_line(report: Report) -> str:
    """The verdict, the page's first sentence (`data-state`: its state)."""
    v = verdict_of(report)
    return f'<p class="verdict v-{_e(v.state)}" data-state="{_e(v.state)}">{_e(v.sentence)}</p>'


def _settings_line(report: Report) -> str:
    """The server settings (`text.settings_lines`), in the page's header."""
    return "".join(f"<p class=meta id=settings>{_e(x)}</p>" for x in settings_lines(report))


def render_html(report: Report) -> str:
    readable = report.readable
    combined = report.combined
    views, data = [], []
    if combined and len(readable) > 1:
        body, d = _view("all", f"All {len(readable)} processes together", combined,
                        f"<p class=meta>{_e(combined_title(combined).capitalize())}. "
                        "Tensor-parallel ranks of one group see the same request-steps: "
                        "only their rank 0 is added; data-parallel groups add up.</p>")
        views.append(body)
        data.append({"id": "all", **d})
    for i, g in enumerate(report.groups):  # each deployment's together, in a fleet
        state = g.verdict.state
        body, d = _view(f"g{i}", group_title(g).split(": ")[0].capitalize(), g,
                        f'<p class="verdict v-{_e(state)}" data-state="{_e(state)}">'
                        f"{_e(g.verdict.sentence)}</p>"
                        f"<p class=meta>{_e(group_title(g).capitalize())}.</p>")
        views.append(body)
        data.append({"id": f"g{i}", **d})
    for i, p in enumerate(readable):
        ident = f"<p class=meta>{_e(process_identity(p, models=True))}</p>"
        if p.counted == signals.COUNTED_COPY:
            ident += f"<p class=meta>{_e(COPY_LINE.strip().capitalize())}.</p>"
        body, d = _view(f"p{i}", f"Process {p.process}", p, ident)
        views.append(body)
        data.append({"id": f"p{i}", **d})
    bands = ('<p class="legend-bands meta">Mean acceptance length bands, as on the '
             "dashboards: " + "".join(
                 f"<span class={cls}>{_e(band)}: {_e(verdict)}</span>"
                 for cls, (band, verdict) in zip(("b-red", "b-amber", "b-green"), HEALTH_BANDS))
             + ". Times in UTC; findings are marked on the time axis.</p>")
    empty = ("" if readable else "<p>No instrumented process has written here yet.</p>")
    return page(report.directory,
                f"<header><h1>spectrace report</h1>{_verdict_line(report)}"
                f"<p class=meta>{_e(report.directory)}, generated {_e(_utc(time.time()))}</p>"
                f"{_settings_line(report)}{bands}</header>",
                f"{_identity_table(report)}{empty}{''.join(views)}", data)


def page(title: str, header: str, body: str, views: list[dict]) -> str:
    """The self-contained page around `header` and `body` (markup already escaped), with
    the charts' data of `views` as inert JSON and the CSP that lets only the inline
    scripts run."""
    page_data = {"views": views, "bands": {
        "red_below": signals.ACCEPT_LENGTH_RED_BELOW,
        "amber_below": signals.ACCEPT_LENGTH_AMBER_BELOW}}
    lib, script = _asset("uPlot.iife.min.js"), _asset("report.js")
    csp = (f"default-src 'none'; script-src {_csp_hash(lib)} {_csp_hash(script)}; "
           "style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'")
    return (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<meta name=viewport content="width=device-width,initial-scale=1">'
        f"<title>spectrace report: {_e(title)}</title>"
        f"<style>{_asset('uPlot.min.css')}{STYLE}</style></head><body>"
        f"{header}{body}"
        f'<script type="application/json" id="{DATA_ID}">{inert_json(page_data)}</script>'
        f"<script>{lib}</script><script>{script}</script></body></html>\n")


def write_page(text: str, path: str) -> int:
    """Write a page to `path` (0600 when created); returns its size in bytes."""
    data = text.encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return len(data)


def write_html(report: Report, path: str) -> int:
    """Write the page to `path` (0600 when created); returns its size in bytes."""
    return write_page(render_html(report), path)

