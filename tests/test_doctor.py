"""`spectrace doctor` on checkpoints made by the project's tiny-model generator, each with
exactly one planted fault; bad inputs through the real CLI (subprocess)."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import torch
from safetensors.torch import save_file  # noqa: E402

from harness.tiny_models import DV, H, L, V, draft_config, draft_state_dict, make_tiny_models  # noqa: E402,E501
from spectrace.doctor.judge.draft_params import expected_params
from spectrace.doctor.judge.loaders import resolve_loader  # noqa: E402
from spectrace.runtimes import parse_version  # noqa: E402
from spectrace.doctor.judge.load_replay import simulate_load
from spectrace.doctor import UnusableInput, check_checkpoint  # noqa: E402
from spectrace.doctor.files.safetensors_header import parse_header, read_int_tensor  # noqa: E402
from spectrace.findings import ERROR, WARNING  # noqa: E402

pytestmark = pytest.mark.torch
ROOT = Path(__file__).resolve().parents[1]
TARGET = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": V,
          "hidden_size": H, "num_hidden_layers": L, "intermediate_size": 2 * H,
          "num_attention_heads": 4, "num_key_value_heads": 2}
NEWEST = "0.5.23"


@lru_cache(maxsize=None)
def _cached_sd(mode: str, layout: str) -> dict:
    return draft_state_dict(mode, layout)


def state_dict(mode: str = "random", layout: str = "midlayer") -> dict:
    return dict(_cached_sd(mode, layout))  # fresh dict; tensors are replaced, never mutated


def write_draft(d: Path, cfg: dict, sd: dict) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg))
    save_file({k: v.contiguous() for k, v in sd.items()}, str(d / "model.safetensors"))
    return d


def write_target(d: Path, cfg: dict | None = None) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg or TARGET))
    return d


def doctor(tmp_path: Path, cfg: dict | None = None, sd: dict | None = None,
           version: str | None = NEWEST, mode: str = "random", layout: str = "midlayer"):
    """The doctor's report, each finding checked against its declaration
    (`doctor.judge.codes`: a known code, at most its declared severity)."""
    from spectrace.doctor.judge.codes import undeclared
    draft = write_draft(tmp_path / "draft", cfg or draft_config(mode), sd or
                        state_dict(mode, layout))
    report = check_checkpoint(draft, write_target(tmp_path / "target"), version)
    assert undeclared(report.findings) == [], undeclared(report.findings)
    return report


def codes(report, severity: str | None = None) -> set[str]:
    return {f.code for f in report.findings if severity is None or f.severity == severity}


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "spectrace.doctor.cli", *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=60)


# -- healthy checkpoints --------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["random", "partial", "full"])
@pytest.mark.parametrize("version", ["0.5.5", "0.5.8", "0.5.12", "0.5.16", NEWEST, None])
def test_healthy_generator_checkpoints_have_no_findings(tmp_path, mode, version):
    report = doctor(tmp_path, mode=mode, version=version)
    assert report.findings == [], [f.to_dict() for f in report.findings]
    assert report.exit_status == 0


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """A full tiny target + draft pair written by harness.tiny_models (real target dir)."""
    return make_tiny_models(str(tmp_path_factory.mktemp("tiny")), "random")


def test_cli_on_generated_pair_json(generated):
    tgt, drf = generated
    r = cli(drf, "--target", tgt, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["findings"] == []
    assert out["target"]["vocab_size"] == V and out["target"]["num_hidden_layers"] == L
    assert out["runtime"] == "sglang" and out["version"] and out["format"]["name"] == "specforge"
    assert out["loader"]["decoder"] in ("midlayer", "layers")
    assert out["draft"]["weight_files"] == ["model.safetensors"]


def test_default_version_is_installed_sglang(tmp_path):
    from importlib.metadata import version
    report = doctor(tmp_path, version=None)
    assert (report.runtime, report.version) == ("sglang", version("sglang"))
    assert report.version_source == "installed"


# -- one planted fault per code -------------------------------------------------------------
def test_unused_key_alone_is_a_warning(tmp_path):
    sd = state_dict()
    sd["midlayer.self_attn.rotary_emb.inv_freq"] = torch.ones(16)  # an old HF buffer
    report = doctor(tmp_path, sd=sd)
    assert codes(report) == {"weights.unused_keys"}
    (f,) = report.findings
    assert f.severity == WARNING and f.details["keys"] == ["midlayer.self_attn.rotary_emb.inv_freq"]
    assert report.exit_status == 0


def test_renamed_key_is_unused_and_leaves_param_missing(tmp_path):
    sd = state_dict()
    sd["midlayer.post_attn_layernorm.weight"] = sd.pop("midlayer.post_attention_layernorm.weight")
    report = doctor(tmp_path, sd=sd)
    assert codes(report, ERROR) == codes(report) == {"weights.unused_keys",
                                                     "weights.missing_params"}
    missing = next(f for f in report.findings if f.code == "weights.missing_params")
    assert missing.details["params"] == ["model.layers.0.post_attention_layernorm.weight"]
    assert report.exit_status == 1


@pytest.mark.parametrize("version,dropped", [("0.5.5", True), ("0.5.8", True), ("0.5.11", True),
                                             ("0.5.12", False), ("0.5.16", False),
                                             (NEWEST, False)])
def test_layers0_checkpoint_depends_on_sglang_version(tmp_path, version, dropped):
    report = doctor(tmp_path, sd=state_dict("partial", "layers"), mode="partial",
                    version=version)
    if dropped:
        assert codes(report) == {"weights.unused_keys", "weights.missing_params"}
        unused = next(f for f in report.findings if f.code == "weights.unused_keys")
        assert unused.severity == ERROR and unused.details["count"] == 10
        assert all(k.startswith("layers.0.") for k in unused.details["keys"])
        assert "midlayer" in unused.message
    else:
        assert report.findings == []


def test_missing_param_names_the_missing_shard(tmp_path):
    sd = state_dict()
    del sd["midlayer.self_attn.k_proj.weight"]
    report = doctor(tmp_path, sd=sd, version="0.5.8")
    assert codes(report) == {"weights.missing_params"}
    (f,) = report.findings
    assert f.details["params"] == ["model.midlayer.self_attn.qkv_proj.weight[k_proj]"]
    assert f.details["expected_keys"] == ["midlayer.self_attn.k_proj.weight"]


def test_missing_embed_and_shared_lm_head_are_not_findings(tmp_path):
    cfg = draft_config("random")
    cfg["draft_vocab_size"] = None          # lm_head comes from the target
    sd = state_dict()
    del sd["lm_head.weight"]
    sd["d2t"] = torch.zeros(V, dtype=torch.int64)
    assert doctor(tmp_path, cfg=cfg, sd=sd).findings == []


# -- tie_word_embeddings: SGLang ties lm_head to the embedding, vLLM never reads the flag -----
def _tied(cfg_changes: dict | None = None) -> dict:
    cfg = draft_config("random")
    cfg.update(tie_word_embeddings=True, **(cfg_changes or {}))
    return cfg


@pytest.mark.parametrize("version", ["vllm==0.11.0", "vllm==0.22.0", "vllm==0.33.0"])
def test_tied_config_is_no_finding_on_vllm(tmp_path, version):
    """vLLM's Eagle3LlamaForCausalLM always builds ParallelLMHead(draft_vocab_size) and
    loads `lm_head.*` into it (issue 33: this was a false `weights.unused_keys` error)."""
    tied = doctor(tmp_path / "tied", cfg=_tied(), version=version)
    untied = doctor(tmp_path / "untied", version=version)
    assert [f.to_dict() for f in tied.findings] == [f.to_dict() for f in untied.findings]
    assert not codes(tied) & {"weights.unused_keys", "weights.missing_params"}


@pytest.mark.parametrize("version", ["0.5.5", "0.5.12", NEWEST])
def test_tied_config_drops_the_trained_head_on_sglang(tmp_path, version):
    report = doctor(tmp_path, cfg=_tied(), version=version)
    (f,) = report.findings
    assert (f.code, f.severity, f.details["keys"]) == ("weights.unused_keys", ERROR,
                                                       ["lm_head.weight"])
    assert f.details["cause"] == "tie_word_embeddings"
    assert "`tie_word_embeddings: true`" in f.message and \
        '"tie_word_embeddings": false' in f.message and "`--fix` does" in f.message
    assert "target's embedding matrix" in f.message and "does not build" not in f.message


def test_tied_config_fix_writes_the_flag_false(tmp_path):
    draft = write_draft(tmp_path / "draft", _tied(), state_dict())
    target = write_target(tmp_path / "target")
    r = cli(draft, "--target", target, "--runtime", "sglang==0.5.23", "--fix",
            tmp_path / "fixed", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    (change,) = out["fix"]["changes"]
    assert (change["kind"], change["addresses"]) == ("config", "weights.unused_keys")
    assert change["text"].startswith("tie_word_embeddings: true -> false")
    fixed = json.loads((tmp_path / "fixed" / "config.json").read_text())
    assert fixed["tie_word_embeddings"] is False and fixed["draft_vocab_size"] == DV
    assert out["fix"]["check"]["findings"] == []


def test_tied_config_without_draft_vocab_size_names_it_in_the_copy(tmp_path):
    """Untied but without draft_vocab_size SGLang would take lm_head from the target:
    the copy names the trained head's rows."""
    cfg = _tied({"draft_vocab_size": None, "vocab_size": V})
    sd = state_dict()
    sd["lm_head.weight"] = torch.zeros(V, H, dtype=torch.bfloat16)
    sd["d2t"] = torch.zeros(V, dtype=torch.int64)
    draft = write_draft(tmp_path / "draft", cfg, sd)
    r = cli(draft, "--target", write_target(tmp_path / "target"), "--runtime", "sglang",
            "--fix", tmp_path / "fixed", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    fixed = json.loads((tmp_path / "fixed" / "config.json").read_text())
    assert fixed["tie_word_embeddings"] is False and fixed["draft_vocab_size"] == V


def test_tied_config_without_a_head_is_no_finding(tmp_path):
    """A tied draft that carries no lm_head of its own: SGLang's tied head is the
    (target's) embedding, vLLM shares the target's head; nothing is dropped."""
    cfg = _tied({"draft_vocab_size": None})
    sd = state_dict()
    del sd["lm_head.weight"], sd["d2t"], sd["t2d"]  # the full vocabulary: no map
    for version in (NEWEST, "vllm==0.33.0"):
        assert not codes(doctor(tmp_path / version, cfg=cfg, sd=sd, version=version)) & {
            "weights.unused_keys", "weights.missing_params"}


def test_d2t_missing(tmp_path):
    sd = state_dict()
    del sd["d2t"]
    report = doctor(tmp_path, sd=sd)
    assert codes(report) == {"vocab.d2t_missing"}
    assert report.findings[0].details == {"draft_vocab_size": DV, "target_vocab_size": V}


def test_d2t_arange_instead_of_zeros_is_absolute(tmp_path):
    sd = state_dict()
    sd["d2t"] = torch.arange(DV, dtype=torch.int64)  # hot ids 2i: all in range, no duplicates
    report = doctor(tmp_path, sd=sd)
    assert codes(report) == {"vocab.d2t_absolute"}
    assert report.findings[0].details["looks_like_arange"] is True


def test_d2t_absolute_frequency_ordered_ids(tmp_path):
    sd = state_dict()
    ids = torch.randperm(V, generator=torch.Generator().manual_seed(3))[:DV]
    sd["d2t"] = ids.to(torch.int64)
    report = doctor(tmp_path, sd=sd)
    assert codes(report) == {"vocab.d2t_absolute"}


@pytest.mark.parametrize("index,value", [(DV - 1, V), (3, -10)])
def test_d2t_out_of_range(tmp_path, index, value):
    sd = state_dict()
    d2t = torch.zeros(DV, dtype=torch.int64)
    d2t[index] = value
    sd["d2t"] = d2t
    report = doctor(tmp_path, sd=sd)
    assert codes(report) == {"vocab.d2t_out_of_range"}
    (f,) = report.findings
    assert f.details["count"] == 1 and f.details["examples"][0]["draft_id"] == index


def test_d2t_duplicates(tmp_path):
    sd = state_dict()
    d2t = torch.zeros(DV, dtype=torch.int64)
    d2t[1] = -1  # draft 0 and draft 1 both -> target 0
    sd["d2t"] = d2t
    report = doctor(tmp_path, sd=sd)
    assert codes(report) == {"vocab.d2t_duplicates"}
    assert report.findings[0].details["examples"] == [{"target_id": 0, "times": 2}]


def test_d2t_int32_is_read(tmp_path):
    sd = state_dict()
    d2t = torch.zeros(DV, dtype=torch.int32)
    d2t[5] = 1000
    sd["d2t"] = d2t
    assert codes(doctor(tmp_path, sd=sd)) == {"vocab.d2t_out_of_range"}


def test_d2t_float_dtype(tmp_path):
    sd = state_dict()
    sd["d2t"] = torch.zeros(DV, dtype=torch.float32)
    assert codes(doctor(tmp_path, sd=sd)) == {"vocab.d2t_dtype"}


def test_fc_width_mismatch_wrong_target_hidden_size(tmp_path):
    cfg = draft_config("random")
    cfg["target_hidden_size"] = 64  # the target's is 128
    report = doctor(tmp_path, cfg=cfg)
    assert codes(report) == {"fc.width_mismatch"}
    assert report.findings[0].details["draft_hidden_in"] == 64


def test_fc_width_mismatch_not_whole_layers(tmp_path):
    sd = state_dict()
    sd["fc.weight"] = torch.zeros(H, 3 * H + 8, dtype=torch.bfloat16)
    report = doctor(tmp_path, sd=sd)
    assert codes(report) == {"fc.width_mismatch"}
    assert report.findings[0].details["fc_in"] == 3 * H + 8


@pytest.mark.parametrize("version,expected", [("0.5.8", {"fc.width_mismatch"}), (NEWEST, set())])
def test_two_aux_layers_need_sglang_0_5_12(tmp_path, version, expected):
    cfg = draft_config("random")
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [0, 1]
    sd = state_dict()
    sd["fc.weight"] = torch.zeros(H, 2 * H, dtype=torch.bfloat16)
    assert codes(doctor(tmp_path, cfg=cfg, sd=sd, version=version)) == expected


def test_aux_layer_ids_out_of_range(tmp_path):
    cfg = draft_config("random")
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [0, 1, L - 1]  # last valid: L-2
    report = doctor(tmp_path, cfg=cfg)
    assert codes(report) == {"aux.layer_ids_out_of_range"}
    assert report.findings[0].details["out_of_range"] == [L - 1]


@pytest.mark.parametrize("version", ["0.5.8", NEWEST])
def test_aux_count_mismatch(tmp_path, version):
    cfg = draft_config("random")
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [0, 1]  # fc takes 3 layers
    report = doctor(tmp_path, cfg=cfg, version=version)
    assert codes(report) == {"aux.count_mismatch"}
    (f,) = report.findings
    assert f.details["fc_layers"] == 3
    # 0.5.8 always builds fc for 3 layers: it loads and the draft pass gets 2 x H; 0.5.23
    # sizes fc from the 2 ids: loading the 3-layer fc.weight fails
    if version == NEWEST:
        assert f.details["fails"] == "load" and "shape mismatch" in f.message
        assert "the number of aux layer ids (2), i.e. 2 x 128 = 256 inputs" in f.message
    else:
        assert f.details["fails"] == "first target-fed draft pass"
        assert "so the draft loads, but the target sends 2 x 128" in f.message


@pytest.mark.parametrize("version,severity", [("0.5.5", WARNING), ("0.5.8", ERROR),
                                              (NEWEST, ERROR)])
def test_aux_capture_disabled_bypass_mode(tmp_path, version, severity):
    report = doctor(tmp_path, mode="bypass", version=version)  # the generator's own fault
    assert codes(report) == {"aux.capture_disabled"}
    assert report.findings[0].severity == severity


def test_shape_mismatch_lm_head_rows(tmp_path):
    sd = state_dict()
    sd["lm_head.weight"] = torch.zeros(DV - 56, H, dtype=torch.bfloat16)
    report = doctor(tmp_path, sd=sd)
    assert codes(report) == {"shape.mismatch"}
    (f,) = report.findings
    assert f.details["key"] == "lm_head.weight" and f.details["expected"] == [DV, H]


def test_shape_mismatch_d2t_length(tmp_path):
    sd = state_dict()
    sd["d2t"] = torch.zeros(DV - 1, dtype=torch.int64)
    report = doctor(tmp_path, sd=sd)
    assert codes(report) == {"shape.mismatch"}
    assert report.findings[0].details["expected"] == [DV]


def test_two_layer_draft(tmp_path):
    cfg = draft_config("random")
    cfg["num_hidden_layers"] = 2
    sd = state_dict()
    for k in [k for k in sd if k.startswith("midlayer.")]:
        v = sd[k]
        if k.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight")):
            v = v[:, :H]  # layers after the first take hidden_size inputs
        sd["layers.1." + k.removeprefix("midlayer.")] = v.clone()
    assert doctor(tmp_path / "new", cfg=cfg, sd=sd, version=NEWEST).findings == []
    old = doctor(tmp_path / "old", cfg=cfg, sd=sd, version="0.5.8")
    # 0.5.8 refuses a second layer, and its `layers.1.*` weights match nothing it builds:
    # weights of the draft network that would be dropped are errors
    assert codes(old, ERROR) == {"config.num_layers_unsupported", "weights.unused_keys"}
    unused = next(f for f in old.findings if f.code == "weights.unused_keys")
    assert all(k.startswith("layers.1.") for k in unused.details["network_keys"])


# -- loader model ---------------------------------------------------------------------------
def resolve_layout(version: str):
    return resolve_loader("sglang", version, "llama")


def test_layout_table():
    assert resolve_layout("0.5.8").decoder == "midlayer" and resolve_layout("0.5.8").assumed is None
    assert resolve_layout("0.5.11").decoder == "midlayer"
    assert resolve_layout("0.5.12").decoder == "layers"
    assert resolve_layout("0.5.14").assumed and resolve_layout("0.5.14").decoder == "layers"
    assert not resolve_layout("0.5.16").input_norm and resolve_layout("0.5.17").input_norm
    assert "newest" in resolve_layout("0.6.1").assumed
    assert "oldest" in resolve_layout("0.4.10").assumed
    assert parse_version("v0.5.12.post1") == (0, 5, 12)
    with pytest.raises(ValueError):
        parse_version("banana")


def test_config_driven_params():
    cfg = draft_config("random")
    cfg.update(fc_norm=True, num_aux_hidden_states=3)
    cfg["eagle_config"]["norm_before_fc"] = True
    new = expected_params(cfg, resolve_layout("0.5.23"))
    assert {f"model.fc_norm.{j}.weight" for j in range(3)} <= set(new)
    assert new["model.input_norm.weight"] == (3 * H,)
    assert "model.input_norm.weight" not in expected_params(cfg, resolve_layout("0.5.16"))
    old = expected_params(cfg, resolve_layout("0.5.8"))
    assert not any("fc_norm" in p for p in old) and "model.midlayer.hidden_norm.weight" in old
    keys = ["aux_norm_low.weight", "aux_norm_mid.weight", "aux_norm_high.weight"]
    unused, missing = simulate_load(keys, new, resolve_layout("0.5.23"))
    assert unused == [] and not any("fc_norm" in m for m in missing)
    assert simulate_load(keys, old, resolve_layout("0.5.8"))[0] == keys


# -- bad input: exit 2, one line, no traceback -----------------------------------------------
def _healthy(tmp_path: Path) -> tuple[Path, Path]:
    return (write_draft(tmp_path / "draft", draft_config("random"), state_dict()),
            write_target(tmp_path / "target"))


def _truncate(path: Path, keep: int) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:keep])


