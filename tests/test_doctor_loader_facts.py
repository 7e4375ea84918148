"""The doctor's model of each runtime's EAGLE-3 loader, checked against the runtimes
themselves:

1. Every fact a `Loader` row (spectrace/doctor/judge/loaders.py) or an aux-id rule
   (spectrace/doctor/judge/layer_ids.py) relies on is found in the released wheel sources of
   the versions it claims, and is absent where the row says it is absent. The release
   sources come from PyPI (tests/release_sources.py: SGLang's wheels, vLLM's source
   distributions), downloaded once: nothing is imported, no GPU needed.
2. The installed SGLang's real draft classes (`LlamaForCausalLMEagle3`,
   `Eagle3DeepseekV2ForCausalLM`), built on the CPU from the generator's configs, have
   exactly the parameters `expected_params` predicts, and their own `load_weights` drops
   and leaves empty exactly what `simulate_load` predicts, for every format's keys and the
   planted key faults (harness/sglang_draft_probe.py, one subprocess). SGLang's own config
   reader refuses a speculators config and reads the `--fix` copy.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib.metadata import version as installed
from pathlib import Path

import pytest

from spectrace.doctor.judge import draft_params, layer_ids, load_replay, loaders
from tests.release_sources import source

ROOT = Path(__file__).resolve().parents[1]
SG = ("0.5.5", "0.5.8", "0.5.12", "0.5.16", "0.5.23")
VL = ("0.11.0", "0.13.0", "0.20.0", "0.22.0", "0.26.0", "0.33.0")


def _v(x: str) -> tuple[int, ...]:
    return tuple(int(p) for p in x.split("."))


def since(vs, v):
    return tuple(x for x in vs if _v(x) >= _v(v))


def until(vs, v):
    return tuple(x for x in vs if _v(x) <= _v(v))


E3 = "sglang/srt/models/llama_eagle3.py"
K25 = "sglang/srt/models/kimi_k25_eagle3.py"
MR = ("sglang/srt/model_executor/model_runner.py",
      "sglang/srt/model_executor/model_runner_components/spec_aux_hidden_state.py")
VE3 = "vllm/model_executor/models/llama_eagle3.py"
VD3 = "vllm/model_executor/models/deepseek_eagle3.py"
VQ3 = "vllm/model_executor/models/qwen3_eagle3.py"
ALGOS = "vllm/transformers_utils/configs/speculators/algos.py"
Q = "[\"']"  # either quote

# id: (package, files (any of them), regex on the source, versions where it holds,
# versions where it must not)
FACTS = {
    "sglang.no_norm_before_residual": ("sglang", (E3, K25), r"norm_before_residual", (), SG),
    "sglang.no_speculators": ("sglang", ("sglang/srt/configs/model_config.py",), r"speculators",
                              (), SG),
    "sglang.d2t_offsets": ("sglang", (E3,),
                           r"loaded_weight \+ torch\.arange\(loaded_weight\.shape\[0\]\)", SG, ()),
    "sglang.eagle_config_ids_only": ("sglang", MR, rf"eagle_config\[\s*{Q}eagle_aux_hidden_state_"
                                                   rf"layer_ids{Q}\s*\]", SG, ()),
    "sglang.llama_ids_plus_one": ("sglang", ("sglang/srt/models/llama.py",),
                                  r"layers_to_capture = \[val \+ 1 for val in layer_ids\]", SG, ()),
    "sglang.default_ids": ("sglang", ("sglang/srt/models/llama.py",),
                           r"\[2, num_layers // 2, num_layers - 3\]", SG, ()),
    # tie_word_embeddings: SGLang's draft classes make lm_head the embedding (the trained
    # lm_head.weight then matches nothing); vLLM's build their own and never read the flag
    "sglang.tied_lm_head": ("sglang", (E3, K25), r"if (?:self\.)?config\.tie_word_embeddings:"
                            r"\s*\n\s*self\.lm_head = self\.model\.embed_tokens", SG, ()),
    "sglang.midlayer_decoder": ("sglang", (E3,), r"self\.midlayer = ", until(SG, "0.5.8"),
                                since(SG, "0.5.12")),
    "sglang.layers_decoder": ("sglang", (E3,), r"self\.layers = nn\.ModuleList",
                              since(SG, "0.5.12"), until(SG, "0.5.8")),
    "sglang.legacy_renames": ("sglang", (E3,), rf"{Q}midlayer{Q}: {Q}layers\.0{Q}",
                              since(SG, "0.5.12"), until(SG, "0.5.8")),
    "sglang.upper_hidden_norm": ("sglang", (E3,), r"hidden_states, residual = self\.hidden_norm"
                                                  r"\(hidden_states, residual\)",
                                 since(SG, "0.5.12"), until(SG, "0.5.8")),
    "sglang.fc_norm": ("sglang", (E3,), rf"getattr\(\s*config, {Q}use_aux_norm{Q}",
                       since(SG, "0.5.12"), until(SG, "0.5.8")),
    "sglang.input_norm": ("sglang", (E3,), r"norm_before_fc", ("0.5.23",), until(SG, "0.5.16")),
    "sglang.use_aux_flag": ("sglang", MR, r"use_aux_hidden_state", since(SG, "0.5.8"), ("0.5.5",)),
    "sglang.mla_class": ("sglang", (K25,), r"class Eagle3DeepseekV2ForCausalLM",
                         since(SG, "0.5.12"), ()),
    "sglang.mla_renames": ("sglang", (K25,), rf"re\.sub\(r{Q}\^layers\\\.0\\\.{Q}, {Q}midlayer\.{Q}",
                           since(SG, "0.5.12"), ()),
    "sglang.mla_warns": ("sglang", (K25,), r"Eagle3 MLA: skipping unexpected weight",
                         since(SG, "0.5.12"), ()),
    "sglang.mla_fc_norm": ("sglang", (K25,), r"use_aux_norm", since(SG, "0.5.16"), ("0.5.12",)),
    "sglang.deepseek_keep_ids": ("sglang", ("sglang/srt/models/deepseek_v2.py",),
                                 r"if layer_ids and layer_ids\[0\] == 1", since(SG, "0.5.16"),
                                 ("0.5.12",)),
    "sglang.kimi_k25_text_config": ("sglang", ("sglang/srt/configs/kimi_k25.py",),
                                    r"text_config = DeepseekV3Config\(\*\*text_config\)",
                                    ("0.5.23",), ()),
    "vllm.midlayer_mapper": ("vllm", (VE3,), rf"{Q}midlayer\.{Q}(?:, |: ){Q}layers\.0\.{Q}", VL, ()),
    "vllm.d2t_rename": ("vllm", (VE3,), rf"replace\(\s*{Q}d2t{Q},\s*{Q}draft_id_to_target_id{Q}\s*\)",
                        VL, ()),
    "vllm.norm_before_residual": ("vllm", (VE3,), rf"getattr\(config, {Q}norm_before_residual{Q}, "
                                                  r"False\)", VL, ()),
    "vllm.spec_norm_before_residual_true": ("vllm", (ALGOS,),
                                            rf"get\(\s*{Q}norm_before_residual{Q}, True\s*\)", VL, ()),
    "vllm.unknown_keys_raise": ("vllm", ("vllm/model_executor/models/utils.py",),
                                r"There is no module or parameter named", VL, ()),
    "vllm.own_lm_head": ("vllm", (VE3,), r"self\.lm_head = ParallelLMHead\(\s*"
                                         r"self\.config\.draft_vocab_size", VL, ()),
    "vllm.no_tied_lm_head": ("vllm", (VE3, VD3, VQ3), r"tie_word_embeddings", (), VL),
    "vllm.mask_hidden_skipped": ("vllm", (VE3,), r"mask_hidden found in weights but",
                                 since(VL, "0.20.0"), until(VL, "0.13.0")),
    # a draft config of these model types becomes DeepSeek's MTP module (runtime_view)
    "vllm.mla_model_type_mtp": ("vllm", ("vllm/config/speculative.py",),
                                r"if hf_config\.model_type in \(\s*\"deepseek_v3\",\s*"
                                r"\"deepseek_v32\",\s*\"glm_moe_dsa\",?\s*\):\s*\n\s*"
                                r"hf_config\.model_type = \"deepseek_mtp\"", since(VL, "0.20.0"), ()),
    "vllm.default_ids_only": ("vllm", ("vllm/v1/worker/gpu_model_runner.py",),
                              r"eagle_aux_hidden_state_layer_ids", (), ("0.11.0",)),
    "vllm.top_ids": ("vllm", ("vllm/v1/worker/gpu_model_runner.py",),
                     r"eagle_aux_hidden_state_layer_ids", since(VL, "0.13.0"), ("0.11.0",)),
    "vllm.use_aux_flag": ("vllm", (VE3,), rf"{Q}use_aux_hidden_state{Q} in eagle_config",
                          since(VL, "0.13.0"), ("0.11.0",)),
    "vllm.input_norm": ("vllm", (VE3,), r"norm_before_fc", since(VL, "0.20.0"), until(VL, "0.13.0")),
    "vllm.fc_norm": ("vllm", (VE3,), rf"getattr\(self\.config, {Q}fc_norm{Q}, False\)",
                     since(VL, "0.22.0"), until(VL, "0.20.0")),
    "vllm.aux_count_config": ("vllm", (VE3,), r"num_aux_hidden_states", since(VL, "0.22.0"),
                              until(VL, "0.20.0")),
    "vllm.spec_fc_norm": ("vllm", (ALGOS,), rf"{Q}fc_norm{Q}", since(VL, "0.26.0"),
                          until(VL, "0.22.0")),
    "vllm.qwen3": ("vllm", (ALGOS,), r"Eagle3Qwen3ForCausalLM", since(VL, "0.26.0"),
                   until(VL, "0.22.0")),
    # the Qwen3 draft sizes fc from num_aux_layers, num_aux_hidden_states, then the top-level
    # ids (which update_eagle3 copies), then eagle_config's
    "vllm.qwen3_aux_count": ("vllm", (VQ3,), r"num_aux_layers.*\n.*\n.*num_aux_hidden_states"
                             r"[\s\S]*getattr\(\s*self\.config, \"eagle_aux_hidden_state_"
                             r"layer_ids\", None\s*\)\s*or eagle_config\.get",
                             since(VL, "0.26.0"), until(VL, "0.22.0")),
    "vllm.d2t_only_if_pruned": ("vllm", (VE3,), r"draft_vocab_size != target_vocab_size",
                                ("0.33.0",), until(VL, "0.26.0")),
    "vllm.mla_class": ("vllm", (VD3,), r"class Eagle3DeepseekV2ForCausalLM", since(VL, "0.20.0"),
                       until(VL, "0.13.0")),
    "vllm.mla_fc_norm": ("vllm", (VD3,), r"fc_norm", since(VL, "0.22.0"), ("0.20.0",)),
    # id k = the state entering layer k: appended after layer idx as idx + 1 (0.20+), or
    # before layer idx runs (older)
    "vllm.before_convention": ("vllm", ("vllm/model_executor/models/llama.py",),
                               r"_maybe_add_hidden_state\(\s*aux_hidden_states,\s*idx \+ 1|"
                               r"if idx in self\.aux_hidden_state_layers:\s*\n\s*aux_hidden_"
                               r"states\.append\(hidden_states \+ residual\)\s*\n\s*hidden_"
                               r"states, residual = layer", VL, ()),
    "vllm.default_ids": ("vllm", ("vllm/model_executor/models/interfaces.py",
                                  "vllm/model_executor/models/llama.py"),
                         r"\(2, num_layers // 2, num_layers - 3\)", VL, ()),
}


def fact_rows():
    for fid, (pkg, files, rx, yes, no) in FACTS.items():
        for v in yes:
            yield pytest.param(fid, pkg, files, rx, v, True, id=f"{fid}-{v}")
        for v in no:
            yield pytest.param(fid, pkg, files, rx, v, False, id=f"{fid}-{v}-absent")


@pytest.mark.sources
@pytest.mark.parametrize("fid,pkg,files,rx,version,present", list(fact_rows()))
def test_loader_fact_in_the_wheel(fid, pkg, files, rx, version, present):
    found = any(s is not None and re.search(rx, s)
                for s in (source(pkg, version, f) for f in files))
    assert found == present, (f"{pkg} {version}: {fid} expected "
                              f"{'present' if present else 'absent'} in {files}")


def test_every_fact_the_doctor_relies_on_is_checked():
    used = set(layer_ids.ID_RULE_FACTS)
    for rows in (loaders.SGLANG_ROWS, loaders.VLLM_ROWS, loaders.VLLM_MLA_ROWS):
        for first, last, fields in rows:
            used |= set(fields.facts)
            assert fields.facts, f"row {first}-{last} names no fact"
    assert used <= set(FACTS), sorted(used - set(FACTS))


def test_each_row_is_verified_by_a_wheel_inside_it():
    """A version not read is reported as `assumed`; each row holds one that was."""
    for runtime, rows, read in ((loaders.SGLANG, loaders.SGLANG_ROWS, SG),
                                (loaders.VLLM, loaders.VLLM_ROWS + loaders.VLLM_MLA_ROWS, VL)):
        for first, last, _ in rows:
            inside = [v for v in read if first <= _v(v) <= last]
            assert inside, (runtime, first, last)
            for v in inside:
                assert loaders.resolve_loader(runtime, v, _.draft).assumed is None


# -- the installed SGLang's real draft classes (marked `sglang`: torch and SGLang inside) ----------
def _keys(sd: dict) -> list:
    import torch
    dt = {torch.bfloat16: "BF16", torch.int64: "I64", torch.bool: "BOOL", torch.float32: "F32"}
    return [[k, list(v.shape), dt[v.dtype]] for k, v in sd.items()]


def _cases(tmp: Path) -> list[tuple[str, dict, dict]]:
    """(name, draft class, config, state dict) for formats and key faults."""
    import copy

    import torch

    from harness import checkpoint_formats as cf
    out = []
    for name in ("specforge", "modelopt", "modelopt-0.41", "eagle", "mla"):
        cfg, sd = cf.WRITERS[name]("random")
        out.append((name, "mla" if name == "mla" else "llama", cfg, sd))
    cfg, sd = cf.specforge("random")
    sd_layers = cf.draft_state_dict("random", "layers")
    out.append(("specforge-layers0", "llama", cfg, sd_layers))
    cfg_s, sd_s = cf.speculators("random")
    flat = {**cfg_s["transformer_layer_config"], "draft_vocab_size": cfg_s["draft_vocab_size"]}
    out.append(("speculators-keys", "llama", flat, sd_s))
    odd = dict(sd)
    odd.update({"midlayer.self_attn.rotary_emb.inv_freq": torch.ones(16),
                "optimizer.step": torch.zeros(1), "model.norm.weight": odd.pop("norm.weight"),
                "aux_norm_low.weight": torch.ones(128, dtype=torch.bfloat16)})
    out.append(("llama-leftovers-and-prefixes", "llama", cfg, odd))
    fcn = copy.deepcopy(cfg)
    fcn.update(fc_norm=True, norm_before_fc=True)
    sd_n = dict(sd, **{f"fc_norm.{j}.weight": torch.ones(128, dtype=torch.bfloat16)
                       for j in range(3)})
    sd_n["input_norm.weight"] = torch.ones(384, dtype=torch.bfloat16)
    out.append(("llama-fc-norm-input-norm", "llama", fcn, sd_n))
    out.append(("llama-fc-norm-keys-without-config", "llama", cfg, sd_n))
    # a P-EAGLE checkpoint's mask_hidden without parallel drafting: SGLang drops it, vLLM
    # skips it with a log warning (no exception)
    out.append(("llama-mask-hidden", "llama", cfg,
                dict(sd, mask_hidden=torch.zeros(1, 384, dtype=torch.bfloat16))))
    two = copy.deepcopy(cfg)
    two["num_hidden_layers"] = 2
    _, sd2 = cf.modelopt("random", "0.41")
    sd2 = {re.sub(r"^midlayer\.(\d+)\.", r"layers.\1.", k): v for k, v in sd2.items()}
    out.append(("llama-two-layers-hf-upper-norm", "llama", two, sd2))
    mcfg, msd = cf.mla("random")
    for fault, change in (("mla-hf-prefix", lambda d: {("model." + k if k.startswith("layers.")
                                                        else k): v for k, v in d.items()}),
                          ("mla-q-norm", lambda d: {**d, "layers.0.self_attn.q_norm.weight":
                                                    torch.ones(32, dtype=torch.bfloat16)}),
                          ("mla-half-fused", lambda d: {k: v for k, v in d.items()
                                                        if "kv_a_proj_with_mqa" not in k}),
                          ("mla-midlayer", lambda d: {k.replace("layers.0.", "midlayer."): v
                                                      for k, v in d.items()})):
        out.append((fault, "mla", mcfg, change(dict(msd))))
    mfc = dict(mcfg, fc_norm=True)
    out.append(("mla-fc-norm", "mla", mfc, dict(msd, **{
        f"fc_norm.{j}.weight": torch.ones(128, dtype=torch.bfloat16) for j in range(3)})))
    return out


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    from harness import checkpoint_formats as cf
    from harness.server import cpu_env
    tmp = tmp_path_factory.mktemp("probe")
    cases = _cases(tmp)
    # SGLang's own config reader: a speculators config, and the --fix translation of it
    spec_dir = tmp / "speculators"
    cf.write_format(str(spec_dir), "speculators", "random")
    target = tmp / "target"
    target.mkdir()
    (target / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 512,
        "hidden_size": 128, "num_hidden_layers": 4, "intermediate_size": 256,
        "num_attention_heads": 4, "num_key_value_heads": 2}))
    fixed = tmp / "fixed"
    r = subprocess.run([sys.executable, "-m", "spectrace.doctor.cli", str(spec_dir), "--target",
                        str(target), "--fix", str(fixed)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    payload = [{"draft": d, "config": c, "keys": _keys(sd)} for _, d, c, sd in cases]
    payload += [{"read_config": str(spec_dir)}, {"read_config": str(fixed)}]
    (tmp / "cases.json").write_text(json.dumps(payload))
    env = cpu_env()
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env["PYTHONPATH"]])
    out = subprocess.run([sys.executable, "-m", "harness.sglang_draft_probe",
                          str(tmp / "cases.json")], capture_output=True, text=True,
                         env=env, cwd=str(ROOT), timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    results = json.loads(out.stdout)
    return cases, results


@pytest.mark.sglang
def test_sglang_real_classes_match_the_loader_model(probed):
    cases, results = probed
    v = installed("sglang")
    for (name, draft, cfg, sd), real in zip(cases, results):
        loader = loaders.resolve_loader("sglang", v, draft)
        params = draft_params.expected_params(cfg, loader)
        assert {k: list(s) for k, s in params.items()} == real["params"], name
        unused, missing = load_replay.simulate_load(list(sd), params, loader, cfg)
        assert real["error"] is None, (name, real["error"])
        assert sorted(unused) == sorted(real["unused"]), (name, unused, real["unused"])
        assert sorted(missing) == sorted(real["missing"]), (name, missing, real["missing"])
        assert real["hot_token_id"] == any("d2t" in k for k in sd), name
    by_name = {c[0]: r for c, r in zip(cases, results)}
    # the faults are faults for the real classes too (the comparison above is not vacuous)
    assert by_name["mla-hf-prefix"]["unused"] and by_name["mla-q-norm"]["unused"] == [
        "layers.0.self_attn.q_norm.weight"]
    assert "model.midlayer.self_attn.fused_qkv_a_proj_with_mqa.weight" in by_name[
        "mla-half-fused"]["missing"]
    assert by_name["mla-half-fused"]["unused"] == ["layers.0.self_attn.q_a_proj.weight"]
    assert len(by_name["modelopt-0.41"]["unused"]) == 19
    assert "model.layers.1.hidden_norm.weight" in by_name["llama-two-layers-hf-upper-norm"][
        "missing"]
    assert sorted(by_name["llama-fc-norm-keys-without-config"]["unused"]) == [
        "fc_norm.0.weight", "fc_norm.1.weight", "fc_norm.2.weight", "input_norm.weight"]


@pytest.mark.sglang
def test_sglang_refuses_a_speculators_config_and_reads_the_fixed_copy(probed):
    _, results = probed
    spec, fixed = results[-2], results[-1]
    assert spec["architectures"] is None and spec["error"], spec
    assert fixed == {"architectures": ["LlamaForCausalLMEagle3"], "error": None}


# -- the installed vLLM's real draft classes (marked `vllm`: its own environment) -------------------
@pytest.mark.vllm
def test_vllm_real_classes_match_the_loader_model(tmp_path):
    """The same formats and key faults through vLLM's own `load_weights`
    (harness/vllm_draft_probe.py): the parameters `expected_params` predicts, an exception
    exactly where `simulate_load` has a key vLLM would refuse, and otherwise the parameters
    it leaves empty. The MLA cases carry model_type deepseek_v2 (vLLM turns deepseek_v3
    into an MTP module: tests/test_doctor_config_fields.py)."""
    from conftest import vllm_python_or_skip
    from harness.vllm_draft_probe import run_cases
    cases = [(n, d, dict(c, model_type="deepseek_v2") if d == "mla" else
              {"architectures": ["LlamaForCausalLMEagle3"], **c}, sd)
             for n, d, c, sd in _cases(tmp_path)]
    results = run_cases(vllm_python_or_skip(), [
        {"draft": d, "config": c, "keys": _keys(sd)} for _, d, c, sd in cases], tmp_path)
    raised = []
    for (name, draft, cfg, sd), real in zip(cases, results):
        assert real["build_error"] is None, (name, real["build_error"])
        loader = loaders.resolve_loader("vllm", real["version"], draft)
        params = draft_params.expected_params(cfg, loader)
        assert {k: list(v) for k, v in params.items()} == real["params"], name
        unused, missing = load_replay.simulate_load(list(sd), params, loader, cfg)
        refused = [k for k in unused if load_replay.route_key(k, params, loader, cfg).kind
                   == load_replay.RouteKind.DROPPED]
        assert bool(refused) == (real["error"] is not None), (name, refused, real["error"])
        if refused:
            raised.append(name)
            assert any(k.split(".")[-2] in real["error"] for k in refused), (name, real["error"])
        else:
            assert sorted(missing) == sorted(real["missing"]), (name, missing, real["missing"])
    # not vacuous: SGLang's leftovers and an MLA q_norm make vLLM raise, a clean draft not
    assert {"llama-leftovers-and-prefixes", "mla-q-norm"} <= set(raised)
    assert not {"specforge", "mla", "llama-mask-hidden"} & set(raised)
