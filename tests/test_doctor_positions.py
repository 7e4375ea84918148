"""`spectrace doctor` on positions, RoPE, attention windows and missing aux layer ids
(doctor.judge.positions, checkpoint_aux `aux.layer_ids_default`), on drafts from the
project's format generator (`harness.checkpoint_formats`) with the trainers' settings
planted as each trainer writes them: speculators' default 2048-token sliding window, Model
Optimizer's exported YaRN scaling, a null id list after `speculators convert`. The same
checks on what the trainers' own code writes: tests/test_doctor_trainers.py."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness import checkpoint_formats as cf
from harness.tiny_models import H, V
from spectrace.doctor import check_checkpoint

pytestmark = pytest.mark.torch
ROOT = Path(__file__).resolve().parents[1]
TARGET = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": V,
          "hidden_size": H, "num_hidden_layers": 8, "intermediate_size": 2 * H,
          "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 2048,
          "rope_theta": 10000.0}
SG, SG8, VL = "sglang==0.5.23", "sglang==0.5.8", "vllm==0.33.0"


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("target") / "config.json"
    p.write_text(json.dumps(TARGET))
    return p


def write(tmp_path: Path, fmt: str, edit=None, name: str = "draft") -> Path:
    cfg, sd = cf.WRITERS[fmt]("random")
    if edit:
        edit(cfg)
    return Path(cf.write_draft(str(tmp_path / name), cfg, sd))


def codes(report) -> dict[str, str]:
    return {f.code: f.severity for f in report.findings}


def by_code(report, code):
    found = [f for f in report.findings if f.code == code]
    assert found, f"no {code} in {[(f.code, f.message) for f in report.findings]}"
    return found[0]


def windowed(cfg):  # speculators' default training config: every draft layer windowed
    cfg["transformer_layer_config"].update(sliding_window=2048, use_sliding_window=True,
                                           layer_types=["sliding_attention"],
                                           max_position_embeddings=4096)


def test_sliding_window_ignored_by_sglang_honoured_by_vllm(tmp_path, target):
    d = write(tmp_path, "speculators", windowed)
    long = check_checkpoint(d, target, SG, context_length=32768)
    f = by_code(long, "config.setting_ignored")
    assert f.severity == "warning" and f.details["setting"] == "sliding_window"
    assert "--speculative-draft-window-size 2048" in f.message and "32768" in f.message
    # a warning, not an error (SGLang reads this format only through --fix's translation)
    assert [e.code for e in long.errors] == ["config.unsupported"]
    # served within the window: the same setting, but nothing differs -> information
    short = by_code(check_checkpoint(d, target, SG, context_length=2048),
                    "config.setting_ignored")
    assert short.severity == "info"
    # SGLang 0.5.8 has no window argument: upgrade (or vLLM)
    old = by_code(check_checkpoint(d, target, SG8, context_length=32768),
                  "config.setting_ignored")
    assert "0.5.12 or later" in old.message
    # vLLM runs the window of every layer layer_types marks: no finding
    assert "config.setting_ignored" not in codes(check_checkpoint(d, target, VL,
                                                                  context_length=32768))


def test_window_without_layer_types_is_full_attention_on_vllm(tmp_path, target):
    def edit(cfg):
        windowed(cfg)
        del cfg["transformer_layer_config"]["layer_types"]
    f = by_code(check_checkpoint(write(tmp_path, "speculators", edit), target, VL,
                                 context_length=8192), "config.setting_ignored")
    assert f.severity == "warning" and "layer_types" in f.message


def yarn(cfg):  # Model Optimizer's export: its eagle_export_rope_scaling default
    cfg.update(rope_scaling={"rope_type": "yarn", "factor": 32.0,
                             "original_max_position_embeddings": 2048},
               max_position_embeddings=4096)


@pytest.mark.parametrize("runtime", [SG, VL])
def test_modelopt_yarn_is_information_within_its_reach(tmp_path, target, runtime):
    d = write(tmp_path, "modelopt", yarn)
    within = by_code(check_checkpoint(d, target, runtime), "positions.rope_changed")
    assert within.severity == "info" and "eagle_export_rope_scaling" in within.message
    assert within.details["differ"] == ["rope_type"]  # the kind says it: no key list
    extended = by_code(check_checkpoint(d, target, runtime, context_length=32768),
                       "positions.rope_changed")
    assert extended.severity == "info" and "65536" in extended.message
    beyond = check_checkpoint(d, target, runtime, context_length=131072)
    assert codes(beyond)["positions.rope_changed"] == "warning"
    assert "positions.rope_changed" not in {e.code for e in beyond.errors}


@pytest.mark.parametrize("runtime", [SG, VL])
def test_draft_positions_below_serving_context(tmp_path, target, runtime):
    d = write(tmp_path, "specforge", lambda c: c.update(max_position_embeddings=1024))
    r = check_checkpoint(d, target, runtime)           # served at the target's 2048
    f = by_code(r, "positions.beyond_draft")
    assert f.severity == "warning" and f.details["serving_context"] == 2048
    assert ("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" in f.message) == (runtime == SG)
    assert "positions.beyond_draft" not in codes(check_checkpoint(d, target, runtime,
                                                                  context_length=1024))


def test_null_ids_after_speculators_convert_name_the_default(tmp_path, target):
    d = write(tmp_path, "speculators",
              lambda c: c.update(eagle_aux_hidden_state_layer_ids=None))
    for runtime in (SG, VL):
        f = by_code(check_checkpoint(d, target, runtime), "aux.layer_ids_default")
        assert f.severity == "warning"
        assert f.details["default_ids"] == [2, 4, 5]   # [2, n // 2, n - 3] for 8 layers
        assert "is null or absent" in f.message and "lost" in f.message


def test_no_ids_is_information_where_the_format_leaves_them_out(tmp_path, target):
    def edit(cfg):
        del cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
    f = by_code(check_checkpoint(write(tmp_path, "specforge", edit), target, SG),
                "aux.layer_ids_default")
    assert f.severity == "info" and f.details["default_ids"] == [2, 4, 5]


def test_healthy_drafts_have_no_position_findings(tmp_path, target):
    for fmt in ("specforge", "speculators", "modelopt"):
        d = write(tmp_path, fmt, name=fmt)
        for runtime in (SG, VL):
            got = codes(check_checkpoint(d, target, runtime))
            assert not {"positions.beyond_draft", "positions.rope_changed",
                        "aux.layer_ids_default"} & set(got), (fmt, runtime, got)


def test_cli_context_length_and_fix_says_what_it_left(tmp_path, target):
    d = write(tmp_path, "speculators", windowed)
    out = tmp_path / "fixed"
    run = subprocess.run([sys.executable, "-m", "spectrace.doctor.cli", str(d), "--target",
                          str(target), "--runtime", SG, "--context-length", "32768", "--fix",
                          str(out)], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "WARNING config.setting_ignored: `sliding_window`" in run.stdout
    assert "not changed in the copy" in run.stdout and "config.setting_ignored" in \
        run.stdout.rsplit("--fix:", 1)[1]
    bad = subprocess.run([sys.executable, "-m", "spectrace.doctor.cli", str(d), "--target",
                          str(target), "--context-length", "0"], capture_output=True,
                         text=True, cwd=ROOT)
    assert bad.returncode == 2 and "--context-length" in bad.stderr


# RoPE in the old spelling (`rope_scaling` beside `rope_theta`; Qwen's documented YaRN block
# names its type `type`) and in transformers 5's (`rope_parameters`), which the real
# LlamaConfig writes from the old one: the same RoPE, never reported as a difference.
OLD_ROPE = {"rope_theta": 1000000.0, "rope_scaling": {
    "type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024}}


def new_spelling(old: dict) -> dict:
    """The RoPE fields as transformers 5's own LlamaConfig writes them from `old`."""
    transformers = pytest.importorskip("transformers")
    written = transformers.LlamaConfig(**{k: v for k, v in TARGET.items()
                                          if k not in ("architectures", "model_type",
                                                       "rope_theta")},
                                       **json.loads(json.dumps(old))).to_dict()
    assert "rope_scaling" not in written and "rope_theta" not in written, written
    return {"rope_parameters": written["rope_parameters"]}


