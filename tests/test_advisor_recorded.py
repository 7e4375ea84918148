"""The advisor on real runs recorded on a quiet machine (tests/recorded/README.md): the
tiny `partial` pair at 3 draft steps, which the same server serves faster without
speculation, is called slower, with its estimate, interval and the advisor's K, in every
batch-size bucket; the `full` pair, which pays, is said to pay. A live run of the same
server (tests/test_e2e_speedup.py) cannot promise this verdict on a loaded machine: its
interval widens with the noise."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from spectrace.report.summary import build_report

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "recorded", "advisor")


@pytest.fixture(scope="module")
def partial():
    return build_report(os.path.join(HERE, "partial-k3")).to_json()["combined"]["speculation"]


@pytest.fixture(scope="module")
def full():
    return build_report(os.path.join(HERE, "full-k3")).to_json()["combined"]["speculation"]


def test_partial_at_three_steps_is_slower_in_every_bucket(partial):
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
    [slower] = [f for f in adv["findings"] if f["code"] == "speculation.slower"]
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
    assert first.startswith("Verdict: underperforming") and "(speculation.slower)" in first
    assert "speculation is SLOWER than plain decoding" in out.stdout
    for b in partial["buckets"]:
        assert (f"batch {b['batch_size_bucket']}, K=3" in out.stdout and
                f"speed-up {b['estimated_speedup']:.2f}x ({b['estimated_speedup_lower']:.2f}x"
                in out.stdout), out.stdout


def test_full_acceptance_pays(full):
    adv = full
    assert adv["verdict"] == "pays" and adv["estimated_speedup_lower"] > 1.0, adv
    assert adv["best_num_steps"] == 3
    assert all(b["verdict"] == "pays" and b["best_num_steps"] == 3 for b in adv["buckets"])
    assert not [f for f in adv["findings"]
                if f["code"] in ("speculation.slower", "speculation.small_gain")]
    assert adv["loses_from_batch_size"] is None
