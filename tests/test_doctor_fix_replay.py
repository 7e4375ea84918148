"""A fix proven by replay (issue 47, "a fix that changes nothing"): a speculators draft
trained on four aux layers (vllm#54526, speculators#1065) fails to load in vLLM, which
builds its config from `transformer_layer_config` plus what `update_eagle3` copies and
sizes fc from `num_aux_hidden_states` or `eagle_config`'s ids there, never from the top
level. The doctor proposes only a place its replay of that config path reads
(`doctor/judge/fix_replay.py`), and `--fix` writes it there.

Checked three ways: the replay itself (pure); `update_eagle3` and the pass-through read from
every vLLM release's source (nothing imported); and vLLM's own config path and draft class
(the vLLM environment, tests/programs/vllm_draft_load.py) on the draft speculators' own
code writes (harness/trainer_drafts.py), on the doctor's `--fix` copy, and on the copy the
doctor used to propose (the count at the top level)."""
from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spectrace.doctor import check_checkpoint
from spectrace.doctor.judge import fix_replay, loaders
from spectrace.doctor.judge.formats import recognise
from tests import release_sources as rs

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = ROOT / "tests" / "programs" / "vllm_draft_load.py"
IDS = [1, 3, 5, 7]
LAYER_KEY = "transformer_layer_config.num_aux_hidden_states"
TARGET = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 512,
          "hidden_size": 128, "num_hidden_layers": 8, "intermediate_size": 256,
          "num_attention_heads": 4, "num_key_value_heads": 2,
          "max_position_embeddings": 2048, "rope_theta": 10000.0}


