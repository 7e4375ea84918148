"""`spectrace doctor` beyond the weight keys on every format's generated draft
(`harness.checkpoint_formats`) and a tiny target with a real tokenizer
(`harness.tiny_models`): healthy drafts get no error on either runtime, whatever
`--dtype`; planted faults get their codes (a weight beyond float16's range, a quantized
target, other special tokens, another vocabulary, `d2t` ids beyond the target vocabulary);
the two corrected messages say what the runtime really does."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import torch

from harness import checkpoint_formats as cf, tiny_models
from harness.tiny_models import DV, H, V
from spectrace.doctor import check_checkpoint
from spectrace.doctor.files.checkpoint_files import read_checkpoint, read_target
from spectrace.doctor.check import resolve_runtime
from spectrace.doctor.write_copy import fix_checkpoint
from spectrace.findings import ERROR

pytestmark = pytest.mark.torch
ROOT = Path(__file__).resolve().parents[1]
PAIRING_CODES = {"dtype.float16_overflow", "dtype.float16", "dtype.cast", "target.quantized",
                 "vocab.tokenizer_mismatch", "vocab.special_tokens_mismatch"}
SG, VL = "sglang==0.5.23", "vllm==0.33.0"
# the target each format's healthy draft is written for (EAGLE's default capture needs 8)
FORMAT_TARGET = {"specforge": 4, "speculators": 4, "modelopt": 4, "modelopt-0.41": 4,
                 "eagle": 8, "mla": None}


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    """Tiny Llama targets (4 and 8 layers) with tokenizer and bf16 weights, and the tiny
    DeepSeek-V3 one for the MLA draft: written once."""
    root = tmp_path_factory.mktemp("targets")
    out = {}
    for layers in (4, 8):
        d = root / f"llama{layers}"
        d.mkdir()
        tiny_models._save_tokenizer([str(d)])
        tiny_models.make_llama_target(str(d), "random", layers)
        out[layers] = d
    d = root / "dsv3"
    d.mkdir()
    tiny_models._save_tokenizer([str(d)])
    (d / "config.json").write_text(json.dumps(cf.tiny_mla.target_config()))
    out[None] = d
    return out


def write(tmp: Path, targets, fmt: str, fault=None) -> tuple[Path, Path]:
    """The format's healthy draft (with the target's tokenizer files), a fault planted in
    (cfg, sd), and a copy of its target's directory the test may change."""
    cfg, sd = cf.WRITERS[fmt]("random")
    if fault is not None:
        fault(cfg, sd)
    src = targets[FORMAT_TARGET[fmt]]
    tgt = tmp / "target"
    shutil.copytree(src, tgt)
    draft = cf.write_draft(str(tmp / "draft"), cfg, sd, tokenizer_from=str(src))
    return Path(draft), tgt


def fc_key(sd) -> str:
    return next(k for k in sd if k.endswith("fc.weight"))


def big_weight(cfg, sd):
    """One fc weight beyond float16's largest value (bfloat16 holds it)."""
    w = sd[fc_key(sd)].clone()
    w[0, 0] = 1e5
    sd[fc_key(sd)] = w


def codes(report, severity=None) -> set[str]:
    return {f.code for f in report.findings if severity is None or f.severity == severity}


# -- healthy: no error from these checks, on any format, runtime or --dtype --------------------
@pytest.mark.parametrize("fmt", cf.FORMATS)
def test_healthy_drafts_get_no_pairing_error(tmp_path, targets, fmt):
    draft, tgt = write(tmp_path, targets, fmt)
    for runtime in (SG, VL):
        for dtype in ("auto", "float16", "bfloat16"):
            report = check_checkpoint(draft, tgt, runtime, dtype=dtype)
            pairing = [f for f in report.findings if f.code in PAIRING_CODES]
            assert not [f for f in pairing if f.severity == ERROR], (runtime, dtype, pairing)
            # the same tokenizer, the same special tokens, an unquantized target
            assert not codes(report) & {"vocab.tokenizer_mismatch",
                                        "vocab.special_tokens_mismatch", "target.quantized"}
            if dtype == "float16":  # bfloat16 weights run in float16: said, not an error
                assert report.dtype["runtime"] == "float16" and report.dtype["weights_scanned"]
                assert "dtype.float16" in codes(report)


