"""`spectrace doctor` beyond the weight keys, fast tier (no torch): the dtype each runtime
runs the draft in, the float16 overflow scan on hand-written safetensors bytes, the
target's quantization as each format writes it, and the tokenizer comparison.

The same checks on the generated drafts of every format (healthy: no error; planted
faults: their codes) are in tests/test_doctor_pairing_formats.py (torch tier)."""
from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import pytest

from spectrace.doctor.judge import dtypes, quantization, tokenizers
from spectrace.doctor.judge.dtypes import Overflow, RuntimeDtype, check_dtype, runtime_dtype
from spectrace.doctor.judge.tokenizers import TokenizerFacts, check_tokenizers
from spectrace.doctor.files import weight_scan
from spectrace.doctor.files.checkpoint_files import Checkpoint
from spectrace.doctor.check import resolve_dtype
from spectrace.doctor.errors import UnusableInput
from spectrace.doctor.files.safetensors_header import parse_header
from spectrace.doctor.judge.inputs import CheckpointView
from spectrace.findings import ERROR, INFO, WARNING


# -- which dtype the runtime runs the draft in ------------------------------------------------
@pytest.mark.parametrize("runtime,option,draft,target,weights,expected", [
    # SGLang: --dtype auto from the draft's own config; float32 or unstated -> float16
    ("sglang", "auto", {"torch_dtype": "bfloat16"}, {"torch_dtype": "float16"}, None, "bfloat16"),
    ("sglang", "auto", {"torch_dtype": "float32"}, {"torch_dtype": "bfloat16"}, None, "float16"),
    ("sglang", "auto", {}, {"dtype": "bfloat16"}, None, "float16"),
    ("sglang", "auto", {"dtype": "bfloat16", "torch_dtype": "float32"}, {}, None, "bfloat16"),
    ("sglang", "float32", {"torch_dtype": "bfloat16"}, {}, None, "float32"),
    # vLLM: the target's dtype (its config, else its weights; float32 -> bfloat16)
    ("vllm", "auto", {"torch_dtype": "bfloat16"}, {"torch_dtype": "float16"}, None, "float16"),
    ("vllm", "auto", {"torch_dtype": "float16"}, {"dtype": "bfloat16"}, None, "bfloat16"),
    ("vllm", "auto", {}, {}, "float16", "float16"),
    ("vllm", "auto", {}, {"torch_dtype": "float32"}, None, "bfloat16"),
    ("vllm", "auto", {}, {"text_config": {"torch_dtype": "float16"}}, None, "float16"),
    ("vllm", "float16", {"torch_dtype": "bfloat16"}, {"dtype": "bfloat16"}, None, "float16"),
])
def test_runtime_dtype(runtime, option, draft, target, weights, expected):
    got = runtime_dtype(runtime, option, draft, target, weights)
    assert got.dtype == expected, got.how


def test_speculators_dtype_read_from_either_level():
    assert dtypes.config_dtype({"transformer_layer_config": {"torch_dtype": "float16"}}) == \
        "float16"
    assert dtypes.config_dtype({"torch_dtype": "torch.bfloat16"}) == "bfloat16"


@pytest.mark.parametrize("value,expected", [(None, "auto"), ("half", "float16"),
                                            ("BFloat16", "bfloat16"), ("float", "float32")])
def test_dtype_option_names_of_the_runtimes(value, expected):
    assert resolve_dtype(value) == expected


def test_unknown_dtype_names_the_option_and_the_choices():
    with pytest.raises(UnusableInput) as e:
        resolve_dtype("fp8")
    msg = str(e.value)
    assert msg.startswith("--dtype 'fp8'") and "auto, half, float16, bfloat16, float, float32" \
        in msg


def test_dtype_findings_by_case():
    fp16 = RuntimeDtype("float16", "launched with --dtype float16")
    over = [Overflow("fc.weight", 3, 1e5)]
    (f,) = check_dtype("sglang", "0.5.23", "bfloat16", "bfloat16", fp16, over)
    assert (f.code, f.severity) == ("dtype.float16_overflow", ERROR)
    assert "`fc.weight`" in f.message and "100000" in f.message and "65504" in f.message
    (f,) = check_dtype("sglang", "0.5.23", "bfloat16", "bfloat16", fp16, [])
    assert (f.code, f.severity) == ("dtype.float16", WARNING)
    (f,) = check_dtype("vllm", "0.32.0", "float16", "float16",
                       RuntimeDtype("bfloat16", "x"), None)
    assert (f.code, f.severity) == ("dtype.cast", INFO)
    assert check_dtype("vllm", "0.32.0", "float16", "float16", fp16, None) == []
    assert check_dtype("sglang", "0.5.23", None, "bfloat16", RuntimeDtype("bfloat16", "x"),
                       None) == []


