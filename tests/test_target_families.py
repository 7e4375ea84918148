"""The target capture audit on SGLang's real target model classes, every family that
implements `set_eagle3_layers_to_capture` in the installed SGLang (0.5.23: 28 of them;
`mindspore` needs the MindSpore runtime), built without weights on the meta device
(harness/sglang_families.py says what stands in for what cannot run here: kernel ops
construction never calls, SGLang's one-process state, a pipeline-rank group). Each
family's real method is called with the ids a draft config gives, and
`spectrace.check_pair` is asked about the pair with SGLang's real Llama EAGLE-3 draft:

- never switched on: `aux.capture_disabled`;
- switched on with the draft's ids (and with no ids: the defaults): nothing, whatever the
  family's rule (Llama-style + 1, DeepSeek's "kept unless the first is 1", gpt-oss, ...);
- switched on with other ids than the draft's: `aux.layer_ids_mismatch`, and only then;
- pipeline rank 0 of 2: nothing (only the last rank captures, by design);
- Kimi-K2.5, which keeps its DeepSeek-V3 text model in `language_model`, among them.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from harness import sglang_families as fams
from harness.server import cpu_env

pytestmark = pytest.mark.sglang

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DRAFT_IDS = [0, 1, 2]

SCRIPT = os.path.join(ROOT, "tests", "programs", "target_families.py")

# SGLang itself refuses pipeline parallelism for these at construction (qwen3_next asserts
# one rank; Gemma-4's per-layer-input embeddings raise a ValueError).
PP_REFUSED = {"qwen3_next", "gemma4_causal", "gemma4_mm"}


@pytest.fixture(scope="module")
def results() -> dict:
    env = {k: v for k, v in cpu_env().items() if not k.startswith("SPECTRACE_")}
    env["PYTHONPATH"] = os.pathsep.join((ROOT, env["PYTHONPATH"]))
    out = subprocess.run([sys.executable, SCRIPT, json.dumps(DRAFT_IDS)],
                         capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-4000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def test_every_family_built_here_has_a_row_in_the_shared_table(results):
    """The run-time audit and the doctor read the same table: each family's architecture
    is in it."""
    from spectrace.rules.aux import SGLANG_TARGETS
    assert not set(results) - {n for n in results if fams.ARCHITECTURES[n] in SGLANG_TARGETS}


def test_every_family_of_the_installed_sglang_is_built(results):
    """All 28 families of SGLang 0.5.23 exist and were built (a family missing from an
    older wheel would say `present: False`)."""
    assert len(results) == 28
    assert all(r["present"] for r in results.values()), results


@pytest.mark.parametrize("family", sorted(fams.FAMILIES))
def test_audit_on_the_real_class(results, family):
    r = results[family]
    assert r["never_switched_on"] == ["aux.capture_disabled"]
    assert r["draft_ids"] == [] and r["defaults"] == []
    assert r["other_ids"] == ["aux.layer_ids_mismatch"]
    assert "aux.count_mismatch" in r["repeated_id"]
    if family in PP_REFUSED:
        assert "pp_refused" in r, r
    else:
        assert r["pp_rank_0_of_2"] == []


def test_rules_that_differ_from_plus_one_are_exercised(results):
    """DeepSeek-V3, Kimi-K2.5 (through its DeepSeek-V3 text model) and GLM-4-MoE-Lite keep
    the draft's [0, 1, 2] as given; Llama adds 1: both healthy, as checked above. The table
    names the rule the real method follows."""
    from spectrace.rules import aux
    targets = aux.SGLANG_TARGETS
    assert targets["DeepseekV3ForCausalLM"].rule == aux.KEPT_UNLESS_FIRST_IS_ONE
    assert targets["KimiK25ForConditionalGeneration"].rule == aux.KEPT_UNLESS_FIRST_IS_ONE
    assert targets["LlamaForCausalLM"].rule == aux.PLUS_ONE
    for family in ("deepseek_v3", "kimi_k25", "glm4_moe_lite", "llama", "gpt_oss",
                   "minimax_m3_vl"):
        assert results[family]["draft_ids"] == [] and results[family]["defaults"] == []
