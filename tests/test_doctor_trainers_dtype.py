"""`spectrace doctor`'s dtype, quantized-target and tokenizer checks on drafts written by
the trainers' own code (`harness.trainer_drafts`, run in the trainers' environment:
`SPECTRACE_TRAINERS_PYTHON`, scripts/setup-env-trainers.sh): each healthy draft gets no
error from these checks on either runtime, in any --dtype; planted faults in the trainers'
files get their codes (a weight beyond float16's range, a quantized target, other special
tokens, `d2t` ids beyond the target vocabulary)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.trainers
ROOT = Path(__file__).resolve().parents[1]
DRAFTS = ("speculators", "specforge", "specforge-converted", "modelopt-1", "modelopt-2")
PAIRING_CODES = {"dtype.float16_overflow", "dtype.float16", "dtype.cast", "target.quantized",
                 "vocab.tokenizer_mismatch", "vocab.special_tokens_mismatch"}
SG, VL = "sglang==0.5.23", "vllm==0.33.0"


@pytest.fixture(scope="module")
def written(trainer_drafts) -> dict[str, Path]:
    return trainer_drafts


def copy_of(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def rewrite_tensor(d: Path, pick, change) -> str:
    """Load the draft's safetensors file, change the first tensor `pick` selects, save."""
    from safetensors.torch import load_file, save_file
    (f,) = sorted(d.glob("*.safetensors"))
    sd = load_file(f)
    key = next(k for k in sd if pick(k, sd[k]))
    sd[key] = change(sd[key].clone())
    save_file(sd, f, metadata={"format": "pt"})
    return key


def codes(report, severity=None) -> set[str]:
    return {f.code for f in report.findings if severity is None or f.severity == severity}


@pytest.mark.parametrize("name", DRAFTS)
def test_trainer_drafts_get_no_error_from_these_checks(written, name):
    from spectrace.doctor import check_checkpoint
    for runtime in (SG, VL):
        for dtype in ("auto", "float16", "bfloat16"):
            r = check_checkpoint(written[name], written["target"], runtime, dtype=dtype)
            bad = [f.to_dict() for f in r.findings if f.code in PAIRING_CODES
                   and f.severity == "error"]
            assert bad == [], (runtime, dtype, bad)
            assert r.dtype["weights"] in ("bfloat16", "float32", "float16"), r.dtype


@pytest.mark.parametrize("name", DRAFTS)
def test_float16_overflow_in_a_trainer_draft(written, tmp_path, name):
    from spectrace.doctor import check_checkpoint
    d = copy_of(written[name], tmp_path / name)

    def big(t):
        t[0, 0] = 1e5
        return t
    key = rewrite_tensor(d, lambda k, t: k.endswith("fc.weight"), big)
    r = check_checkpoint(d, written["target"], SG, dtype="float16")
    (f,) = [f for f in r.findings if f.code == "dtype.float16_overflow"]
    assert f.severity == "error" and list(f.details["tensors"]) == [key]
    assert "dtype.float16_overflow" not in codes(check_checkpoint(
        d, written["target"], VL, dtype="bfloat16"))


def test_quantized_target_for_trainer_drafts(written, tmp_path):
    from spectrace.doctor import check_checkpoint
    tgt = copy_of(written["target"], tmp_path / "target")
    cfg = json.loads((tgt / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "compressed-tensors", "config_groups": {
        "group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int",
                                                        "group_size": 32}}},
        "ignore": ["lm_head"], "format": "pack-quantized"}
    (tgt / "config.json").write_text(json.dumps(cfg))
    for name in DRAFTS:
        healthy = codes(check_checkpoint(written[name], written["target"], SG), "error")
        r = check_checkpoint(written[name], tgt, SG)
        (f,) = [f for f in r.findings if f.code == "target.quantized"]
        assert f.severity == "info" and "int4 weights (group 32)" in f.message
        assert codes(r, "error") == healthy  # information only


@pytest.mark.parametrize("name", DRAFTS)
def test_special_token_mismatch_in_a_trainer_draft(written, tmp_path, name):
    from spectrace.doctor import check_checkpoint
    d = copy_of(written[name], tmp_path / name)
    for f in written["target"].glob("tokenizer*"):
        shutil.copyfile(f, d / f.name)
    tc = json.loads((d / "tokenizer_config.json").read_text())
    tc["eos_token"] = "<unk>"
    (d / "tokenizer_config.json").write_text(json.dumps(tc))
    r = check_checkpoint(d, written["target"], VL)
    (f,) = [f for f in r.findings if f.code == "vocab.special_tokens_mismatch"]
    assert "eos_token: draft '<unk>', target '</s>'" in f.message


@pytest.mark.parametrize("name", DRAFTS)
def test_d2t_beyond_the_target_vocabulary_in_a_trainer_draft(written, tmp_path, name):
    from spectrace.doctor import check_checkpoint
    d = copy_of(written[name], tmp_path / name)
    vocab = json.loads((written["target"] / "config.json").read_text())["vocab_size"]

    def beyond(t):
        t[-1] = vocab
        return t
    rewrite_tensor(d, lambda k, t: k.endswith("d2t"), beyond)
    for runtime in (SG, VL):
        r = check_checkpoint(d, written["target"], runtime)
        assert "vocab.d2t_out_of_range" in codes(r, "error"), (runtime, codes(r))
