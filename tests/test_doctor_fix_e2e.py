"""`spectrace doctor --fix` output served by the real SGLang 0.5.23 CPU server.

Each case is a `partial` draft (exactly one accepted draft token per verify: acceptance
length 2.0) written in a format or with a fault SGLang mishandles without an error. The
doctor reports the fault, `--fix` writes a copy, the doctor finds the copy clean, every
tensor `--fix` did not mean to change is byte-identical, and SGLang serves the copy with
acceptance length exactly 2.0, from its own `meta_info` and from `spectrace report`.
Where the original can be served, it is, and does worse (or SGLang's own log shows the
keys it skipped); where it cannot (a speculators config, dropped decoder keys), the
original's failure is shown by SGLang's own classes in tests/test_doctor_loader_facts.py.

A copy that `--fix` should make identical to the healthy draft it was planted in (every
file the same: config.json as JSON, every tensor's dtype, shape and bytes) is checked to
be that, and the healthy draft is served once for all of them (`healthy_llama`,
`healthy_mla`): SGLang reads the same files the same way, so it serves such a copy exactly
as it serves the healthy draft. Copies in another form than any healthy draft (a
translated config, renamed layers, a bigger target) are served themselves.

One server at a time (the `sglang_server` fixture stops the previous one)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness import checkpoint_formats as cf
from tests.e2e import findings_but_cost, runtime_codes, settle

pytestmark = pytest.mark.sglang
ROOT = Path(__file__).resolve().parents[1]
FAST = {"SPECTRACE_METRIC_INTERVAL": "0.5"}
PROMPTS = ([3, 7, 11], [5, 9, 2])


def doctor(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spectrace.doctor.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def models_dir(tmp: Path, base: str, draft: Path) -> Path:
    """A folder the server reads: the base pair's target, and `draft`."""
    m = tmp / f"models-{draft.name}"
    m.mkdir()
    os.symlink(os.path.join(base, "target"), m / "target")
    os.symlink(draft, m / "draft")
    return m


def write_case(tmp: Path, base: str, fmt: str, fault=None, name: str | None = None) -> Path:
    cfg, sd = cf.WRITERS[fmt]("partial")
    if fault is not None:
        fault(cfg, sd)
    return Path(cf.write_draft(str(tmp / (name or fmt)), cfg, sd,
                               tokenizer_from=os.path.join(base, "draft")))