def _layer_config_of_another_speculators_type(d: Path, t: Path) -> tuple[Path, Path, str]:
    """speculators_model_type other than eagle3 and no speculators_config: not the
    speculators format, so the top level must hold the layer's fields, not
    transformer_layer_config."""
    cfg = draft_config("random")
    cfg.update(speculators_model_type="independent", transformer_layer_config=dict(cfg))
    del cfg["hidden_size"]
    (d / "config.json").write_text(json.dumps(cfg))
    return d, t, "`hidden_size` is None"


BAD_INPUTS = {
    "missing draft dir": lambda d, t: (d.parent / "nope", t, "does not exist"),
    "missing config": lambda d, t: ((d / "config.json").unlink(), d, t, "not found")[1:],
    "invalid draft json": lambda d, t: ((d / "config.json").write_text("{bad"), d, t,
                                        "not valid JSON")[1:],
    "invalid target json": lambda d, t: ((t / "config.json").write_text("[1,"), d, t,
                                         "not valid JSON")[1:],
    "missing target": lambda d, t: (d, t / "nope", "not found"),
    "truncated data": lambda d, t: (_truncate(d / "model.safetensors", -100), d, t,
                                    "truncated")[1:],
    "truncated header": lambda d, t: (_truncate(d / "model.safetensors", 40), d, t,
                                      "truncated")[1:],
    "tiny file": lambda d, t: ((d / "model.safetensors").write_bytes(b"\x01\x02"), d, t,
                               "truncated")[1:],
    "huge header length": lambda d, t: ((d / "model.safetensors").write_bytes(
        b"\xff" * 8 + b"{}"), d, t, "header length")[1:],
    "not eagle3": lambda d, t: ((d / "config.json").write_text(json.dumps(
        {**draft_config("random"), "architectures": ["Qwen2ForCausalLM"]})), d, t,
        "not an EAGLE-3 draft")[1:],
    "no weights": lambda d, t: ((d / "model.safetensors").unlink(), d, t, "no *.safetensors")[1:],
    "layer fields of another speculators type": _layer_config_of_another_speculators_type,
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_exits_2_with_one_line(tmp_path, case):
    draft, target = _healthy(tmp_path)
    d, t, needle = BAD_INPUTS[case](draft, target)
    r = cli(d, "--target", t)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spectrace doctor: ")
    assert needle in lines[0]


# -- pickled weights: pytorch_model.bin through PyTorch's restricted loader ------------------
def _bin_twin(tmp_path: Path, cfg: dict, sd: dict, name: str = "bin") -> Path:
    """The draft with its state dict written by torch.save as pytorch_model.bin."""
    d = tmp_path / name
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps(cfg))
    torch.save({k: v.contiguous() for k, v in sd.items()}, d / "pytorch_model.bin")
    return d


