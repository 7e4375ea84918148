"""The HTML page's "Is speculation paying off" part (`spectrace.report.advisor`, docs/advisor.md):
tables in which each column is one figure (the speed-up by batch size with its interval and
best K'; the predicted figures of each K'; the advice and the forward's fit), and the data of
two charts, tokens/s per request against K' for each batch size (where a crossover shows)
and the estimated speed-up by batch size with its interval. Cells carry their `--json` key
(`speculation.*`)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .runtime_settings import describe
from .format import count_text
from .html_parts import _cell, _e, _finite, _ratio, _table
from .records import Figures

if TYPE_CHECKING:  # the type only: the views read the advice, never run it
    from .advisor import Advice

SPECULATION_CHARTS = (
    ("tokens_k", "Predicted tokens/s per request by draft tokens K' (off: no speculation)"),
    ("speedup", "Estimated speed-up against no speculation by batch size"),
)
VERDICT_WORDS = {"slower": "slower", "small_gain": "gains little", "pays": "pays",
                 "uncertain": "not judged (interval spans 1.0)", "unknown": "too few steps"}


def _ms(value, key: str | None) -> str:
    return _cell(value, key, "-" if _finite(value) is None else f"{value * 1e3:.2f} ms")


def _k(k: int | None) -> str:
    return "-" if k is None else "off" if k == 0 else str(k)


def _by_batch(adv: Advice) -> str:
    rows = []
    for i, b in enumerate(adv.buckets):
        key = f"speculation.buckets.{i}"
        lo, hi = b.interval or (None, None)
        now = next((j for j, o in enumerate(b.options) if o.num_steps == b.num_steps), None)
        step = b.options[now].step_seconds if now is not None else None
        n = b.phases["step"].samples if "step" in b.phases else None
        rows.append(
            f"<tr><th scope=row>{_e(b.bucket)}</th>{_cell(b.num_steps, key + '.num_steps')}"
            f"{_cell(n, key + '.phase_samples.step', count_text(n))}"
            f"{_cell(b.batch_size, key + '.mean_batch_size', _ratio(b.batch_size))}"
            f"{_ms(step, None if now is None else f'{key}.options.{now}.step_seconds')}"
            f"{_ms(b.plain_seconds, key + '.plain_step_seconds')}"
            f"{_cell(b.speedup, key + '.estimated_speedup', _ratio(b.speedup))}"
            f"{_cell(lo, key + '.estimated_speedup_lower', _ratio(lo))}"
            f"{_cell(hi, key + '.estimated_speedup_upper', _ratio(hi))}"
            f"<td>{'bound' if b.bound else 'fit'}</td><td>{_e(VERDICT_WORDS[b.verdict])}</td>"
            f"<td>{_e(_k(b.best))}</td></tr>")
    rows.append(
        "<tr><th scope=row>all measured steps</th><td></td><td></td><td></td><td></td><td></td>"
        f"{_cell(adv.speedup, 'speculation.estimated_speedup', _ratio(adv.speedup))}"
        f"{_cell(adv.speedup_lower, 'speculation.estimated_speedup_lower', _ratio(adv.speedup_lower))}"
        f"{_cell(adv.speedup_upper, 'speculation.estimated_speedup_upper', _ratio(adv.speedup_upper))}"
        f"<td>{'counts' if adv.counted else 'bound' if adv.bound else 'fit'}</td>"
        f"<td>{_e(VERDICT_WORDS[adv.verdict])}</td><td>{_e(_k(adv.best))}</td></tr>")
    return _table("Is speculation paying off: estimated speed-up against no speculation, by "
                  "batch size (interval: two standard errors; a bound cannot say it pays)",
                  ["batch size", "K now", "measured steps", "mean batch", "step", "plain step",
                   "speed-up", "low", "high", "estimate", "verdict", "best K'"], rows, "wide")


def _per_k(adv: Advice) -> str:
    rows = []
    for i, b in enumerate(adv.buckets):
        for j, o in enumerate(b.options):
            key = f"speculation.buckets.{i}.options.{j}"
            mark = " (now)" if o.num_steps == b.num_steps else " (best)" if \
                o.num_steps == b.best else ""
            rows.append(
                f"<tr><th scope=row>{_e(b.bucket)}</th><td>{_e(_k(o.num_steps) + mark)}</td>"
                f"{_cell(o.tokens_per_step, key + '.tokens_per_step', _ratio(o.tokens_per_step))}"
                f"{_ms(o.step_seconds, key + '.step_seconds')}"
                f"{_cell(o.tokens_per_second, key + '.tokens_per_second', f'{o.tokens_per_second:.1f}')}"
                f"{_cell(o.relative, key + '.relative', _ratio(o.relative))}</tr>")
    return _table("Predicted for each number of draft tokens K' (tokens per step exact from "
                  "the counts; time per step from the step costs)",
                  ["batch size", "K'", "tokens/step", "time/step", "tokens/s/request",
                   "vs now"], rows)


def _advice(adv: Advice) -> str:
    rows = []
    if adv.best is not None:
        rows.append(f"<tr><th scope=row>best draft steps over the observed mix</th>"
                    f"{_cell(adv.best, 'speculation.best_num_steps')}</tr>")
        rows.append(f"<tr><th scope=row>its predicted gain over K now</th>"
                    f"{_cell(adv.gain, 'speculation.predicted_gain', _ratio(adv.gain))}</tr>")
        rows.append(f"<tr><th scope=row>its flags</th><td>{_e(adv.flags)}</td></tr>")
    if adv.best_by_bucket:
        rows.append(f"<tr><th scope=row>best K' by batch size</th>"
                    f"<td>{_e(describe(adv.best_by_bucket))}</td></tr>")
    if adv.loses_from:
        rows.append(f"<tr><th scope=row>speculation loses from batch size</th>"
                    f"<td>{_e(adv.loses_from)}</td></tr>")
    if adv.batch_flags:
        rows.append(f"<tr><th scope=row>the setting for each batch size</th>"
                    f"<td>{_e(adv.batch_flags)}</td></tr>")
    f = adv.fit
    if f is not None:
        rows.append(f"<tr><th scope=row>target forward: fixed cost</th>"
                    f"{_ms(f.intercept, 'speculation.forward_fit.intercept_seconds')}</tr>")
        rows.append(f"<tr><th scope=row>target forward: per token</th>"
                    f"{_ms(f.slope, 'speculation.forward_fit.seconds_per_token')}</tr>")
        rows.append(f"<tr><th scope=row>target forward: spread of one forward</th>"
                    f"{_ms(f.residual_sd, 'speculation.forward_fit.residual_sd_seconds')}</tr>")
    rows += [f"<tr><th scope=row>note</th><td>{_e(n)}</td></tr>" for n in adv.notes]
    return _table("Advisor", ["figure", "value"], rows, "wide")


def speculation_tables(v: Figures) -> str:
    adv = v.speculation
    if adv is None:
        return ""
    return _by_batch(adv) + _per_k(adv) + _advice(adv)


def speculation_chart_data(v: Figures) -> dict:
    """The two charts' data (empty lists without an estimate)."""
    adv = v.speculation
    usable = [b for b in adv.buckets if b.options] if adv is not None else []
    top = max((len(b.options) for b in usable), default=0)
    return {
        "tokens_k": {"k": list(range(top)), "series": [
            {"label": f"batch {b.bucket}",
             "y": [_finite(b.options[j].tokens_per_second, 4) if j < len(b.options) else None
                   for j in range(top)]} for b in usable]},
        "speedup": {"labels": [b.bucket for b in usable],
                    "est": [_finite(b.speedup, 4) for b in usable],
                    "lo": [_finite((b.interval or (None, None))[0], 4) for b in usable],
                    "hi": [_finite((b.interval or (None, None))[1], 4) for b in usable],
                    "bound": [b.bound for b in usable]},
    }