def respelled(cfg: dict, rope: dict) -> None:
    for k in ("rope_theta", "rope_scaling", "rope_parameters"):
        cfg.pop(k, None)
    cfg.update(rope)


@pytest.mark.parametrize("runtime", [SG, VL])
@pytest.mark.parametrize("target_spelling", ["rope_parameters", "rope_scaling"])
def test_rope_spelled_either_way_is_the_same_rope(tmp_path, runtime, target_spelling):
    new = new_spelling(OLD_ROPE)
    assert new["rope_parameters"]["rope_theta"] == 1000000.0
    draft_rope, target_rope = (OLD_ROPE, new) if target_spelling == "rope_parameters" else \
        (new, OLD_ROPE)
    t = tmp_path / "target.json"
    t.write_text(json.dumps({**{k: v for k, v in TARGET.items() if k != "rope_theta"},
                             **target_rope}))
    d = write(tmp_path, "specforge", lambda c: respelled(c, draft_rope))
    r = check_checkpoint(d, t, runtime)
    assert "positions.rope_changed" not in codes(r), [f.message for f in r.findings]


@pytest.mark.parametrize("target_spelling", ["rope_parameters", "rope_scaling"])
def test_a_real_rope_difference_is_still_found_and_printed(tmp_path, target_spelling):
    new = new_spelling({**OLD_ROPE, "rope_scaling": {**OLD_ROPE["rope_scaling"],
                                                     "beta_fast": 16.0}})
    draft_rope, target_rope = (OLD_ROPE, new) if target_spelling == "rope_parameters" else \
        (new, OLD_ROPE)
    t = tmp_path / "target.json"
    t.write_text(json.dumps({**{k: v for k, v in TARGET.items() if k != "rope_theta"},
                             **target_rope}))
    d = write(tmp_path, "specforge", lambda c: respelled(c, draft_rope))
    f = by_code(check_checkpoint(d, t, SG), "positions.rope_changed")
    assert f.details["differ"] == ["beta_fast"]
    assert f.details["draft_rope"] != f.details["target_rope"]
    assert "beta_fast 16" in f.details["draft_rope" if draft_rope is new else "target_rope"]
    assert "no beta_fast" in f.message
    # the base alone, 1000000 against 1000001 (which `:g` printed alike)
    t.write_text(json.dumps({**TARGET, "rope_theta": 1000001.0}))
    d2 = write(tmp_path, "specforge", lambda c: respelled(c, new_spelling({
        "rope_theta": 1000000.0})), name="theta")
    f = by_code(check_checkpoint(d2, t, VL), "positions.rope_changed")
    assert f.details["differ"] == ["rope_theta"]
    assert "rope_theta 1000000)" in f.message and "rope_theta 1000001)" in f.message