def _same_report(a, b) -> None:
    """Two reports that differ only in where the weights came from."""
    da, db = json.loads(json.dumps(a.to_dict())), json.loads(json.dumps(b.to_dict()))
    for d in (da, db):
        for k in ("path", "weight_files", "weights_read_with"):
            d["draft"].pop(k, None)
    assert da == db


def _absolute_d2t(cfg, sd):
    sd["d2t"] = torch.arange(DV, dtype=torch.int64)


def _overflow(cfg, sd):
    sd["fc.weight"] = sd["fc.weight"].clone()
    sd["fc.weight"][0, 0] = 1e5


BIN_CASES = {"healthy": None, "d2t-absolute": _absolute_d2t, "tied": lambda c, s: c.update(
    tie_word_embeddings=True), "layers0": lambda c, s: s.update(
    {k.replace("midlayer.", "layers.0."): s.pop(k) for k in list(s) if k.startswith("midlayer.")}),
    "float16-overflow": _overflow}


@pytest.mark.parametrize("case", sorted(BIN_CASES))
@pytest.mark.parametrize("runtime", ["sglang==0.5.8", NEWEST, "vllm==0.33.0"])
def test_bin_draft_is_judged_as_its_safetensors_twin(tmp_path, case, runtime):
    cfg, sd = draft_config("random"), state_dict()
    if BIN_CASES[case]:
        BIN_CASES[case](cfg, sd)
    twin = write_draft(tmp_path / "safetensors", cfg, sd)
    pickled = _bin_twin(tmp_path, cfg, sd)
    target = write_target(tmp_path / "target")
    dtype = "float16" if case == "float16-overflow" else None
    a = check_checkpoint(twin, target, runtime, dtype=dtype)
    b = check_checkpoint(pickled, target, runtime, dtype=dtype)
    _same_report(a, b)
    assert b.draft["weights_read_with"] == "torch.load(weights_only=True)"
    assert b.draft["weight_files"] == ["pytorch_model.bin"]
    if not runtime.startswith("vllm"):  # (on vLLM the generator's eagle_config ids are one)
        assert bool(a.findings) == (case != "healthy" and not (
            case == "layers0" and runtime != "sglang==0.5.8"))  # the planted fault