def test_healthy_draft_runs_in_its_own_dtype_on_sglang_and_the_targets_on_vllm(tmp_path,
                                                                               targets):
    def f32_config(cfg, sd):
        cfg["torch_dtype"] = "float32"
    draft, tgt = write(tmp_path, targets, "specforge", f32_config)
    sg = check_checkpoint(draft, tgt, SG)
    assert sg.dtype["runtime"] == "float16" and "float32 or unstated as float16" in \
        sg.dtype["how"]
    assert codes(sg, "warning") == {"dtype.float16"}
    vl = check_checkpoint(draft, tgt, VL)
    assert vl.dtype["runtime"] == "bfloat16"  # the target's config says bfloat16
    assert "dtype.float16" not in codes(vl)


# -- planted faults ----------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", cf.FORMATS)
def test_weight_beyond_float16_is_an_error_when_served_in_float16(tmp_path, targets, fmt):
    draft, tgt = write(tmp_path, targets, fmt, big_weight)
    report = check_checkpoint(draft, tgt, SG, dtype="float16")
    (f,) = [f for f in report.findings if f.code == "dtype.float16_overflow"]
    assert f.severity == ERROR and "|x| up to 99840" in f.message  # 1e5 in bfloat16
    assert list(f.details["tensors"]) == [fc_key(cf.WRITERS[fmt]("random")[1])]
    # in bfloat16 the same weight is fine
    assert "dtype.float16_overflow" not in codes(check_checkpoint(draft, tgt, SG,
                                                                  dtype="bfloat16"))


def test_float16_overflow_under_auto_on_both_runtimes(tmp_path, targets):
    """SGLang: the draft config's float32 means float16; vLLM: a float16 target."""
    def f32_and_big(cfg, sd):
        cfg["torch_dtype"] = "float32"
        big_weight(cfg, sd)
    draft, tgt = write(tmp_path, targets, "specforge", f32_and_big)
    assert "dtype.float16_overflow" in codes(check_checkpoint(draft, tgt, SG), ERROR)
    cfg = json.loads((tgt / "config.json").read_text())
    cfg["dtype"] = "float16"
    (tgt / "config.json").write_text(json.dumps(cfg))
    vl = check_checkpoint(draft, tgt, VL)
    assert vl.dtype["how"].startswith("vLLM runs the draft in the target's dtype, float16")
    assert "dtype.float16_overflow" in codes(vl, ERROR)


