"""`spectrace report DIR --baseline BASEDIR --html FILE`: the comparison as one
self-contained page (the same page frame, script and Content-Security-Policy as
`html`): the sentence, the run configuration with what differs marked, the two runs
overlaid (acceptance per position, each breakdown's buckets, mean acceptance length over
each run's own time), and the tables of `--json`'s figures with their intervals; then
each run's own report views."""
from __future__ import annotations

import time

from .compare import MIX, RunComparison
from .compare_text import _value
from .html import _view, page
from .html_parts import _e, _finite, _table, _utc
from .records import Report


def _est(e) -> str:
    return "" if e is None else f"{e.value:.3f} [{e.low:.3f}, {e.high:.3f}]"


def _cells(key: str, *values: str) -> str:
    return "".join(f'<td data-key="{_e(key)}.{i}">{_e(v)}</td>' for i, v in enumerate(values))


def _mark(r) -> str:
    """A changed setting is marked bad; a moved traffic mix is the traffic, not a fault."""
    return "differs" if r.changed else "moved" if r.differs else ""


def _config_table(c: RunComparison) -> str:
    rows = [f'<tr class="{"bad" if r.changed else ""}" '
            f'data-differs="{int(r.differs)}">'
            f"<th scope=row>{_e(r.label)}</th><td>{_e(_value(r.baseline))}</td>"
            f"<td>{_e(_value(r.current))}</td><td>{_mark(r)}</td></tr>"
            for r in c.config if r.kind != MIX or r.baseline or r.current]
    return _table("Run configuration", ["", "baseline", "current", ""], rows, "wide")


def _figures_table(c: RunComparison) -> str:
    res = c.result
    rows = ["<tr><th scope=row>mean acceptance length</th>"
            + _cells("mean_acceptance_length", _est(c.baseline.mean_acceptance_length),
                     _est(c.current.mean_acceptance_length), _est(res.total)) + "</tr>"]
    for p, change in enumerate(res.positions):
        b, cu = c.baseline.acceptance_per_position, c.current.acceptance_per_position
        rows.append(f"<tr><th scope=row>acceptance at [{p}]</th>" + _cells(
            f"acceptance_per_position.{p}", _est(b[p] if p < len(b) else None),
            _est(cu[p] if p < len(cu) else None), _est(change)) + "</tr>")
    for name, run in (("baseline", c.baseline), ("current", c.current)):
        s = run.speedup
        if s and s.get("speedup") is not None:
            rows.append(f"<tr><th scope=row>estimated speed-up, {name}</th><td colspan=3>"
                        f"{s['speedup']:.2f}x ({_e(s['verdict'])}); step seconds by batch "
                        f"size {_e(s['step_seconds'])}</td></tr>")
    return _table("Side by side (95 % intervals)", ["", "baseline", "current", "change"], rows)


def _split_table(s) -> str:
    rows = [f"<tr><th scope=row>{_e(x.bucket)}</th>" + _cells(
        f"{s.breakdown}.{x.bucket}", f"{x.baseline_share:.1%}", f"{x.current_share:.1%}",
        "" if x.baseline is None else f"{x.baseline.mean_acceptance_length:.3f}",
        "" if x.current is None else f"{x.current.mean_acceptance_length:.3f}",
        _est(x.change) if x.change else "not compared") + "</tr>" for x in s.buckets]
    head = (f"By {s.breakdown.replace('_', ' ')}: compared buckets hold {s.coverage:.0%} "
            "of the current request-steps")
    if s.system is not None:
        head += (f"; system {_est(s.system)}, traffic {_est(s.traffic)}")
    return _table(head, ["bucket", "baseline share", "current share", "baseline mean",
                         "current mean", "change"], rows)


def _pair(labels, base, cur, xlabel, ylabel, top=None) -> dict:
    return {"pair": {"labels": labels, "base": [_finite(x, 4) for x in base],
                     "cur": [_finite(x, 4) for x in cur], "xlabel": xlabel,
                     "ylabel": ylabel, "top": top}}


def _relative(timeline) -> dict:
    t0 = next((t for t in timeline.time if t is not None), 0)
    return {round(t - t0, 3): v for t, v in zip(timeline.time, timeline.mean_acceptance_length)
            if t is not None and v is not None}


def _chart(vid: str, kind: str, title: str) -> str:
    return (f'<figure class="chart-box"><figcaption>{_e(title)}</figcaption>'
            f'<div class="chart" data-chart="{kind}" data-view="{vid}"></div></figure>')


def _overlays(c: RunComparison, current: Report, baseline: Report) -> tuple[str, list]:
    charts, data = [], []
    bp = [e.value for e in c.baseline.acceptance_per_position]
    cp = [e.value for e in c.current.acceptance_per_position]
    n = max(len(bp), len(cp))
    data.append({"id": "cmp-positions", **_pair(
        [f"position {i}" for i in range(n)], bp + [None] * (n - len(bp)),
        cp + [None] * (n - len(cp)), "position", "share of request-steps", 1)})
    charts.append(_chart("cmp-positions", "pair", "Acceptance per position"))
    for s in c.result.splits:
        labels = [x.bucket for x in s.buckets]
        data.append({"id": f"cmp-{s.breakdown}", **_pair(
            labels,
            [x.baseline.mean_acceptance_length if x.baseline else None for x in s.buckets],
            [x.current.mean_acceptance_length if x.current else None for x in s.buckets],
            s.breakdown.replace("_", " "), "mean acceptance length")})
        charts.append(_chart(f"cmp-{s.breakdown}", "pair",
                             f"Mean acceptance length by {s.breakdown.replace('_', ' ')}"))
    if current.combined and baseline.combined:
        b = _relative(baseline.combined.figures.timeline)
        cu = _relative(current.combined.figures.timeline)
        xs = sorted(set(b) | set(cu))
        if xs:
            data.append({"id": "cmp-time", "pair_time": {
                "x": xs, "base": [_finite(b.get(x), 4) for x in xs],
                "cur": [_finite(cu.get(x), 4) for x in xs]}})
            charts.append(_chart("cmp-time", "pair_time",
                                 "Mean acceptance length over each run's time"))
    return f"<div class=grid>{''.join(charts)}</div>", data


def render_comparison_html(c: RunComparison, current: Report, baseline: Report) -> str:
    overlay, data = _overlays(c, current, baseline)
    views = []
    for vid, name, rep in (("cur", "Current", current), ("base", "Baseline", baseline)):
        if rep.combined is None:
            continue
        body, d = _view(vid, f"{name}: {rep.directory}", rep.combined, "")
        views.append(body)
        data.append({"id": vid, **d})
    header = (f"<header><h1>spectrace report: current against baseline</h1>"
              f'<p class="verdict v-{_e(c.result.kind)}" data-kind="{_e(c.result.kind)}" '
              f'id=comparison>{_e(c.sentence)}</p>'
              f"<p class=meta>current {_e(current.directory)}, baseline "
              f"{_e(baseline.directory)}, generated {_e(_utc(time.time()))}</p></header>")
    body = (f"{_config_table(c)}<section class=view id=view-compare><h2>The two runs "
            f"overlaid</h2>{overlay}<div class=tables>{_figures_table(c)}"
            f"{''.join(_split_table(s) for s in c.result.splits)}</div></section>"
            + "".join(views))
    return page(f"{current.directory} against {baseline.directory}", header, body, data)


def write_comparison_html(c: RunComparison, current: Report, baseline: Report,
                          path: str) -> int:
    from .html import write_page
    return write_page(render_comparison_html(c, current, baseline), path)