def test_bin_draft_cli_says_how_it_was_read_and_fix_writes_safetensors(tmp_path):
    cfg, sd = draft_config("random"), state_dict()
    _absolute_d2t(cfg, sd)
    pickled = _bin_twin(tmp_path, cfg, sd)
    twin = write_draft(tmp_path / "safetensors", cfg, sd)
    target = write_target(tmp_path / "target")
    r = cli(pickled, "--target", target)
    assert r.returncode == 1
    assert "pytorch_model.bin (pickled) read with PyTorch's restricted loader " \
           "torch.load(weights_only=True)" in r.stdout
    r = cli(pickled, "--target", target, "--fix", tmp_path / "fixed", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["fix"]["converted"] == {"pytorch_model.bin": "model.safetensors"}
    assert sorted(os.listdir(tmp_path / "fixed")) == ["config.json", "model.safetensors"]
    assert out["fix"]["check"]["findings"] == []
    r2 = cli(twin, "--target", target, "--fix", tmp_path / "fixed-twin", "--json")
    twin_fix = json.loads(r2.stdout)["fix"]
    assert twin_fix["changes"] == out["fix"]["changes"]
    from harness.checkpoint_formats import tensor_bytes
    assert tensor_bytes(tmp_path / "fixed") == tensor_bytes(tmp_path / "fixed-twin")
    text = cli(pickled, "--target", target, "--fix", tmp_path / "fixed-text").stdout
    assert "weights written as safetensors: pytorch_model.bin -> model.safetensors" in text


def test_sharded_bin_draft_with_index_is_read_and_fixed(tmp_path):
    cfg, sd = draft_config("random"), state_dict()
    _absolute_d2t(cfg, sd)
    d = tmp_path / "sharded"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    keys = sorted(sd)
    shards = {"pytorch_model-00001-of-00002.bin": keys[::2],
              "pytorch_model-00002-of-00002.bin": keys[1::2]}
    for name, ks in shards.items():
        torch.save({k: sd[k].contiguous() for k in ks}, d / name)
    (d / "pytorch_model.bin.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {k: n for n, ks in shards.items() for k in ks}}))
    (d / "training_args.bin").write_bytes(b"not weights: both runtimes skip this file")
    target = write_target(tmp_path / "target")
    _same_report(check_checkpoint(write_draft(tmp_path / "twin", cfg, sd), target, NEWEST),
                 check_checkpoint(d, target, NEWEST))
    r = cli(d, "--target", target, "--fix", tmp_path / "fixed", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    index = json.loads((tmp_path / "fixed" / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"].values()) == {"model-00001-of-00002.safetensors",
                                                 "model-00002-of-00002.safetensors"}
    assert not any(n.endswith(".bin") for n in os.listdir(tmp_path / "fixed"))


class _Payload:
    """Unpickling it would run a shell command (pickle calls what __reduce__ names)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("writer", ["torch.save", "pickle.dump"])
def test_bin_holding_other_objects_is_refused_and_never_run(tmp_path, writer):
    import pickle
    draft, target = _healthy(tmp_path)
    (draft / "model.safetensors").unlink()
    marker = tmp_path / "pwned"
    payload = {"fc.weight": torch.zeros(2, 2), "extra": _Payload(marker)}
    if writer == "torch.save":
        torch.save(payload, draft / "pytorch_model.bin")
    else:
        with open(draft / "pytorch_model.bin", "wb") as fh:
            pickle.dump(payload, fh)
    for args in ((), ("--fix", tmp_path / "fixed"), ("--json",)):
        r = cli(draft, "--target", target, *args)
        assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
        (line,) = r.stderr.strip().splitlines()
        assert "refused by PyTorch's restricted loader (torch.load(weights_only=True))" in line
        assert "Nothing in it was run" in line
        assert writer != "torch.save" or "GLOBAL posix.system" in line
    assert not marker.exists() and not (tmp_path / "fixed").exists()
    # the payload is live: an unrestricted load runs it
    subprocess.run([sys.executable, "-c", "import sys, torch; torch.load(sys.argv[1], "
                    "weights_only=False)", str(draft / "pytorch_model.bin")], timeout=60,
                   capture_output=True)
    assert marker.exists()


def test_bin_holding_a_training_state_is_refused(tmp_path):
    """SpecForge's training_state.pt shape: the weights wrapped in a dict with other
    fields (plain containers: the restricted loader reads it, the doctor refuses it)."""
    draft, target = _healthy(tmp_path)
    (draft / "model.safetensors").unlink()
    torch.save({"strategy": "eagle3", "draft_state_dict": state_dict()},
               draft / "pytorch_model.bin")
    r = cli(draft, "--target", target)
    assert r.returncode == 2
    assert "not a flat state dict: key 'strategy' holds a str" in r.stderr


def test_bin_without_torch_says_torch_is_needed(tmp_path):
    draft, target = _healthy(tmp_path)
    (draft / "model.safetensors").unlink()
    torch.save(state_dict(), draft / "pytorch_model.bin")
    code = ("import sys; sys.modules['torch'] = None; from spectrace.doctor.cli import main; "
            "sys.exit(main(sys.argv[1:]))")
    r = subprocess.run([sys.executable, "-c", code, str(draft), "--target", str(target)],
                       capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "torch is not installed" in r.stderr and "weights_only=True" in r.stderr


def test_other_pickles_only_are_refused(tmp_path):
    draft, target = _healthy(tmp_path)
    (draft / "model.safetensors").unlink()
    torch.save({"fc.weight": torch.zeros(2, 2)}, draft / "training_state.pt")
    r = cli(draft, "--target", target)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert "training_state.pt" in line and "a training state" in line


def test_bad_sglang_version_exits_2(tmp_path):
    draft, target = _healthy(tmp_path)
    r = cli(draft, "--target", target, "--sglang-version", "banana")
    assert r.returncode == 2 and "banana" in r.stderr and "Traceback" not in r.stderr


def test_cli_exit_1_and_json_findings(tmp_path):
    sd = state_dict()
    del sd["d2t"]
    draft = write_draft(tmp_path / "draft", draft_config("random"), sd)
    r = cli(draft, "--target", write_target(tmp_path / "target") / "config.json", "--json",
            "--sglang-version", "0.5.8")
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    assert [f["code"] for f in out["findings"]] == ["vocab.d2t_missing"]
    assert set(out["findings"][0]) == {"code", "severity", "message", "details"}
    assert out["version"] == "0.5.8" and out["loader"]["decoder"] == "midlayer"
    text = cli(draft, "--target", tmp_path / "target")
    assert text.returncode == 1 and "vocab.d2t_missing" in text.stdout


# -- the header parser ----------------------------------------------------------------------
def test_time_does_not_depend_on_weight_size(tmp_path):
    """A 4 GiB (sparse) tensor: only its header entry is read."""
    draft, target = _healthy(tmp_path)
    header = json.dumps({"extra.big": {"dtype": "F32", "shape": [1 << 30],
                                       "data_offsets": [0, 4 << 30]}}).encode()
    big = draft / "zz-big.safetensors"
    with open(big, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        f.truncate(8 + len(header) + (4 << 30))
    t0 = time.perf_counter()
    report = check_checkpoint(draft, target, NEWEST)
    assert time.perf_counter() - t0 < 2.0
    assert codes(report) == {"weights.unused_keys"}  # extra.big matches no parameter


def test_read_int_tensor_reads_only_d2t(tmp_path):
    d2t = torch.tensor([0, 5, -3, 2**40], dtype=torch.int64)
    save_file({"a": torch.ones(3), "d2t": d2t, "z": torch.arange(4, dtype=torch.int32)},
              str(tmp_path / "m.safetensors"))
    h = parse_header(tmp_path / "m.safetensors")
    assert h.tensors["d2t"].shape == (4,) and h.tensors["a"].dtype == "F32"
    assert read_int_tensor(h, "d2t") == d2t.tolist()
    assert read_int_tensor(h, "z") == [0, 1, 2, 3]
    with pytest.raises(UnusableInput):
        read_int_tensor(h, "a")


def _parse_bytes(path: Path, data: bytes):
    path.write_bytes(data)
    try:
        parse_header(path)
    except UnusableInput as e:
        assert "\n" not in str(e)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=256))
def test_random_bytes_only_raise_unusable_input(tmp_path, data):
    _parse_bytes(tmp_path / "r.safetensors", data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(header=st.dictionaries(st.text(max_size=10), json_values, max_size=4),
       slack=st.integers(-4, 4), tail=st.binary(max_size=64))
def test_random_json_headers_only_raise_unusable_input(tmp_path, header, slack, tail):
    raw = json.dumps(header).encode()
    _parse_bytes(tmp_path / "j.safetensors",
                 struct.pack("<Q", max(0, len(raw) + slack)) + raw + tail)


entries = st.fixed_dictionaries({
    "dtype": st.sampled_from(["F32", "BF16", "I64", "F4", "XX", 3]),
    "shape": st.lists(st.integers(-2, 2**40), max_size=3) | json_values,
    "data_offsets": st.lists(st.integers(-2, 2**42), min_size=0, max_size=3) | json_values})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(header=st.dictionaries(st.text(max_size=6), entries, max_size=3),
       data=st.binary(max_size=64))
def test_random_tensor_entries_only_raise_unusable_input(tmp_path, header, data):
    raw = json.dumps(header).encode()
    path = tmp_path / "e.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    try:
        h = parse_header(path)
    except UnusableInput:
        return
    for name, info in h.tensors.items():  # whatever parses must point inside the file
        assert 0 <= info.begin <= info.end <= len(data)
        if info.dtype == "I64":
            assert len(read_int_tensor(h, name)) * 8 == info.end - info.begin