# -- the float16 overflow scan -------------------------------------------------------------------
def _bf16(values) -> bytes:
    return b"".join(struct.pack("<f", v)[2:] for v in values)


def _write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int], bytes]]) -> Path:
    header, offset = {}, 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset,
                                                                         offset + len(data)]}
        offset += len(data)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(d for _, _, d in
                                                                  tensors.values()))
    return path


def _checkpoint(path: Path) -> Checkpoint:
    h = parse_header(path)
    where = {k: (h, info) for k, info in h.tensors.items()}
    view = CheckpointView({}, {k: i.shape for k, i in h.tensors.items()},
                          {k: i.dtype for k, i in h.tensors.items()})
    return Checkpoint(path.parent, view, [str(path)], where)


def test_scan_finds_exactly_the_values_beyond_float16(tmp_path, monkeypatch):
    monkeypatch.setattr(weight_scan, "CHUNK", 64)  # many chunks: the boundaries are exercised
    healthy = [0.5, -3.0, 1e-3, 32768.0, -65280.0] * 40
    bad_bf16 = [0.1] * 100 + [70000.0, -1e6, float("inf")] + [0.2] * 100
    bad_f32 = [65504.0, -65504.0, 65505.0, float("nan"), 1.0] * 20
    f = _write_safetensors(tmp_path / "model.safetensors", {
        "ok.bf16": ("BF16", [len(healthy)], _bf16(healthy)),
        "ok.f32": ("F32", [len(healthy)], struct.pack(f"<{len(healthy)}f", *healthy)),
        "bad.bf16": ("BF16", [len(bad_bf16)], _bf16(bad_bf16)),
        "bad.f32": ("F32", [len(bad_f32)], struct.pack(f"<{len(bad_f32)}f", *bad_f32)),
        "bad.f64": ("F64", [2], struct.pack("<2d", 1.0, -7e4)),
        "f16.is.fine": ("F16", [2], b"\xff\x7b\xff\xfb"),   # +-65504
        "ids": ("I64", [2], struct.pack("<2q", 10**12, -(10**12))),
    })
    got = {o.key: o for o in weight_scan.float16_overflows(_checkpoint(f))}
    assert set(got) == {"bad.bf16", "bad.f32", "bad.f64"}
    assert got["bad.bf16"].count == 3 and got["bad.bf16"].largest == math.inf
    assert got["bad.f32"].count == 40 and got["bad.f32"].largest == math.inf  # 65505 and nan
    assert (got["bad.f64"].count, got["bad.f64"].largest) == (1, 7e4)


def test_scan_of_a_truncated_file_is_unusable_input(tmp_path):
    f = _write_safetensors(tmp_path / "model.safetensors",
                           {"w": ("BF16", [4], _bf16([1.0, 2.0, 3.0, 4.0]))})
    ck = _checkpoint(f)
    f.write_bytes(f.read_bytes()[:-4])
    with pytest.raises(UnusableInput, match="truncated while reading the weights"):
        weight_scan.float16_overflows(ck)


# -- the target's quantization -----------------------------------------------------------------
KIMI_K25_QUANT = {  # the shape of Kimi-K2.5's own config.json quantization_config
    "quant_method": "compressed-tensors", "format": "pack-quantized",
    "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": None,
                                  "weights": {"num_bits": 4, "type": "int", "group_size": 32,
                                              "symmetric": True, "strategy": "group"}}},
    "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|"
               "gate_up|down)_proj.*"]}


@pytest.mark.parametrize("cfg,hf_quant,method,bits,words", [
    ({"text_config": {"quantization_config": KIMI_K25_QUANT}}, None, "compressed-tensors", 4,
     ["int4 weights (group 32) on Linear", "4 modules left unquantized", "pack-quantized"]),
    ({"quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size":
                              [128, 128], "activation_scheme": "dynamic"}}, None, "fp8", 8,
     ["fp8 (e4m3) weights, blocks 128x128, dynamic activation scales"]),
    ({}, {"producer": {"name": "modelopt", "version": "0.47.0"},
          "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8",
                           "group_size": 16, "exclude_modules": ["lm_head"]}},
     "modelopt", 4, ["NVFP4, group 16, KV cache FP8", "hf_quant_config.json"]),
    ({"quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8"}}, None,
     "modelopt", 8, ["FP8"]),
    ({"compression_config": {"config_groups": {"g": {"weights": {"num_bits": 4,
                                                                 "type": "float",
                                                                 "group_size": 16}}},
                             "format": "nvfp4-pack-quantized"}}, None, "compressed-tensors",
     4, ["float4 weights (group 16)", "compression_config"]),
    ({"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}}, None,
     "awq", 4, ["awq, 4-bit weights, group 128"]),
])
def test_target_quantization_is_read_where_the_runtimes_read_it(cfg, hf_quant, method, bits,
                                                                 words):
    q = quantization.target_quantization(cfg, hf_quant)
    assert (q.method, q.bits) == (method, bits)
    text = f"{q.scheme} {q.where}"
    assert all(w in text for w in words), text
    (f,) = quantization.check_quantized_target(q, "SGLang 0.5.23")
    assert (f.code, f.severity) == ("target.quantized", INFO)
    assert "train (or fine-tune) the draft on hidden states generated by this quantized" \
        in f.message


