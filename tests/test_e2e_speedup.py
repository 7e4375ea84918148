"""Does speculation pay? The advisor's estimate on the real SGLang 0.5.23 CPU server (EAGLE-3,
v2 worker), at batch 1 and batch 4, every step measured (docs/advisor.md):

- the tiny `partial` pair at 3 draft steps (one draft token accepted a step), which the same
  server, models and prompts without speculation serve faster on this machine (measured
  by benchmarks/advisor_accuracy.py, figures in docs/advisor.md): the report says
  `speculation.slower`, with the estimate, its interval and the advisor's K, per batch-size
  bucket too, in the text, JSON and HTML;
- the `full` pair at 3 draft steps (every draft token accepted), which the same benchmark
  measures paying: the report does not say so.

The speed-up is an estimate, not a bound: the target's forward is timed inside verify and
fitted against its tokens, which differ between the two batch sizes.
"""
from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from spectrace.advisor import judge
from spectrace.report.text import VERDICTS
from tests.e2e import settle, sglang_totals

pytestmark = pytest.mark.sglang

FAST = {"SPECTRACE_METRIC_INTERVAL": "0.5", "SPECTRACE_STEP_COST_EVERY": "1",
        "SPECTRACE_AGREEMENT_EVERY": "0"}
PROMPTS = [[3, 7, 11], [5, 9, 2], [4, 6, 8], [10, 1, 3]]
# The estimate's interval is as wide as the step timings are noisy: the servers run above
# the other test worker's jobs (a niceness below 0 needs root; CI runs as root), as the
# benchmark's do (`--server-nice`). Without it, a loaded 2-core machine widened the
# partial pair's interval past 1.1 (0.76x, `uncertain`).
PRIORITY = {"nice": -10} if os.geteuid() == 0 else {}
TOKENS = 48


def serve(run, rounds: int) -> dict:
    """`rounds` of one request alone (batch 1), then four at once (batch 4), taking turns
    so that a load that changes meanwhile falls on both batch sizes; the scheduler's
    summary once every request-step is counted."""
    out = []
    with ThreadPoolExecutor(4) as pool:
        for i in range(rounds):
            out.append(run.server.generate(PROMPTS[i % 4], TOKENS))
            out += list(pool.map(lambda p: run.server.generate(p, TOKENS), PROMPTS))
    return settle(run, sglang_totals(out)[0])