def fix(draft: Path, target: str, out: Path, codes: set[str],
        left: dict[str, str] | None = None) -> dict:
    """Run the doctor and --fix as a user would; check the report, the copy's re-check
    (nothing left but the `left` findings, code -> severity: what --fix does not change),
    and that every tensor not meant to change is byte-identical."""
    r = doctor(draft, "--target", target, "--fix", out, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads(r.stdout)
    assert {f["code"] for f in rep["findings"] if f["severity"] == "error"} == codes
    assert {f["code"]: f["severity"] for f in rep["fix"]["check"]["findings"]} == (left or {})
    before, after = cf.tensor_bytes(draft), cf.tensor_bytes(out)
    renames = rep["fix"]["renames"]
    for key, data in before.items():
        if key != rep["fix"]["d2t_rewritten"] and key not in rep["fix"]["dropped_keys"]:
            assert after[renames.get(key, key)] == data, key
    return rep


def serve(sglang_server, models: Path):
    """(SGLang's responses, spectrace's summary of the scheduler, the run)."""
    run = sglang_server(str(models), env=FAST)
    responses = [run.server.generate(p, 24) for p in PROMPTS]
    verify = sum(r["meta_info"]["spec_verify_ct"] for r in responses)
    proc = settle(run, verify)  # once the totals are exported
    return responses, proc, run


def assert_exact(responses: list[dict], proc: dict) -> None:
    """Acceptance length exactly 2.0 (SGLang's meta_info and spectrace report), and no
    run-time finding."""
    assert [r["meta_info"]["spec_accept_length"] for r in responses] == [2.0, 2.0]
    verify = sum(r["meta_info"]["spec_verify_ct"] for r in responses)
    assert proc["drafts"] == verify and proc["mean_acceptance_length"] == 2.0
    assert proc["accepted_per_position"] == [verify, 0, 0]
    assert findings_but_cost(proc) == []


def same_files(copy: Path, healthy: Path) -> None:
    """`copy` holds what `healthy` holds: the same file names, config.json the same JSON,
    every tensor the same dtype, shape and bytes, every other file the same bytes."""
    from spectrace.doctor.files.safetensors_header import parse_header
    names = sorted(p.name for p in copy.iterdir())
    assert names == sorted(p.name for p in healthy.iterdir()) and "config.json" in names
    for name in names:
        a, b = copy / name, healthy / name
        if name.endswith(".json"):
            assert json.loads(a.read_text()) == json.loads(b.read_text()), name
        elif name.endswith(".safetensors"):
            assert {k: (t.dtype, t.shape) for k, t in parse_header(a).tensors.items()} == \
                {k: (t.dtype, t.shape) for k, t in parse_header(b).tensors.items()}, name
        else:
            assert a.read_bytes() == b.read_bytes(), name
    assert cf.tensor_bytes(copy) == cf.tensor_bytes(healthy)


@pytest.fixture(scope="module")
def llama(tiny_models) -> str:
    return tiny_models("partial")


@pytest.fixture(scope="module")
def healthy_llama(llama, sglang_server, tmp_path_factory) -> Path:
    """The healthy SpecForge-format draft the llama cases plant their faults in, served
    once: exactly 2.0 and no finding."""
    tmp = tmp_path_factory.mktemp("healthy-llama")
    draft = write_case(tmp, llama, "specforge", name="healthy")
    assert_exact(*serve(sglang_server, models_dir(tmp, llama, draft))[:2])
    return draft


@pytest.fixture(scope="module")
def healthy_mla(tiny_models, sglang_server, tmp_path_factory) -> Path:
    """The healthy MLA (Kimi-K2.5 / DeepSeek) draft the MLA cases plant their faults in,
    served once: exactly 2.0 and no finding."""
    base = tiny_models("partial", pair="dsv3-mla")
    tmp = tmp_path_factory.mktemp("healthy-mla")
    draft = Path(base) / "draft"
    assert_exact(*serve(sglang_server, models_dir(tmp, base, draft))[:2])
    return draft


def test_d2t_absolute_ids_fixed(llama, healthy_llama, tmp_path):
    """The story's trap both ways: d2t written as absolute ids (arange) maps draft id i to
    target id 2i; the copy's offsets (zeros here, the leading-zero map that is right) are
    the healthy draft's, which serves exactly. (The original served: acceptance about 1.0
    and the run-time finding, tests/test_e2e_draft_signals.py::
    test_planted_vocab_map_faults[absolute-...].)"""
    def absolute(cfg, sd):
        sd["d2t"] = torch.arange(cf.DV, dtype=torch.int64)
    draft = write_case(tmp_path, llama, "specforge", absolute, "d2t-absolute")
    rep = fix(draft, f"{llama}/target", tmp_path / "fixed", {"vocab.d2t_absolute"})
    assert [c["kind"] for c in rep["fix"]["changes"]] == ["d2t"]
    same_files(tmp_path / "fixed", healthy_llama)


def test_capture_off_fixed(llama, healthy_llama, tmp_path):
    """The seed's fault (use_aux_hidden_state: false; tests/test_e2e_draft_signals.py
    serves it: acceptance < 1.2, fc bypass): the copy switches capture back on, and is the
    healthy draft, which serves exactly."""
    def off(cfg, sd):
        cfg["eagle_config"]["use_aux_hidden_state"] = False
    draft = write_case(tmp_path, llama, "specforge", off, "capture-off")
    rep = fix(draft, f"{llama}/target", tmp_path / "fixed", {"aux.capture_disabled"})
    assert [c["addresses"] for c in rep["fix"]["changes"]] == ["aux.capture_disabled"]
    same_files(tmp_path / "fixed", healthy_llama)


def test_speculators_format_fixed(llama, sglang_server, tmp_path):
    """A vllm-project/speculators draft: no SGLang reads its config (its own config reader
    refuses it: tests/test_doctor_loader_facts.py); the copy is in SGLang's form, with
    speculators' ids [1, 2, 3] (inputs of layers) as SGLang's [0, 1, 2]."""
    draft = write_case(tmp_path, llama, "speculators")
    rep = fix(draft, f"{llama}/target", tmp_path / "fixed", {"config.unsupported"})
    cfg = json.loads((tmp_path / "fixed" / "config.json").read_text())
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [0, 1, 2]
    assert rep["fix"]["renames"] == {}  # layers.0.* is what SGLang 0.5.23 reads
    assert_exact(*serve(sglang_server, models_dir(tmp_path, llama, tmp_path / "fixed"))[:2])


def test_modelopt_0_41_two_layer_draft_fixed(llama, sglang_server, tmp_path):
    """Model Optimizer 0.41 writes `midlayer.{i}.*` for a 2-layer draft: SGLang turns
    `midlayer` into `layers.0` and drops all 19 decoder keys (its own load_weights does, in
    tests/test_doctor_loader_facts.py). The copy names them `layers.{i}.*`, and layer 1's
    HF-style `input_layernorm` becomes the `hidden_norm` SGLang normalises with there."""
    draft = write_case(tmp_path, llama, "modelopt-0.41")
    rep = fix(draft, f"{llama}/target", tmp_path / "fixed",
              {"weights.unused_keys", "weights.missing_params"})
    unused = next(f for f in rep["findings"] if f["code"] == "weights.unused_keys")
    assert unused["details"]["count"] == 19
    assert rep["fix"]["renames"]["midlayer.1.input_layernorm.weight"] == \
        "layers.1.hidden_norm.weight"
    assert_exact(*serve(sglang_server, models_dir(tmp_path, llama, tmp_path / "fixed"))[:2])


def test_mla_layout_keys_fixed(tiny_models, healthy_mla, sglang_server, tmp_path):
    """The Kimi-K2.5 / DeepSeek MLA draft with HF-style `model.layers.0.*` keys: SGLang's
    loader maps them to `model.model.layers...`, logs 'skipping unexpected weight' for each
    and runs an uninitialised decoder layer; spectrace's load observer names both sides.
    The copy's `layers.0.*` are the healthy draft's, which serves exactly."""
    base = tiny_models("partial", pair="dsv3-mla")
    draft = tmp_path / "mla-prefixed"
    shutil.copytree(os.path.join(base, "draft"), draft)
    from safetensors.torch import load_file, save_file
    sd = load_file(draft / "model.safetensors")
    save_file({("model." + k if k.startswith("layers.") else k): v for k, v in sd.items()},
              str(draft / "model.safetensors"))
    rep = fix(draft, f"{base}/target", tmp_path / "fixed",
              {"weights.unused_keys", "weights.missing_params"})
    assert set(rep["fix"]["renames"].values()) == {k for k in sd if k.startswith("layers.")}
    responses, proc, run = serve(sglang_server, models_dir(tmp_path, base, draft))
    log = Path(run.log_path).read_text()
    warned = [k for k in sd if k.startswith("layers.") and "_a_proj" not in k]  # the fused
    # q_a / kv_a pair is skipped without a word
    assert log.count("Eagle3 MLA: skipping unexpected weight model.layers.0.") == len(warned)
    # the uninitialised layer holds whatever memory held: its acceptance came out 2.0, as
    # healthy, in CI and here, so only the load-time findings always tell; where that
    # memory held an inf or nan, the draft's hidden states are non-finite too (true, and
    # seen in one fresh-clone run)
    found = runtime_codes(proc)
    load = {"weights.missing_params", "weights.unused_keys"}
    assert load <= found <= load | {"draft.non_finite"}, found
    same_files(tmp_path / "fixed", healthy_mla)


def test_eagle_original_fixed(llama, sglang_server, tmp_path):
    """An EAGLE-authors draft (`LlamaForCausalLM`, no id list): SGLang would build it as a
    target model and load none of its keys. The copy is an `LlamaForCausalLMEagle3`; with
    no ids the 8-layer target captures its default layers (inputs of 2, 4, 5), the same
    layers EAGLE's trainer hard-codes: the copy's re-check says so (info). It also keeps
    the warning that EAGLE's config says float16 for weights saved here in bfloat16 (the
    serving dtype is the owner's choice, not --fix's)."""
    from harness.tiny_models import make_llama_target
    base = tmp_path / "pair8"
    (base / "target").mkdir(parents=True)
    make_llama_target(str(base / "target"), "partial", layers=8)
    for name in os.listdir(os.path.join(llama, "target")):
        if name.startswith(("tokenizer", "special_tokens")):
            shutil.copyfile(os.path.join(llama, "target", name), base / "target" / name)
    draft = write_case(tmp_path, llama, "eagle")
    rep = fix(draft, base / "target", tmp_path / "fixed", {"config.unsupported"},
              left={"aux.layer_ids_default": "info", "dtype.float16": "warning"})
    assert [c["text"] for c in rep["fix"]["changes"]] == [
        "architectures ['LlamaForCausalLM'] -> ['LlamaForCausalLMEagle3'] (the llama EAGLE-3 "
        "draft class SGLang registers)"]
    assert_exact(*serve(sglang_server, models_dir(tmp_path, str(base), tmp_path / "fixed"))[:2])


def test_mla_d2t_absolute_and_capture_off_fixed(tiny_models, healthy_mla, tmp_path):
    """The Kimi-K2.5 / DeepSeek MLA draft with two of the faults of issue 11 at once: d2t
    as absolute ids and aux capture off; the copy fixes both: it is the healthy draft,
    which serves exactly."""
    base = tiny_models("partial", pair="dsv3-mla")
    draft = tmp_path / "mla-faults"
    shutil.copytree(os.path.join(base, "draft"), draft)
    cfg = json.loads((draft / "config.json").read_text())
    cfg["eagle_config"]["use_aux_hidden_state"] = False
    (draft / "config.json").write_text(json.dumps(cfg))
    from safetensors.torch import load_file, save_file
    sd = load_file(draft / "model.safetensors")
    sd["d2t"] = torch.arange(cf.DV, dtype=torch.int64)
    save_file(sd, str(draft / "model.safetensors"))
    rep = fix(draft, f"{base}/target", tmp_path / "fixed",
              {"vocab.d2t_absolute", "aux.capture_disabled"})
    assert sorted(c["addresses"] for c in rep["fix"]["changes"]) == [
        "aux.capture_disabled", "vocab.d2t_absolute"]
    same_files(tmp_path / "fixed", healthy_mla)


def test_tied_embeddings_fixed(llama, healthy_llama, sglang_server, tmp_path):
    """A draft that trains its own lm_head under a config saying `tie_word_embeddings: true`
    (AngelSlim's Qwen3-0.6B/1.7B/4B training configs, SpecForge's qwen3-4b config until its
    PR 140; tests/published_drafts.py): SGLang ties lm_head to the embedding, shares the
    target's, and drops the trained head without a word; spectrace's load finding names the
    flag. The doctor says the same before serving; `--fix` writes the flag false: the copy
    is the healthy (untied) draft, which serves exactly. vLLM never reads the flag
    (tests/test_doctor.py)."""
    def tie(cfg, sd):
        cfg["tie_word_embeddings"] = True
    tied = write_case(tmp_path, llama, "specforge", tie, "tied")
    rep = fix(tied, f"{llama}/target", tmp_path / "fixed", {"weights.unused_keys"})
    (unused,) = [f for f in rep["findings"] if f["code"] == "weights.unused_keys"]
    assert unused["details"]["keys"] == ["lm_head.weight"] and \
        "`tie_word_embeddings: true`" in unused["message"]
    assert [c["text"].split(" (")[0] for c in rep["fix"]["changes"]] == [
        "tie_word_embeddings: true -> false"]
    assert json.loads((tmp_path / "fixed" / "config.json").read_text())[
        "tie_word_embeddings"] is False
    responses, proc, _ = serve(sglang_server, models_dir(tmp_path, llama, tied))
    assert all(r["meta_info"]["spec_accept_length"] < 2.0 for r in responses), \
        [r["meta_info"]["spec_accept_length"] for r in responses]
    (dropped,) = [f for f in proc["findings"] if f["code"] == "weights.unused_keys"]
    assert "`lm_head.weight`" in dropped["message"] and \
        "`tie_word_embeddings: true`" in dropped["message"]
    same_files(tmp_path / "fixed", healthy_llama)