def speculators_4aux(layer: str = "llama") -> tuple[dict, dict]:
    """speculators' config (harness/checkpoint_formats.py) with four ids, and fc 4 wide;
    `layer` qwen3: a Qwen3 decoder layer (its q_norm / k_norm)."""
    from harness import checkpoint_formats as cf
    cfg, sd = cf.WRITERS["speculators"]("random")
    cfg["eagle_aux_hidden_state_layer_ids"] = list(IDS)
    fc = sd["fc.weight"]
    sd["fc.weight"] = fc.new_zeros(fc.shape[0], fc.shape[1] // 3 * 4)
    if layer == "qwen3":
        cfg["transformer_layer_config"]["model_type"] = "qwen3"
        for k in ("q_norm", "k_norm"):
            sd[f"layers.0.self_attn.{k}.weight"] = fc.new_ones(32)
    return cfg, sd


def shapes(sd: dict) -> dict:
    return {k: tuple(v.shape) for k, v in sd.items()}


def doctor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spectrace.doctor.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("target") / "config.json"
    p.write_text(json.dumps(TARGET))
    return p


# -- the replay ------------------------------------------------------------------------------
@pytest.mark.torch
@pytest.mark.parametrize("version", ["0.22.0", "0.26.0", "0.33.0"])
def test_the_replay_rejects_the_top_level_of_a_speculators_config(version):
    cfg, sd = speculators_4aux()
    proven, rejected = fix_replay.replay_aux_count(recognise(cfg, shapes(sd)), cfg, shapes(sd),
                                                   "vllm", version, 4)
    assert proven is not None and proven.key == LAYER_KEY and proven.value == 4
    assert rejected == proven.rejected == (
        f"`num_aux_hidden_states`: vLLM {version} builds fc for 3 aux layers, unchanged",)
    assert proven.replayed == f"vLLM {version} builds fc for 4 aux layers"
    assert "num_aux_hidden_states" not in cfg["transformer_layer_config"]  # a copy changed


@pytest.mark.torch
def test_no_place_is_proposed_where_the_loader_always_builds_three():
    cfg, sd = speculators_4aux()
    proven, rejected = fix_replay.replay_aux_count(recognise(cfg, shapes(sd)), cfg, shapes(sd),
                                                   "vllm", "0.20.0", 4)
    assert proven is None and len(rejected) == 2
    assert all("builds fc for 3 aux layers, unchanged" in r for r in rejected)


def test_with_value_copies_and_creates_the_way():
    cfg = {"a": 1, "t": {"x": 2}}
    assert fix_replay.with_value(cfg, ("t", "n"), 4) == {"a": 1, "t": {"x": 2, "n": 4}}
    assert fix_replay.with_value(cfg, ("e", "n"), 4)["e"] == {"n": 4}
    assert cfg == {"a": 1, "t": {"x": 2}}


# -- the doctor's answer and --fix -------------------------------------------------------------
@pytest.mark.torch
def test_the_doctor_names_the_key_vllm_reads_and_fix_writes_it(tmp_path, target):
    from harness import checkpoint_formats as cf
    d = Path(cf.write_draft(str(tmp_path / "spec4"), *speculators_4aux()))
    [f] = [f for f in check_checkpoint(d, target, "vllm==0.33.0").errors]
    assert f.code == "fc.width_mismatch"
    assert f.details["fix"]["set"] == {LAYER_KEY: 4}
    assert f"set `{LAYER_KEY}` = 4 in config.json (replayed on a copy" in f.message
    assert "not elsewhere: `num_aux_hidden_states`" in f.message
    run = doctor(d, "--target", target, "--runtime", "vllm==0.33.0", "--fix", tmp_path / "out")
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{LAYER_KEY}: 4 (replayed on a copy: vLLM 0.33.0 builds fc for 4" in run.stdout
    assert "the copy checked again for vLLM 0.33.0: no problems found" in run.stdout
    new = json.loads((tmp_path / "out" / "config.json").read_text())
    old = json.loads((d / "config.json").read_text())
    assert new["transformer_layer_config"] == {**old["transformer_layer_config"],
                                               "num_aux_hidden_states": 4}
    assert {k: v for k, v in new.items() if k != "transformer_layer_config"} == \
        {k: v for k, v in old.items() if k != "transformer_layer_config"}


@pytest.mark.torch
def test_a_config_the_runtime_reads_at_the_top_gets_the_top_level(tmp_path, target):
    """A SpecForge draft with 4 ids whose num_aux_hidden_states says 3: SGLang reads the top
    level, so that is where the replay proves the count and nothing is rejected."""
    from harness import checkpoint_formats as cf
    cfg, sd = cf.WRITERS["specforge"]("random")
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [0, 2, 4, 6]
    cfg["num_aux_hidden_states"] = 3
    fc = sd["fc.weight"]
    sd["fc.weight"] = fc.new_zeros(fc.shape[0], fc.shape[1] // 3 * 4)
    d = Path(cf.write_draft(str(tmp_path / "sf4"), cfg, sd))
    f = [f for f in check_checkpoint(d, target, "sglang==0.5.23").errors
         if f.code == "fc.width_mismatch"]
    assert [x.details["fix"] for x in f] == [{
        "set": {"num_aux_hidden_states": 4}, "rejected": [],
        "replayed": "SGLang 0.5.23 builds fc for 4 aux layers"}]


@pytest.mark.torch
@pytest.mark.parametrize("version", ["0.26.0", "0.33.0"])
def test_vllms_qwen3_draft_counts_the_top_level_ids(tmp_path, target, version):
    """vLLM's Eagle3Qwen3ForCausalLM sizes fc from the top-level ids update_eagle3 copies
    (checked against vLLM below): four ids, fc 4 wide, no error and nothing to fix."""
    from harness import checkpoint_formats as cf
    d = Path(cf.write_draft(str(tmp_path / "q4"), *speculators_4aux("qwen3")))
    r = check_checkpoint(d, target, f"vllm=={version}")
    loader = r.to_dict()["loader"]
    assert loader["draft"] == "qwen3" and loader["aux_count"] == "config+top"
    assert not r.errors, [f.message for f in r.errors]


@pytest.mark.torch
def test_fix_refuses_when_no_place_is_read(tmp_path, target):
    from harness import checkpoint_formats as cf
    d = Path(cf.write_draft(str(tmp_path / "spec4"), *speculators_4aux()))
    run = doctor(d, "--target", target, "--runtime", "vllm==0.20.0", "--fix", tmp_path / "out")
    assert run.returncode == 1 and "cannot fix: fc.width_mismatch" in run.stdout
    assert "always builds fc for 3 aux layers" in run.stdout
    assert not (tmp_path / "out").exists()


# -- vLLM's sources: what update_eagle3 copies, from where -----------------------------------------
ALGOS = "vllm/transformers_utils/configs/speculators/algos.py"
BASE = "vllm/transformers_utils/configs/speculators/base.py"


def copied_fields(src: str) -> set[str]:
    """The top-level keys of the speculators config.json `update_eagle3` reads
    (`config_dict.get("k")`, `config_dict["k"]`)."""
    fn = next(n for n in ast.walk(ast.parse(src))
              if isinstance(n, ast.FunctionDef) and n.name == "update_eagle3")
    out = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                n.func.attr == "get" and getattr(n.func.value, "id", "") == "config_dict":
            out.add(n.args[0].value)
        elif isinstance(n, ast.Subscript) and getattr(n.value, "id", "") == "config_dict":
            out.add(n.slice.value)
    return out


@pytest.mark.sources
@pytest.mark.parametrize("version", [v for v in rs.RELEASES["vllm"]
                                     if tuple(map(int, v.split("."))) >= (0, 13, 0)])
def test_vllm_builds_a_speculators_config_from_the_layer_config(version):
    """Every release read: the config starts as `transformer_layer_config`, `update_eagle3`
    copies no aux count from the top level (nor `eagle_config`), and every field the doctor's
    row says it passes on is one it copies."""
    base, algos = rs.source("vllm", version, BASE), rs.source("vllm", version, ALGOS)
    assert 'config_dict.get("transformer_layer_config", {})' in base
    copied = copied_fields(algos)
    assert "eagle_aux_hidden_state_layer_ids" in copied
    assert not copied & {"num_aux_hidden_states", "num_aux_layers", "eagle_config"}, copied
    row = loaders.resolve_loader("vllm", version)
    assert set(row.speculators_fields) <= copied, (version, row.speculators_fields, copied)


# -- vLLM's own config path and draft class (the vLLM environment) ------------------------------
def vllm_load(python: str, target: Path, *drafts: Path) -> dict:
    run = subprocess.run([python, str(PROGRAM), str(target), *map(str, drafts)],
                         capture_output=True, text=True, timeout=600, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"})
    lines = [ln for ln in run.stdout.splitlines() if ln.startswith("RESULT ")]
    assert run.returncode == 0 and lines, run.stdout[-2000:] + run.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.mark.vllm
@pytest.mark.trainers
def test_vllm_refuses_speculators_draft_and_loads_the_fix_copy(trainer_drafts, tmp_path):
    from tests.conftest import vllm_python_or_skip
    python = vllm_python_or_skip()
    version = subprocess.run([python, "-c", "import vllm; print(vllm.__version__)"],
                             capture_output=True, text=True, check=True
                             ).stdout.strip().splitlines()[-1].split("+")[0]
    draft, target = trainer_drafts["speculators-4aux"], trainer_drafts["target"]
    spec = json.loads((draft / "config.json").read_text())
    assert spec["eagle_aux_hidden_state_layer_ids"] == IDS  # speculators' own writing
    rt = f"vllm=={version}"
    [f] = [f for f in check_checkpoint(draft, target, rt).errors]
    assert f.code == "fc.width_mismatch" and f.details["fix"]["set"] == {LAYER_KEY: 4}
    fixed = tmp_path / "fixed"
    run = doctor(draft, "--target", target, "--runtime", rt, "--fix", fixed)
    assert run.returncode == 0 and "replayed on a copy" in run.stdout, run.stdout
    top = tmp_path / "top-level"  # the fix the doctor used to propose
    shutil.copytree(draft, top)
    (top / "config.json").write_text(json.dumps({**spec, "num_aux_hidden_states": 4}))
    got = vllm_load(python, target, draft, fixed, top)
    for d in (draft, fixed, top):
        assert got[str(d)]["config_class"] == "SpeculatorsConfig"
        assert got[str(d)]["aux_layer_ids"] == IDS  # the layers the target captures
    assert got[str(draft)]["num_aux_hidden_states"] == 3 and not got[str(draft)]["loaded"]
    assert "torch.Size([128, 512])" in got[str(draft)]["error"]
    assert got[str(top)] == got[str(draft)]  # vLLM never reads it there
    assert got[str(fixed)]["num_aux_hidden_states"] == 4 and got[str(fixed)]["fc_in"] == 512
    assert got[str(fixed)]["loaded"] is True


@pytest.mark.vllm
@pytest.mark.torch
def test_vllms_qwen3_draft_loads_four_top_level_ids(tmp_path):
    """The other side of the Qwen3 row: vLLM's own Eagle3Qwen3ForCausalLM builds fc for the
    four top-level ids of a speculators config and loads it, as the doctor says."""
    from harness import checkpoint_formats as cf
    from tests.conftest import vllm_python_or_skip
    python = vllm_python_or_skip()
    tdir = tmp_path / "qwen3-target"
    tdir.mkdir()
    (tdir / "config.json").write_text(json.dumps({
        **TARGET, "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
        "head_dim": 32}))
    d = Path(cf.write_draft(str(tmp_path / "q4"), *speculators_4aux("qwen3")))
    assert not check_checkpoint(d, tdir, "vllm==0.32.0").errors
    got = vllm_load(python, tdir, d)[str(d)]
    assert got["draft_class"] == "Eagle3Qwen3ForCausalLM" and got["aux_layer_ids"] == IDS
    assert got["num_aux_hidden_states"] == 4 and got["fc_in"] == 512 and got["loaded"] is True