def test_quantized_target_is_information(tmp_path, targets):
    draft, tgt = write(tmp_path, targets, "specforge")
    cfg = json.loads((tgt / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3",
                                  "weight_block_size": [128, 128]}
    (tgt / "config.json").write_text(json.dumps(cfg))
    report = check_checkpoint(draft, tgt, SG)
    (f,) = [f for f in report.findings if f.code == "target.quantized"]
    assert f.severity == "info" and report.exit_status == 0
    assert report.target["quantization"]["method"] == "fp8"
    assert "train (or fine-tune) the draft on hidden states generated by this quantized " \
           "target" in f.message


def test_modelopt_nvfp4_target_from_hf_quant_config(tmp_path, targets):
    draft, tgt = write(tmp_path, targets, "modelopt")
    (tgt / "hf_quant_config.json").write_text(json.dumps(
        {"producer": {"name": "modelopt", "version": "0.47.0"},
         "quantization": {"quant_algo": "NVFP4", "group_size": 16}}))
    (f,) = [f for f in check_checkpoint(draft, tgt, VL).findings
            if f.code == "target.quantized"]
    assert "NVFP4, group 16" in f.message and "at 4 bits or fewer" in f.message


def test_special_token_mismatch(tmp_path, targets):
    def other_eos(cfg, sd):
        (cfg.get("transformer_layer_config") or cfg)["eos_token_id"] = 2
    draft, tgt = write(tmp_path, targets, "speculators", other_eos)
    tc = json.loads((draft / "tokenizer_config.json").read_text())
    tc["eos_token"] = "<unk>"
    (draft / "tokenizer_config.json").write_text(json.dumps(tc))
    for runtime in (SG, VL):
        (f,) = [f for f in check_checkpoint(draft, tgt, runtime).findings
                if f.code == "vocab.special_tokens_mismatch"]
        assert f.severity == "warning"
        assert "config.json eos_token_id: draft 2, target 1" in f.message
        assert "tokenizer_config.json eos_token: draft '<unk>', target '</s>'" in f.message


def test_other_vocabulary_is_an_error(tmp_path, targets):
    draft, tgt = write(tmp_path, targets, "specforge")
    tj = json.loads((draft / "tokenizer.json").read_text())
    vocab = tj["model"]["vocab"]
    a, b = sorted(vocab, key=vocab.get)[10:12]
    vocab[a], vocab[b] = vocab[b], vocab[a]  # two tokens swap ids
    (draft / "tokenizer.json").write_text(json.dumps(tj))
    report = check_checkpoint(draft, tgt, SG)
    (f,) = [f for f in report.findings if f.code == "vocab.tokenizer_mismatch"]
    assert f.severity == ERROR and f.details["draft_tokens_with_other_id"] == 2
    assert report.exit_status == 1


@pytest.mark.parametrize("fmt", ["specforge", "speculators", "modelopt", "eagle", "mla"])
def test_d2t_beyond_the_target_vocabulary(tmp_path, targets, fmt):
    def beyond(cfg, sd):
        d2t = sd["d2t"].clone()
        d2t[-1] = V  # draft id DV-1 -> target id DV-1+V
        sd["d2t"] = d2t
    draft, tgt = write(tmp_path, targets, fmt, beyond)
    runtime = VL if fmt in ("speculators", "eagle") else SG
    (f,) = [f for f in check_checkpoint(draft, tgt, runtime).findings
            if f.code == "vocab.d2t_out_of_range"]
    assert f.severity == ERROR and f"{DV - 1 + V}" in f.message


# -- the corrected messages --------------------------------------------------------------------
def test_missing_upper_hidden_norm_is_not_called_noise(tmp_path, targets):
    """A two-layer Model Optimizer >= 0.43 draft (`layers.1.input_layernorm`) on SGLang,
    whose layer 1 normalises with `hidden_norm`: RMSNorm starts at ones; --fix renames."""
    def two_layers(cfg, sd):
        cfg["num_hidden_layers"] = 2
        for k in [k for k in sd if k.startswith("layers.0.") and "hidden_norm" not in k]:
            w = sd[k].clone()
            if k.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight")):
                w = w[:, :H].contiguous()
            sd[k.replace("layers.0.", "layers.1.")] = w
    draft, tgt = write(tmp_path, targets, "modelopt", two_layers)
    report = check_checkpoint(draft, tgt, SG)
    (f,) = [f for f in report.findings if f.code == "weights.missing_params"]
    assert "noise" not in f.message.replace("Not noise", "")
    assert "whose weight starts at ones" in f.message
    assert "`layers.1.input_layernorm.weight`" in f.message and "`--fix` renames" in f.message
    ck, tg = read_checkpoint(draft), read_target(tgt)
    result = fix_checkpoint(ck, tg, *resolve_runtime(SG), tmp_path / "fixed")
    assert result.written and result.check.exit_status == 0
    assert result.plan.renames == {"layers.1.input_layernorm.weight":
                                   "layers.1.hidden_norm.weight"}


# -- --fix and the CLI -------------------------------------------------------------------------
def test_fix_of_a_speculators_draft_keeps_its_dtype_for_sglang(tmp_path, targets):
    """SGLang resolves --dtype auto from the copy's config: without torch_dtype the copy
    would run in float16."""
    draft, tgt = write(tmp_path, targets, "speculators")
    ck, tg = read_checkpoint(draft), read_target(tgt)
    result = fix_checkpoint(ck, tg, *resolve_runtime(SG), tmp_path / "fixed")
    assert json.loads((tmp_path / "fixed" / "config.json").read_text())["torch_dtype"] == \
        "bfloat16"
    assert result.check.dtype["runtime"] == "bfloat16"
    assert "dtype.float16" not in codes(result.check)


def _cli(*args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "spectrace.doctor.cli", *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=120)


def test_cli_dtype_option_text_and_json(tmp_path, targets):
    draft, tgt = write(tmp_path, targets, "specforge", big_weight)
    text = _cli(draft, "--target", tgt, "--runtime", SG, "--dtype", "half")
    assert text.returncode == 1
    assert "  dtype: saved in bfloat16 (config: bfloat16), runs in float16: launched with " \
           "--dtype float16" in text.stdout
    assert "ERROR   dtype.float16_overflow: " in text.stdout
    out = _cli(draft, "--target", tgt, "--runtime", SG, "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["dtype"] == {"config": "bfloat16", "weights": "bfloat16", "runtime": "bfloat16",
                             "how": "SGLang resolves --dtype auto from the draft's own "
                                    "config.json, which says bfloat16",
                             "weights_scanned": False}
    assert data["target"]["quantization"] is None
    bad = _cli(draft, "--target", tgt, "--dtype", "int8")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip() == ("spectrace doctor: --dtype 'int8': expected one of auto, "
                                  "half, float16, bfloat16, float, float32 (the runtime's "
                                  "--dtype)")
