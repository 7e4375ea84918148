"""A process for tests/test_vllm_algorithms_real.py (the vLLM environment): vLLM's real
model runner (`CPUModelRunner`) built in this process for each speculative method whose
draft reads the target's hidden states (DFlash, DSpark, EAGLE-1, MTP), its real
`load_model` run, which builds the real target and draft classes with vLLM's dummy
weights (`load_format="dummy"`: no checkpoint, only each model's `config.json`), and
the methods spectrace wraps driven; prints `RESULT {json}`.

spectrace is installed as a user installs it, `spectrace.instrument()`: its import hooks
wrap vLLM's `CPUModelRunner.load_model` and the DFlash draft's `combine_hidden_states`
(nothing here calls a hook by hand). Each case runs between `uninstrument()` and a new
`instrument()`, so each has its own Recorder and identity.

What stands in for what cannot run here: one gloo process group of world size 1 (vLLM's
parallel state, harness/vllm_families.py) instead of a worker process; DSpark's draft is
built beside a DFlash runner (vLLM's V1 runner, the only one on this CPU build, refuses
`dspark`: `drive_dspark`); and for two DFlash cases, the runner's own choice of aux ids: `use_aux_hidden_state_outputs` switched off
before `load_model` (a target whose capture was never set), or `_get_eagle3_aux_layers_
from_config` answering the draft's `target_layer_ids` without vLLM's + 1 (a target that
captures other layers than the draft was trained on).

    python tests/programs/vllm_draft_classes.py WORK_DIR ['["dflash", ...]']
    (the second argument: these cases only)
"""
import json
import logging
import os
import sys
import time
import traceback

from harness.cpu_isa import without_amx

without_amx()  # the CPU path CI's machines take (harness/cpu_isa.py)

import spectrace  # noqa: E402 (after without_amx)
from harness import tiny_mla  # noqa: E402 (after without_amx)
from harness import vllm_families as vf  # noqa: E402 (after without_amx)
from spectrace.adapters import vllm_target  # noqa: E402 (after without_amx)
from spectrace.process import STATE  # noqa: E402 (after without_amx)
from spectrace import objstate  # noqa: E402 (after without_amx)

WORK = sys.argv[1]
ONLY = json.loads(sys.argv[2]) if len(sys.argv) > 2 else None
V, H, LAYERS = 512, 128, 4
TARGET_LAYER_IDS = [0, 1, 2]  # dflash_config.target_layer_ids: outputs of layers 0, 1, 2

_DENSE = dict(vocab_size=V, hidden_size=H, intermediate_size=2 * H, num_hidden_layers=LAYERS,
              num_attention_heads=4, num_key_value_heads=2, head_dim=32,
              max_position_embeddings=2048, rms_norm_eps=1e-6, hidden_act="silu",
              bos_token_id=0, eos_token_id=1, tie_word_embeddings=False,
              rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},
              torch_dtype="float32")
