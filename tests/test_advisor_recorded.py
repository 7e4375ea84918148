"""The advisor on real runs recorded on a quiet machine (tests/recorded/README.md): the
tiny `partial` pair at 3 draft steps, which the same server serves faster without
speculation, is called slower, with its estimate, interval and the advisor's K, in every
batch-size bucket; the `full` pair, which pays, is said to pay. A live run of the same
server cannot promise this verdict on a loaded machine (its interval widens with the
noise), so the recordings are checked in (tests/recorders/record_advisor.py made them)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from spectrace.report.summary import build_report

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "recorded", "advisor")


@pytest.fixture(scope="module")
def partial_view():
    """The report's view of all processes together (its JSON): figures and findings."""
    return build_report(os.path.join(HERE, "partial-k3")).to_json()["combined"]


@pytest.fixture(scope="module")
def full_view():
    return build_report(os.path.join(HERE, "full-k3")).to_json()["combined"]


@pytest.fixture(scope="module")
def partial(partial_view):
    return partial_view["speculation"]


@pytest.fixture(scope="module")
def full(full_view):
    return full_view["speculation"]


def test_partial_at_three_steps_is_slower_in_every_bucket(partial, partial_view):
    adv = partial
    assert adv["estimate"] == "fit" and adv["forward_fit"]["tokens_range"] == [4.0, 16.0]
    assert adv["verdict"] == "slower", adv
    assert adv["estimated_speedup_lower"] < adv["estimated_speedup"] < \
        adv["estimated_speedup_upper"] < 1.0
    buckets = {b["batch_size_bucket"]: b for b in adv["buckets"]}
    assert set(buckets) == {"1", "4-7"}
    for b in buckets.values():
        assert b["judged"] and b["verdict"] == "slower" and b["estimated_speedup_upper"] < 1.0
        assert b["best_num_steps"] in (0, 1)  # never 3: its drafts past the first are wasted
    [slower] = [f for f in partial_view["findings"] if f["code"] == "speculation.slower"]
    assert slower["severity"] == "warning"
    m = slower["message"]
    assert (f"estimated speed-up {adv['estimated_speedup']:.2f}x "
            f"({adv['estimated_speedup_lower']:.2f}x - {adv['estimated_speedup_upper']:.2f}x, "
            "two standard errors") in m, m
    assert f"the advisor's K: {adv['best_num_steps']}" in m and "K=3" in m, m
    assert adv["best_num_steps"] in (0, 1)


def test_the_report_says_so_first(partial):
    out = subprocess.run([sys.executable, "-m", "spectrace.cli", "report",
                          os.path.join(HERE, "partial-k3")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    first = out.stdout.splitlines()[0]
    assert first.startswith("Verdict: slower than plain decoding: speculation costs more than "
                            "it saves at batch sizes 1 and 4-7 and K=3, measured")
    assert "(speculation.slower)" in first and "acceptance is not weak as a whole" in first
    assert "speculation is SLOWER than plain decoding" in out.stdout
    for b in partial["buckets"]:
        assert (f"batch {b['batch_size_bucket']}, K=3" in out.stdout and
                f"speed-up {b['estimated_speedup']:.2f}x ({b['estimated_speedup_lower']:.2f}x"
                in out.stdout), out.stdout


def test_full_acceptance_pays(full, full_view):
    adv = full
    assert adv["verdict"] == "pays" and adv["estimated_speedup_lower"] > 1.0, adv
    assert adv["best_num_steps"] == 3
    assert all(b["verdict"] == "pays" and b["best_num_steps"] == 3 for b in adv["buckets"])
    assert not [f for f in full_view["findings"]
                if f["code"] in ("speculation.slower", "speculation.small_gain")]
    assert adv["loses_from_batch_size"] is None


def test_each_bucket_is_its_batch_size_and_a_plain_step_holds_the_gap(partial):
    """The fit's buckets are the batch sizes served (one request alone, four at once), and a
    plain step's figure holds the time between steps, which the step phase does not."""
    assert partial["forward_fit"]["intercept_seconds"] >= 0
    buckets = {b["batch_size_bucket"]: b for b in partial["buckets"]}
    for label, batch in (("1", 1), ("4-7", 4)):
        b = buckets[label]
        assert b["judged"] and b["estimate"] == "fit" and b["num_steps"] == 3
        assert b["mean_batch_size"] == pytest.approx(batch, abs=0.5)
        assert b["estimated_speedup_lower"] < b["estimated_speedup"] < b["estimated_speedup_upper"]
        ph = b["phase_seconds"]
        assert 0 < b["plain_step_seconds"] < ph["step"] + ph.get("between_steps", 0.0)


def test_the_html_page_shows_the_speedup_by_batch_size(partial, tmp_path):
    """The page's tables hold every figure of the speed-up by batch size (one figure per
    column, each cell carrying its --json key), and its chart data the same buckets."""
    import json
    import re
    page = tmp_path / "report.html"
    out = subprocess.run([sys.executable, "-m", "spectrace.cli", "report",
                          os.path.join(HERE, "partial-k3"), "--html", str(page)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    html = page.read_text()
    for i, b in enumerate(partial["buckets"]):
        for field in ("estimated_speedup", "estimated_speedup_lower", "estimated_speedup_upper",
                      "plain_step_seconds", "mean_batch_size"):
            assert f'data-key="speculation.buckets.{i}.{field}" data-value="{b[field]!r}"' in html
    data = json.loads(re.search(r'id="spectrace-data">(.*?)</script>', html).group(1))
    view = data["views"][0]
    assert view["speedup"]["labels"] == [b["batch_size_bucket"] for b in partial["buckets"]]
    assert [s["label"] for s in view["tokens_k"]["series"]] == [
        f"batch {b['batch_size_bucket']}" for b in partial["buckets"]]
    assert 'data-chart="speedup"' in html and 'data-chart="tokens_k"' in html


def test_full_acceptance_is_never_called_slower_in_the_text(full):
    assert full["batch_size_flags"] is None
    out = subprocess.run([sys.executable, "-m", "spectrace.cli", "report",
                          os.path.join(HERE, "full-k3")], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "SLOWER" not in out.stdout and "gains little" not in out.stdout
