"""`spectrace doctor` on the EAGLE-3 drafts people publish (tests/published_drafts.py: each
config as its source publishes it, the key layout its trainer writes, the target's config):
at full size, header-only (safetensors whose tensor data is a sparse hole, except the
vocabulary maps the doctor reads; a `.bin` of zero-stride tensors for the EAGLE authors'
pickle), for SGLang 0.5.23 and vLLM 0.33.0. The errors are exactly those the runtime is
known to hit with that pair (no false alarm, no miss), and where `--fix` answers them its
copy is clean.

The doctor's time on these full-size shapes is printed by benchmarks/doctor_published.py
(not asserted here: a test must pass on a loaded machine)."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from spectrace.doctor.judge.fix_plan import plan_fix
from spectrace.doctor import check_checkpoint
from spectrace.doctor.files.checkpoint_files import read_checkpoint, read_target
from tests.published_drafts import MISREAD, PUBLISHED, TARGETS, V1_ONLY_MISREAD, Published

pytestmark = pytest.mark.torch
DTYPES = {"F16": 2, "BF16": 2, "F32": 4, "I64": 8, "BOOL": 1}


def _dtype(cfg: dict) -> str:
    return {"float16": "F16", "bfloat16": "BF16", "float32": "F32"}[
        cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"]


def _llama_layer(cfg: dict, pre: str, dt: str) -> list[tuple]:
    h, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    kv, hd = cfg.get("num_key_value_heads") or heads, cfg.get("head_dim") or h // heads
    inter = cfg["intermediate_size"]
    return [(pre + "self_attn.q_proj.weight", (heads * hd, 2 * h), dt),
            (pre + "self_attn.k_proj.weight", (kv * hd, 2 * h), dt),
            (pre + "self_attn.v_proj.weight", (kv * hd, 2 * h), dt),
            (pre + "self_attn.o_proj.weight", (h, heads * hd), dt),
            (pre + "mlp.gate_proj.weight", (inter, h), dt),
            (pre + "mlp.up_proj.weight", (inter, h), dt),
            (pre + "mlp.down_proj.weight", (h, inter), dt)]


def _mla_layer(cfg: dict, pre: str, dt: str) -> list[tuple]:
    h, heads, inter = cfg["hidden_size"], cfg["num_attention_heads"], cfg["intermediate_size"]
    q, kv = cfg["q_lora_rank"], cfg["kv_lora_rank"]
    nope, rope, v = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    return [(pre + "self_attn.q_a_proj.weight", (q, 2 * h), dt),
            (pre + "self_attn.q_a_layernorm.weight", (q,), dt),
            (pre + "self_attn.q_b_proj.weight", (heads * (nope + rope), q), dt),
            (pre + "self_attn.kv_a_proj_with_mqa.weight", (kv + rope, 2 * h), dt),
            (pre + "self_attn.kv_a_layernorm.weight", (kv,), dt),
            (pre + "self_attn.kv_b_proj.weight", (heads * (nope + v), kv), dt),
            (pre + "self_attn.o_proj.weight", (h, heads * v), dt),
            (pre + "mlp.gate_proj.weight", (inter, h), dt),
            (pre + "mlp.up_proj.weight", (inter, h), dt),
            (pre + "mlp.down_proj.weight", (h, inter), dt)]


def layout(p: Published) -> list[tuple]:
    """(key, shape, dtype) as the draft's trainer writes them (tests/published_drafts.py
    names the code)."""
    cfg, dt = p.config, _dtype(p.config)
    h, vocab = cfg["hidden_size"], cfg["vocab_size"]
    dv = cfg.get("draft_vocab_size") or vocab
    mla = p.layout.endswith(("mla", "mla-no-head"))
    pre = "layers.0." if mla else "midlayer."
    keys = (_mla_layer if mla else _llama_layer)(cfg, pre, dt)
    keys += [(pre + n, (h,), dt) for n in ("hidden_norm.weight", "input_layernorm.weight",
                                             "post_attention_layernorm.weight")]
    keys += [("fc.weight", (h, 3 * h), dt), ("norm.weight", (h,), dt)]
    if p.layout != "modelopt-mla-no-head":
        keys.append(("lm_head.weight", (dv, h), dt))
    if p.layout == "torchspec-mla":
        keys.append(("embed_tokens.weight", (vocab, h), dt))
    if dv < vocab:
        keys += [("d2t", (dv,), "I64"), ("t2d", (vocab,), "BOOL")]
    return keys


def _maps(keys: list[tuple]) -> dict[str, bytes]:
    """The vocabulary maps' bytes: the draft's vocabulary is the target's first ids (d2t
    zeros, t2d marking them), as trainers store a pruned vocabulary."""
    dv = next((s[0] for k, s, _ in keys if k == "d2t"), 0)
    vocab = next((s[0] for k, s, _ in keys if k == "t2d"), 0)
    return {"d2t": bytes(8 * dv), "t2d": b"\x01" * dv + bytes(vocab - dv)} if dv else {}


def write_header_only(d: Path, keys: list[tuple]) -> None:
    """model.safetensors at full size: the header, the maps' bytes, and a sparse hole."""
    header, offset = {}, 0
    for k, shape, dt in keys:
        n = DTYPES[dt]
        for s in shape:
            n *= s
        header[k] = {"dtype": dt, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    raw += b" " * (-(8 + len(raw)) % 8)
    maps = _maps(keys)
    with open(d / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        start = f.tell()
        for k, data in maps.items():
            f.seek(start + header[k]["data_offsets"][0])
            f.write(data)
        f.truncate(start + offset)


def write_bin(d: Path, keys: list[tuple]) -> None:
    """pytorch_model.bin by torch.save of a state dict: zero-stride views of one element
    (full shapes, a few bytes each), the maps as real tensors."""
    import torch
    dtypes = {"F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32,
              "I64": torch.int64, "BOOL": torch.bool}
    maps = _maps(keys)
    sd = {}
    for k, shape, dt in keys:
        if k in maps:
            sd[k] = torch.frombuffer(bytearray(maps[k]), dtype=dtypes[dt]).clone()
        else:
            sd[k] = torch.zeros((), dtype=dtypes[dt]).expand(shape)
    torch.save(sd, d / "pytorch_model.bin")


def write(tmp: Path, p: Published) -> tuple[Path, Path]:
    draft, target = tmp / "draft", tmp / "target"
    draft.mkdir()
    target.mkdir()
    (draft / "config.json").write_text(json.dumps(p.config))
    (target / "config.json").write_text(json.dumps(TARGETS[p.target]))
    (write_bin if p.weights == "bin" else write_header_only)(draft, layout(p))
    return draft, target


CASES = [pytest.param(p, rt, id=f"{i}-{rt}") for i, p in enumerate(PUBLISHED) for rt in p.errors]


@pytest.mark.parametrize("p,runtime", CASES)
def test_published_draft_gets_exactly_the_known_errors(tmp_path, p, runtime):
    draft, target = write(tmp_path, p)
    report = check_checkpoint(draft, target, runtime)
    errors = {f.code for f in report.errors}
    assert errors == p.errors[runtime], (p.name, runtime, p.known,
                                         [f.message for f in report.errors])
    assert report.judgement.format.name  # recognised
    if errors:  # where --fix answers the errors, its copy is clean
        ck, tgt = read_checkpoint(draft), read_target(target)
        plan, _copy, after = plan_fix(ck.view, tgt[0], runtime.split("==")[0],
                                      runtime.split("==")[1])
        if not plan.refusals:
            assert after.errors == [], [f.message for f in after.errors]


def test_every_published_draft_has_a_source_and_both_runtimes():
    for p in PUBLISHED:
        assert p.sources and all(s for s in p.sources), p.name
        assert set(p.errors) == {"sglang==0.5.23", "vllm==0.33.0"}, p.name
        assert p.known, p.name


@pytest.mark.parametrize("p", [p for p in PUBLISHED if p.name in V1_ONLY_MISREAD],
                         ids=lambda p: p.name.split(" ")[1])
def test_a_misread_of_vllms_v1_runner_only_is_a_warning_naming_the_runners(tmp_path, p):
    """vLLM 0.33 runs these MoE targets on the V2 model runner by default, which captures
    its default layers, the ones these drafts were trained on: only the opt-in V1 runner
    misreads the eagle_config ids. vLLM 0.28 takes the V2 runner only for a target that is
    not MoE (or that it lists), so there the V1 runner is the default and it is an error."""
    draft, target = write(tmp_path, p)
    [f] = [f for f in check_checkpoint(draft, target, "vllm==0.33.0").findings
           if f.code == MISREAD]
    assert f.severity == "warning"
    assert f.details["misread_on"] == ["V1"] and f.details["default_runner"] == "V2"
    assert "This holds only on the V1 model runner" in f.message
    assert "VLLM_USE_V2_MODEL_RUNNER=0" in f.message
    [old] = [f for f in check_checkpoint(draft, target, "vllm==0.28.0").findings
             if f.code == MISREAD]
    assert old.severity == "error" and old.details["default_runner"] == "V1"
    assert "runs this target on the V1 model runner by default" in old.message


@pytest.mark.parametrize("p", [p for p in PUBLISHED if p.name in V1_ONLY_MISREAD],
                         ids=lambda p: p.name.split(" ")[1])
def test_judged_on_the_v1_runner_its_misread_is_an_error_and_fix_answers_it(tmp_path, p):
    """`--vllm-runner v1` (an operator serving with VLLM_USE_V2_MODEL_RUNNER=0): the V1
    runner's misreading is then an error, the message says the runner was chosen, and the
    copy `--fix` writes is clean on that runner; `v2` (the default here) changes nothing."""
    draft, target = write(tmp_path, p)
    [f] = [f for f in check_checkpoint(draft, target, "vllm==0.33.0",
                                       vllm_runner="v1").findings if f.code == MISREAD]
    assert f.severity == "error" and f.details["judged_runner"] == "V1"
    assert f.details["default_runner"] == "V2"
    assert "judged on the V1 model runner (--vllm-runner)" in f.message
    [same] = [f for f in check_checkpoint(draft, target, "vllm==0.33.0",
                                          vllm_runner="v2").findings if f.code == MISREAD]
    assert same.severity == "warning"
    ck, tgt = read_checkpoint(draft), read_target(target)
    plan, _copy, after = plan_fix(ck.view, tgt[0], "vllm", "0.33.0", "V1")
    assert not plan.refusals and after.errors == [], [f.message for f in after.errors]
    assert after.loader.runner == "V1"  # the copy is judged on the runner chosen


@pytest.mark.parametrize("p", PUBLISHED, ids=[str(i) for i in range(len(PUBLISHED))])
def test_on_vllms_v1_runner_the_errors_are_the_known_ones_and_its_misreads(tmp_path, p):
    """`--vllm-runner v1`: vLLM 0.33.0's known errors, plus the misreading of the drafts
    only that runner misreads (scripts/doctor_published_alarms.py counts both)."""
    draft, target = write(tmp_path, p)
    errors = {f.code for f in check_checkpoint(draft, target, "vllm==0.33.0",
                                               vllm_runner="v1").errors}
    assert errors == set(p.errors["vllm==0.33.0"]) | (
        {MISREAD} if p.name in V1_ONLY_MISREAD else set()), p.name


def test_the_docs_state_the_count_of_cases():
    """docs/doctor.md's figure (written by scripts/doctor_published_alarms.py) is the
    fixtures' count: every case asserted above, 0 false alarms."""
    doc = " ".join((Path(__file__).resolve().parents[1] / "docs" / "doctor.md").read_text()
                   .split())
    healthy = sum(not e for p in PUBLISHED for e in p.errors.values())
    assert (f"{len(PUBLISHED)} published drafts x 2 runtimes = {len(CASES)} cases: "
            f"{healthy} healthy pairs, errors on them 0") in doc