def report_text(directory) -> str:
    out = subprocess.run([sys.executable, "-m", "spectrace.cli", "report", str(directory)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def by_bucket(adv: dict) -> dict:
    return {b["batch_size_bucket"]: b for b in adv["buckets"]}


@pytest.fixture(scope="module")
def partial(tiny_models, sglang_server):
    run = sglang_server(tiny_models("partial"), env=FAST, **PRIORITY)
    return run, serve(run, rounds=4)


@pytest.fixture(scope="module")
def full(tiny_models, sglang_server, partial):  # after partial: one server at a time
    run = sglang_server(tiny_models("full"), env=FAST, **PRIORITY)
    return run, serve(run, rounds=4)


def test_partial_at_three_steps_never_pays_and_its_verdict_follows_the_interval(partial):
    run, proc = partial
    adv = proc["speculation"]
    assert adv["estimate"] == "fit" and adv["forward_fit"] is not None, adv["notes"]
    fit = adv["forward_fit"]
    assert fit["tokens_range"] == [4.0, 16.0] and fit["intercept_seconds"] >= 0
    buckets = by_bucket(adv)
    assert {"1", "4-7"} <= set(buckets), sorted(buckets)
    for label, batch in (("1", 1), ("4-7", 4)):
        b = buckets[label]
        assert b["judged"] and b["estimate"] == "fit" and b["num_steps"] == 3
        assert b["mean_batch_size"] == pytest.approx(batch, abs=0.5)
        assert b["estimated_speedup_lower"] < b["estimated_speedup"] < b["estimated_speedup_upper"]
        # a plain step's figure holds the time between steps; the step phase does not
        ph = b["phase_seconds"]
        assert 0 < b["plain_step_seconds"] < ph["step"] + ph.get("between_steps", 0.0)
    # On a quiet machine the whole interval is under 1.0: `slower` (the same run recorded:
    # tests/test_advisor_recorded.py). On a loaded one the step timings are noisy and the
    # interval widens (CI rehearsals: 0.69x up to 1.0-1.1, `small_gain`; 0.76x and 1.02x up
    # past 1.1, `uncertain`): the verdict follows the interval, and never says it pays.
    verdict = adv["verdict"]
    lower, upper = adv["estimated_speedup_lower"], adv["estimated_speedup_upper"]
    # `unknown` when too few of the measured steps are in buckets past the floor (a loaded
    # run spreads the four-request rounds over more batch sizes)
    assert verdict == judge((lower, upper), adv["judged"], False) != "pays", adv
    assert lower < adv["estimated_speedup"] < upper
    assert adv["best_num_steps"] in (0, 1, 2)  # never 3: its drafts past the first are wasted
    codes = {f["code"] for f in adv["findings"]}
    text = report_text(run.data_dir)
    if verdict in ("slower", "small_gain"):
        code = "speculation." + verdict
        [warning] = [f for f in adv["findings"] if f["code"] == code]
        assert warning["severity"] == "warning"
        m = warning["message"]
        assert (f"estimated speed-up {adv['estimated_speedup']:.2f}x "
                f"({lower:.2f}x - {upper:.2f}x, two standard errors") in m and "K=3" in m, m
        assert VERDICTS[verdict] in text and f"({code})" in text.splitlines()[0], text
    else:
        assert not codes & {"speculation.slower", "speculation.small_gain"}, codes
        assert VERDICTS[verdict] in text, text
    for label in ("1", "4-7"):
        b = buckets[label]
        assert (f"batch {label}, K=3" in text and
                f"speed-up {b['estimated_speedup']:.2f}x ({b['estimated_speedup_lower']:.2f}x"
                in text), text


def test_the_html_page_shows_the_speedup_by_batch_size(partial, tmp_path):
    """The page's tables hold every figure of the speed-up by batch size (one figure per
    column, each cell carrying its --json key), and its chart data the same buckets."""
    import json
    import re
    run, proc = partial
    page = tmp_path / "report.html"
    out = subprocess.run([sys.executable, "-m", "spectrace.cli", "report", str(run.data_dir),
                          "--html", str(page)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    html = page.read_text()
    adv = proc["speculation"]
    for i, b in enumerate(adv["buckets"]):
        for field in ("estimated_speedup", "estimated_speedup_lower", "estimated_speedup_upper",
                      "plain_step_seconds", "mean_batch_size"):
            assert f'data-key="speculation.buckets.{i}.{field}" data-value="{b[field]!r}"' in html
    data = json.loads(re.search(r'id="spectrace-data">(.*?)</script>', html).group(1))
    view = data["views"][0]
    assert view["speedup"]["labels"] == [b["batch_size_bucket"] for b in adv["buckets"]]
    assert [s["label"] for s in view["tokens_k"]["series"]] == [
        f"batch {b['batch_size_bucket']}" for b in adv["buckets"]]
    assert 'data-chart="speedup"' in html and 'data-chart="tokens_k"' in html


def test_full_acceptance_is_not_called_slower(full):
    """Every draft token accepted (4 tokens a step): the same server pays on this machine,
    and the report does not say speculation is slower or gains little."""
    run, proc = full
    adv = proc["speculation"]
    assert adv["estimate"] == "fit", adv["notes"]
    assert adv["verdict"] not in ("slower", "small_gain"), adv
    assert not [f for f in adv["findings"]
                if f["code"] in ("speculation.slower", "speculation.small_gain")]
    assert adv["estimated_speedup"] > 1.0 and adv["best_num_steps"] == 3
    assert all(b["best_num_steps"] == 3 for b in adv["buckets"] if b["options"])
    assert adv["loses_from_batch_size"] is None and adv["batch_size_flags"] is None
    assert "SLOWER" not in report_text(run.data_dir)