def test_unquantized_target_has_no_finding():
    assert quantization.target_quantization({"torch_dtype": "bfloat16"}, None) is None
    assert quantization.check_quantized_target(None, "vLLM 0.32.0") == []


# -- tokenizers --------------------------------------------------------------------------------
def _facts(**kw) -> TokenizerFacts:
    return TokenizerFacts(**kw)


def test_same_tokenizer_and_ids_are_no_finding():
    same = dict(ids={"bos_token_id": 0, "eos_token_id": [1, 2]}, file_hash="h",
                vocab={"a": 0, "b": 1})
    assert check_tokenizers(_facts(**same), _facts(**same)) == []
    # an eos id the target lists among its eos ids says the same
    d = _facts(ids={"eos_token_id": 1})
    assert check_tokenizers(d, _facts(ids={"eos_token_id": [1, 2]})) == []
    # a side that does not say is not a difference
    assert check_tokenizers(_facts(), _facts(ids={"pad_token_id": 5}, file_hash="x")) == []


def test_other_vocabulary_is_an_error_naming_the_sizes():
    d = _facts(file_hash="a", vocab={"a": 0, "b": 1, "c": 2})
    t = _facts(file_hash="b", vocab={"a": 0, "c": 1, "b": 2, "d": 3})
    (f,) = check_tokenizers(d, t)
    assert (f.code, f.severity) == ("vocab.tokenizer_mismatch", ERROR)
    assert "(3 vs 4 tokens; 2 of the draft's tokens have another id" in f.message
    assert f.details["target_tokens_not_in_draft"] == 1


def test_same_vocabulary_other_file_is_a_warning_naming_the_sections():
    d = _facts(file_hash="a", vocab={"a": 0}, sections={"model": "1", "normalizer": "2"})
    t = _facts(file_hash="b", vocab={"a": 0}, sections={"model": "1", "normalizer": "3"})
    (f,) = check_tokenizers(d, t)
    assert (f.code, f.severity, f.details["sections"]) == ("vocab.tokenizer_mismatch", WARNING,
                                                           ["normalizer"])


def test_special_tokens_differ():
    d = _facts(ids={"eos_token_id": 2, "bos_token_id": 0}, tokens={"eos_token": "<|eot|>"})
    t = _facts(ids={"eos_token_id": 1, "bos_token_id": 0}, tokens={"eos_token": "</s>"})
    (f,) = check_tokenizers(d, t)
    assert (f.code, f.severity) == ("vocab.special_tokens_mismatch", WARNING)
    assert "config.json eos_token_id: draft 2, target 1" in f.message
    assert "tokenizer_config.json eos_token: draft '<|eot|>', target '</s>'" in f.message


def test_config_ids_alone_are_information():
    """Model Optimizer 0.47's export writes its template's bos 1 / eos 2 whatever the target."""
    (f,) = check_tokenizers(_facts(ids={"bos_token_id": 1, "eos_token_id": 2}),
                            _facts(ids={"bos_token_id": 0, "eos_token_id": 1}))
    assert (f.code, f.severity) == ("vocab.special_tokens_mismatch", INFO)
    assert "Neither runtime reads the draft's ids" in f.message


def test_special_ids_and_tokens_are_read_from_every_level():
    assert tokenizers.special_ids({"transformer_layer_config": {"eos_token_id": 7},
                                        "pad_token_id": None}) == {"eos_token_id": 7}
    assert tokenizers.special_tokens({"eos_token": {"content": "</s>"}, "pad_token": None}) \
        == {"eos_token": "</s>"}


# -- the corrected weights.missing_params words (shared with the run-time hook) ------------------
def test_missing_norms_are_not_called_noise_at_run_time_either():
    from spectrace.rules.weights import missing_params_finding
    f = missing_params_finding(["model.layers.1.hidden_norm.weight"], "SGLang 0.5.23's load")
    assert "whose weight starts at ones" in f.message and "proposes noise" not in f.message
    f = missing_params_finding(["model.layers.1.hidden_norm.weight",
                                "model.fc.weight"], "SGLang 0.5.23's load")
    assert "proposes noise" in f.message  # a linear layer is uninitialised
