"""Every config field the runtimes' EAGLE-3 draft classes read (spectrace/doctor/judge/
config_fields.py), checked against the real classes and against the doctor's own model:

1. SGLang 0.5.23's `LlamaForCausalLMEagle3` and `Eagle3DeepseekV2ForCausalLM`
   (harness/sglang_draft_probe.py) and the installed vLLM's `Eagle3LlamaForCausalLM`,
   `Eagle3Qwen3ForCausalLM` and `Eagle3DeepseekV2ForCausalLM` (harness/vllm_draft_probe.py,
   in the vLLM environment), each built without weights from the tiny base config and from
   the base with each fact's `sets` applied: what differs (parameters added, removed,
   reshaped; the switches of harness/draft_switches.py; a refusal) is exactly the fact's
   `changes`. A release whose class does otherwise fails here.
2. The doctor's model predicts the same: `draft_params.expected_params` differs by the same
   parameters, and its `Loader` fields, `ties_lm_head`, `uses_fc` and
   `positions.honours_window` agree with the switches (fast: pure functions).
3. The table in docs/doctor.md is the one scripts/doctor_tables.py generates.
"""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import tiny_mla
from harness.tiny_models import draft_config
from spectrace.doctor.judge import config_fields as cf
from spectrace.doctor.judge.loaders import DraftClass, resolve_loader
from spectrace.doctor.judge.draft_params import expected_params, shared_from_target, ties_lm_head, uses_fc
from spectrace.doctor.judge.positions import honours_window
from spectrace.runtimes import SGLANG, VLLM

ROOT = Path(__file__).resolve().parents[1]
# the list: each must have a fact for every runtime that has the Llama draft
NAMED = ("tie_word_embeddings", "draft_vocab_size", "target_hidden_size",
         "eagle_config.use_aux_hidden_state", "eagle_config.eagle_aux_hidden_state_layer_ids",
         "norm_before_residual", "norm_before_fc", "head_dim", "hidden_act", "attention_bias",
         "mlp_bias", "rope_scaling", "rope_theta", "layer_types (+ sliding_window)")


def base_config(draft: str) -> dict:
    """The tiny config every fact is toggled on (the MLA draft's model type is DeepSeek-V2's:
    vLLM turns a `deepseek_v3` draft into an MTP module, which is a fact of its own)."""
    if draft == DraftClass.MLA:
        return {**tiny_mla.draft_config("random", [0, 1, 2]), "model_type": "deepseek_v2"}
    cfg = draft_config("random")
    if draft == DraftClass.QWEN3:
        cfg.update(architectures=["Eagle3Qwen3ForCausalLM"], model_type="qwen3", head_dim=32)
    return cfg


def variant(fact: cf.FieldFact) -> dict:
    cfg = copy.deepcopy(base_config(fact.draft))
    cfg.update(copy.deepcopy(dict(fact.sets)))
    return cfg


# -- 3. the table ------------------------------------------------------------------------------
def test_docs_table_is_generated_from_the_facts():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import doctor_tables as gen
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    doc = (ROOT / "docs" / "doctor.md").read_text(encoding="utf-8")
    assert gen.replaced(doc) == doc, "run: python scripts/doctor_tables.py --write"


def test_the_named_fields_are_covered_for_both_runtimes():
    have = {(f.field, f.runtime) for f in cf.FACTS if f.draft == DraftClass.LLAMA}
    missing = [(n, rt) for n in NAMED for rt in (SGLANG, VLLM) if (n, rt) not in have]
    assert not missing, missing
    for f in cf.FACTS:
        assert (f.runtime, f.draft) in cf.CLASSES and f.effect, f
        assert (f.part == cf.Part.NOT_READ) == (f.changes == ()), f
        assert (f.part == cf.Part.REFUSED) == (f.changes == ("raises",)), f


# -- 2. the doctor's model agrees ------------------------------------------------------------------
def _loader(fact: cf.FieldFact):
    return resolve_loader(fact.runtime, cf.VERIFIED[fact.runtime], fact.draft)


@pytest.mark.parametrize("fact", [f for f in cf.FACTS if f.part != cf.Part.REFUSED],
                         ids=lambda f: f"{f.runtime}-{f.draft}-{f.field}")
def test_the_doctors_loader_model_agrees(fact):
    loader = _loader(fact)
    base, var = base_config(fact.draft), variant(fact)
    before, after = expected_params(base, loader), expected_params(var, loader)
    predicted = ({f"+{k}" for k in after if k not in before}
                 | {f"-{k}" for k in before if k not in after}
                 | {f"~{k}" for k in after if k in before and after[k] != before[k]})
    assert predicted == cf.param_changes(fact.changes)
    switches = set(fact.changes) - cf.param_changes(fact.changes)
    assert ("residual" in switches) == (bool(var.get("norm_before_residual"))
                                        and loader.norm_before_residual)
    if "norm_output" in fact.field:
        assert ("norm_output" in switches) == loader.norm_output
    assert ("lm_head_tied" in switches) == ties_lm_head(var, loader)
    assert ("use_aux" in switches) == (not uses_fc(var, loader))
    assert ("window" in switches) == honours_window(var, loader)
    if "lm_head_from_target" in switches:
        assert "lm_head.weight" in shared_from_target(var, loader)


# -- 1. the real classes ---------------------------------------------------------------------------
def _compare(cases: list[cf.FieldFact], results: list[dict], bases: dict) -> list[str]:
    wrong = []
    for fact, real in zip(cases, results):
        seen = cf.observed(bases[fact.draft], real)
        if seen != set(fact.changes):
            wrong.append(f"{fact.runtime} {fact.draft} {fact.field}: facts say "
                         f"{sorted(fact.changes)}, the real class {sorted(seen)} "
                         f"({real.get('build_error') or ''})")
    return wrong


def _payload(runtime: str) -> tuple[list[cf.FieldFact], list[dict], list[str]]:
    facts = [f for f in cf.FACTS if f.runtime == runtime]
    drafts = sorted({f.draft for f in facts})
    payload = [{"draft": d, "config": base_config(d)} for d in drafts]
    payload += [{"draft": f.draft, "config": variant(f)} for f in facts]
    return facts, payload, drafts


def _check(runtime: str, results: list[dict], facts, drafts) -> None:
    bases = dict(zip(drafts, results[:len(drafts)]))
    for d, b in bases.items():
        assert not b.get("build_error"), (d, b["build_error"])
    wrong = _compare(facts, results[len(drafts):], bases)
    assert not wrong, "\n".join(wrong)


@pytest.mark.sglang
def test_sglang_real_classes_do_what_the_facts_say(tmp_path):
    from harness.server import cpu_env
    facts, payload, drafts = _payload(SGLANG)
    (tmp_path / "cases.json").write_text(json.dumps(payload))
    env = cpu_env()
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env["PYTHONPATH"]])
    out = subprocess.run([sys.executable, "-m", "harness.sglang_draft_probe",
                          str(tmp_path / "cases.json")], capture_output=True, text=True,
                         env=env, cwd=str(ROOT), timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    _check(SGLANG, json.loads(out.stdout), facts, drafts)


@pytest.mark.vllm
def test_vllm_real_classes_do_what_the_facts_say(tmp_path):
    from conftest import vllm_python_or_skip
    from harness.vllm_draft_probe import run_cases
    facts, payload, drafts = _payload(VLLM)
    _check(VLLM, run_cases(vllm_python_or_skip(), payload, tmp_path), facts, drafts)