QWEN3 = {**_DENSE, "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}
LLAMA = {**_DENSE, "architectures": ["LlamaForCausalLM"], "model_type": "llama"}
_ONE_LAYER = {"num_hidden_layers": 1}
DFLASH = {**QWEN3, **_ONE_LAYER, "architectures": ["DFlashDraftModel"], "block_size": 4,
          "dflash_config": {"target_layer_ids": TARGET_LAYER_IDS, "mask_token_id": 2}}
DSPARK = {**DFLASH, "markov_rank": 8}  # loaded as DFlash by the runner (see drive_dspark)
EAGLE1 = {**LLAMA, **_ONE_LAYER}  # vLLM names it EagleLlamaForCausalLM (EAGLEConfig)
DSV3_MTP = {**tiny_mla.target_config(), "num_nextn_predict_layers": 1}  # its own MTP layer


def write(name: str, cfg: dict) -> str:
    d = os.path.join(WORK, "models", name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as fh:
        json.dump(cfg, fh)
    return d


def engine_config(target: str, method: str, draft: str):
    from vllm.engine.arg_utils import EngineArgs
    return EngineArgs(model=target, dtype="float32", enforce_eager=True, max_model_len=256,
                      max_num_seqs=2, max_num_batched_tokens=256, load_format="dummy",
                      skip_tokenizer_init=True,
                      speculative_config={"method": method, "model": draft,
                                          "num_speculative_tokens": 3}).create_engine_config()


def codes() -> dict:
    rec = STATE.recorder
    return dict(rec.findings.counts) if rec is not None else {}


def passes() -> dict:
    rec = STATE.recorder
    return {f"{k}:{w}": n for (k, w), n in (rec.draft.counts if rec is not None else {}).items()}


def combine(draft, width: int, tokens: int = 4) -> dict:
    """One call of the draft's real combine_hidden_states with target-fed hidden states
    `width` wide: what vLLM answered (the output's width, or its error), and the findings
    and passes spectrace holds after it."""
    import torch
    out = {}
    try:
        out["output_width"] = int(draft.combine_hidden_states(torch.randn(tokens, width)).shape[-1])
    except Exception as exc:  # noqa: BLE001 - vLLM's own check, recorded
        out["vllm_error"] = f"{type(exc).__name__}: {exc}"[:300]
    out["findings"], out["passes"] = codes(), passes()
    return out


def forward(runner) -> dict:
    """vLLM's own dummy forward of the target and the draft (`_dummy_run`, what its
    profile run does before the KV cache exists); torch forward hooks on each model's first
    decoder layer count the passes (vLLM's compiled modules, `support_torch_compile`, call
    their own forward without hooks, so the models themselves cannot be hooked)."""
    calls = {"target": 0, "draft": 0}

    def first_layer(model):
        layers = model.model.layers
        return next(iter(layers.values() if hasattr(layers, "values") else layers))

    handles = [first_layer(m).register_forward_hook(
                   lambda *_, k=k: calls.__setitem__(k, calls[k] + 1))
               for k, m in (("target", runner.get_model()), ("draft", runner.drafter.model))]
    try:
        runner._dummy_run(8)
        out = {"ran": True}
    except Exception as exc:  # noqa: BLE001 - recorded with why
        out = {"ran": False, "error": f"{type(exc).__name__}: {exc}"[:400]}
    for h in handles:
        h.remove()
    return {**out, "calls": calls}


# -- what each case drives after load_model ------------------------------------------------
def drive_aux_widths(runner, r):
    draft = runner.drafter.model
    r["healthy"] = [combine(draft, 3 * H), combine(draft, 3 * H)]
    r["one_layer"] = combine(draft, H)        # what a target capturing nothing sends
    r["two_layers"] = combine(draft, 2 * H)   # a target capturing one layer too few


def drive_dspark(runner, r):
    """vLLM's V1 runner refuses `dspark` (the only runner here: MRV2 needs Triton), so the
    real DSpark class is built beside the DFlash draft this runner loaded, by vLLM's own
    `initialize_model` from the same draft config (with DSpark's `markov_rank`), and its
    inherited combine_hidden_states driven."""
    import torch
    from vllm.model_executor.model_loader.dummy_loader import DummyModelLoader
    from vllm.model_executor.model_loader.utils import (
        initialize_model, process_weights_after_loading,
    )
    from vllm.model_executor.models.qwen3_dspark import Qwen3DSparkForCausalLM
    cfg = runner.vllm_config
    draft_config = cfg.speculative_config.draft_model_config
    draft = initialize_model(vllm_config=cfg, model_config=draft_config,
                             model_class=Qwen3DSparkForCausalLM, prefix="dspark")
    # what vLLM's dummy loader does after building a model: random weights, then each
    # layer's post-processing (the CPU linear kernels fc runs on)
    DummyModelLoader(cfg.load_config).load_weights(draft, draft_config)
    process_weights_after_loading(draft, draft_config, torch.device("cpu"))
    r["dspark_class"] = f"{type(draft).__module__}.{type(draft).__name__}"
    r["dspark_combine_wrapped"] = any(STATE.patcher.is_patched(c, "combine_hidden_states")
                                      for c in type(draft).__mro__)
    r["dspark_audit"] = sorted(f.code for f in
                               vllm_target.audit_pair(runner.get_model(), draft, "dspark"))
    r["healthy"] = [combine(draft, 3 * H), combine(draft, 3 * H)]
    r["one_layer"] = combine(draft, H)


def drive_forward(runner, r):
    r["forward"] = forward(runner)


def never_set(runner):
    runner.use_aux_hidden_state_outputs = False


def without_plus_one(runner):
    runner._get_eagle3_aux_layers_from_config = lambda: tuple(TARGET_LAYER_IDS)


CASES = {  # name -> (method, target config, draft config (None: the target's), before, drive)
    "dflash": ("dflash", QWEN3, DFLASH, None, drive_aux_widths),
    "dflash_never_set": ("dflash", QWEN3, DFLASH, never_set, None),
    "dflash_other_ids": ("dflash", QWEN3, DFLASH, without_plus_one, None),
    "dspark": ("dflash", QWEN3, DSPARK, None, drive_dspark),
    "eagle": ("eagle", LLAMA, EAGLE1, None, drive_forward),
    "mtp": ("mtp", DSV3_MTP, None, None, drive_forward),
}


def run_case(name, method, target_cfg, draft_cfg, before, drive) -> dict:
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.v1.worker import cpu_model_runner
    began = time.time()
    spectrace.uninstrument()
    spectrace.instrument(output_dir=os.path.join(WORK, "spectrace", name))
    target = write(f"{name}-target", target_cfg)
    draft = write(f"{name}-draft", draft_cfg) if draft_cfg is not None else target
    cfg = engine_config(target, method, draft)
    r = {"method": cfg.speculative_config.method}
    cls = cpu_model_runner.CPUModelRunner
    r["load_model_wrapped"] = STATE.patcher.is_patched(cls, "load_model")
    with set_current_vllm_config(cfg):
        runner = cls(cfg, torch.device("cpu"))
        r["drafter"] = type(runner.drafter).__name__
        if before is not None:
            before(runner)
        runner.load_model()  # spectrace's wrapper: the audit runs when it returns
        st = objstate.peek(runner)  # the runner's state, once spectrace has seen it
        r["audited"] = bool(st and st.audited)
        t, d = runner.get_model(), runner.drafter.model
        r["target_class"] = f"{type(t).__module__}.{type(t).__name__}"
        r["draft_class"] = f"{type(d).__module__}.{type(d).__name__}"
        r["draft_has_fc"] = getattr(d.model, "fc", None) is not None
        r["combine_wrapped"] = any(STATE.patcher.is_patched(c, "combine_hidden_states")
                                   for c in type(d).__mro__)
        r["target_aux_ids"] = vllm_target.kept_ids(t).ids
        r["after_load"] = {"findings": codes(), "passes": passes()}
        if drive is not None:
            drive(runner, r)
    r["findings"], r["passes"] = codes(), passes()
    r["identity"] = {k: STATE.identity.get(k) for k in ("runtime", "spec_algorithm",
                                                          "draft_model", "spec_worker")}
    r["seconds"] = round(time.time() - began, 1)
    return r


logging.disable(logging.WARNING)
vf.prepare()
result = {"cases": {}, "not_built": {}}
for name, case in CASES.items():
    if ONLY is not None and name not in ONLY:
        continue
    try:
        result["cases"][name] = run_case(name, *case)
        print(name, result["cases"][name], flush=True)
    except Exception as exc:  # noqa: BLE001 - recorded with why
        result["not_built"][name] = f"{type(exc).__name__}: {exc}"[:600]
        traceback.print_exc()
spectrace.uninstrument()
print("RESULT " + json.dumps(result), flush=True)
