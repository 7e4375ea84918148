"""A process for tests/test_block_draft_inputs.py: SGLang's real DFlash and DSpark draft
classes (`DFlashDraftModel`, `Qwen3DSparkModel`: tiny configs, real CPU weights), its
real target classes built without weights (harness/sglang_families.py), its own
`configure_aux_hidden_state_capture` switching capture on, its real `DFlashWorkerV2` /
`DSparkWorkerV2` built without weights (`cls.__new__` plus the two fields the audit
reads); spectrace's tables applied by its own Patcher. Prints `RESULT {json}`.

The ids handed to SGLang's switch are the ones SGLang resolves from the draft's config
(`DFlashDraftConfig.resolve_target_layer_ids` for the runtime target's depth, DSPARK's
`dspark_target_layer_ids` first), as `spec_aux_hidden_state._resolve_dflash_aux_hidden_state`
does (that function itself needs a server's ModelConfig). A step's original method fails
on the stub batch after its hook ran, and the error is caught here.

    python tests/programs/block_draft_inputs.py OUTPUT_DIR   (needs SGLang; cpu_env)
"""
import importlib
import json
import os
import sys
import types

import torch

from harness.cpu_isa import without_amx

without_amx()  # the CPU path CI's machines take (harness/cpu_isa.py)

from tests.kit import stand_ins as hb  # noqa: E402 (after without_amx)

from tests.kit import process_state
from harness import sglang_families as fams  # noqa: E402 (after without_amx)
from spectrace.adapters import ADAPTERS  # noqa: E402 (after without_amx)
from spectrace.patching import Patcher  # noqa: E402 (after without_amx)
from spectrace.safety import INTERNAL_ERRORS  # noqa: E402 (after without_amx)

OUT = sys.argv[1]
H, L = fams.TEXT["hidden_size"], fams.L

fams.prepare()
patcher = Patcher()
for name in ("sglang.srt.models.dflash", "sglang.srt.speculative.dflash_worker_v2",
             "sglang.srt.speculative.dspark_components.dspark_worker_v2"):
    adapter, table = ADAPTERS[name].split(":")
    patcher.apply(importlib.import_module(name), getattr(importlib.import_module(adapter), table))

from sglang.srt.model_executor.forward_batch_info import ForwardMode  # noqa: E402
from sglang.srt.model_executor.model_runner_components.attention_backend_setup import (  # noqa: E402
    configure_aux_hidden_state_capture,
)
from sglang.srt.models.dflash import DFlashDraftModel  # noqa: E402
from sglang.srt.models.dspark import Qwen3DSparkModel  # noqa: E402
from sglang.srt.speculative.dflash_worker_v2 import DFlashWorkerV2  # noqa: E402
from sglang.srt.speculative.dspark_components.dspark_worker_v2 import DSparkWorkerV2  # noqa: E402

from spectrace.adapters import sglang_dflash  # noqa: E402
from spectrace.rules.aux import SGLANG_BLOCK_DRAFT_TARGETS  # noqa: E402

result = {"missing": patcher.missing, "families": {}, "workers": {}}
DSPARK = dict(markov_rank=8, markov_head_type="vanilla")


def draft(cls=DFlashDraftModel, layers=2, top=None, **dflash):
    """A real draft of `layers` layers, `dflash` its dflash_config, `top` top-level keys."""
    extra = DSPARK if cls is Qwen3DSparkModel else {}
    cfg = fams.make_config(
        "qwen3", vocab_size=fams.TEXT["vocab_size"], hidden_size=H, intermediate_size=2 * H,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2, head_dim=H // 4,
        max_position_embeddings=256, rms_norm_eps=1e-6, tie_word_embeddings=False,
        dflash_config=dict(block_size=4, **extra, **dflash), **extra, **(top or {}))
    return cls(cfg)


def resolved_ids(d, dspark: bool) -> list:
    """The ids SGLang hands the target for this draft and an L-layer target."""
    own = getattr(d.config, "dspark_target_layer_ids", None) if dspark else None
    if own:
        return list(own)
    return d.draft_config.resolve_target_layer_ids(target_num_layers=L,
                                                   draft_num_layers=d.config.num_hidden_layers)


def switch_on(target, ids, dspark: bool) -> None:
    """SGLang's own switch, as its model runner calls it for DFLASH / DSPARK."""
    configure_aux_hidden_state_capture(
        model=target, eagle_use_aux_hidden_state=False, eagle_aux_hidden_state_layer_ids=None,
        dflash_use_aux_hidden_state=True, dflash_target_layer_ids=list(ids), is_dspark=dspark)


def codes(findings) -> list:
    return sorted(f.code for f in findings)


# -- every target family: the audit on its real capture state ------------------------------
dflash = draft(target_layer_ids=[1, 3])
for name in fams.FAMILIES:
    if not fams.present(name):
        continue
    row = {"architecture": fams.ARCHITECTURES[name], "in_table": None}
    try:
        target = fams.build(name)
    except Exception as exc:  # noqa: BLE001 - reported, the test says which
        result["families"][name] = {"error": f"build: {type(exc).__name__}: {exc}"}
        continue
    row["has_method"] = hasattr(target, "set_dflash_layers_to_capture")
    if not row["has_method"]:
        result["families"][name] = row
        continue
    row["off"] = codes(sglang_dflash.audit_pair(target, dflash, "DFLASH"))
    try:
        switch_on(target, resolved_ids(dflash, False), False)
        row["on"] = codes(sglang_dflash.audit_pair(target, dflash, "DFLASH"))
        other = fams.build(name)
        switch_on(other, [2, 5], False)
        row["other"] = codes(sglang_dflash.audit_pair(other, dflash, "DFLASH"))
    except Exception as exc:  # noqa: BLE001 - SGLang's own switch refused
        row["error"] = f"switch: {type(exc).__name__}: {exc}"
    result["families"][name] = row
result["table"] = sorted(SGLANG_BLOCK_DRAFT_TARGETS)


# -- the real workers: the audit at the first step, findings in the Recorder ---------------
def batch(mode):
    return types.SimpleNamespace(forward_mode=mode, is_extend_in_batch=False, reqs=[None] * 2,
                                 seq_lens=torch.zeros(2), spec_info=None)


def worker_run(worker_cls, target, d, label) -> dict:
    w = worker_cls.__new__(worker_cls)
    w.__dict__.update(model_runner=types.SimpleNamespace(model=target), draft_model=d,
                      server_args=None, _target_worker=None, speculative_num_draft_tokens=4)
    with process_state.own_recorder(os.path.join(OUT, label)) as rec:
        for mode in (ForwardMode.DECODE, ForwardMode.DECODE):  # audited once
            try:
                worker_cls.forward_batch_generation(w, batch(mode))
            except Exception:  # noqa: BLE001 - the original, on the stub batch
                pass
        return dict(rec.findings.counts)


def cases(worker_cls, family, d, dspark, other_ids):
    on = fams.build(family)
    switch_on(on, resolved_ids(d, dspark), dspark)
    other = fams.build(family)
    switch_on(other, other_ids, dspark)
    return {"on": worker_run(worker_cls, on, d, "on"),
            "off": worker_run(worker_cls, fams.build(family), d, "off"),
            "other": worker_run(worker_cls, other, d, "other")}


result["workers"]["DFlashWorkerV2"] = cases(DFlashWorkerV2, "llama", dflash, False, [2, 5])
dspark = draft(Qwen3DSparkModel, target_layer_ids=[1, 3])
result["workers"]["DSparkWorkerV2"] = cases(DSparkWorkerV2, "qwen3", dspark, True, [2, 5])
# DSPARK's own key wins over dflash_config's: the target captures [2, 4] + 1
own = draft(Qwen3DSparkModel, target_layer_ids=[1, 3], top={"dspark_target_layer_ids": [2, 4]})
result["workers"]["DSparkWorkerV2 dspark_target_layer_ids"] = cases(
    DSparkWorkerV2, "qwen3", own, True, [1, 3])
result["dspark_own_ids_resolved"] = resolved_ids(own, True)

# the library call (`spectrace.check_pair`) on the same pairs: the algorithm from the class
import spectrace  # noqa: E402
checked = {}
for label, d, family, dspark in (("DFlashDraftModel", dflash, "llama", False),
                                 ("Qwen3DSparkModel", own, "qwen3", True)):
    healthy, off = fams.build(family), fams.build(family)
    switch_on(healthy, resolved_ids(d, dspark), dspark)
    checked[label] = {"on": codes(spectrace.check_pair(healthy, d)),
                      "off": codes(spectrace.check_pair(off, d))}
result["check_pair"] = checked

# no ids, but the trained target's depth: SGLang selects for the runtime target's depth
for depth in (L, 12):
    d = draft(num_target_layers=depth)
    t = fams.build("llama")
    switch_on(t, resolved_ids(d, False), False)
    result[f"depth_{depth}"] = {
        "sglang_captures": list(t.model.layers_to_capture),
        "findings": worker_run(DFlashWorkerV2, t, d, f"depth-{depth}")}

# -- one target layer: capture off is silent in SGLang (the last hidden state is as wide) ---
one = draft(layers=1, target_layer_ids=[3])
off = fams.build("llama")
with process_state.own_recorder(os.path.join(OUT, "one")) as rec:
    # what a target without capture hands it: its last hidden state, H wide
    projected = one.project_target_hidden(torch.randn(5, H))
    silent = {"projected": list(projected.shape), "findings": dict(rec.findings.counts)}
result["one_layer"] = {"last_hidden_state": silent,
                       "off": worker_run(DFlashWorkerV2, off, one, "one-off")}

# -- widths at project_target_hidden --------------------------------------------------------
widths = draft(target_layer_ids=[1, 3])
with process_state.own_recorder(os.path.join(OUT, "widths")) as rec:
    for _ in range(3):
        widths.project_target_hidden(torch.randn(5, 2 * H))
    healthy = {f"{k}:{w}": n for (k, w), n in rec.draft.counts.items()}
    try:
        widths.project_target_hidden(torch.randn(5, H))
        raised = None
    except ValueError as exc:
        raised = str(exc)
    result["widths"] = {"passes": healthy, "passes_after": {
        f"{k}:{w}": n for (k, w), n in rec.draft.counts.items()}, "sglang_raised": raised,
        "findings": dict(rec.findings.counts), "expected": dict(rec.draft.expected)}

result["internal_errors"] = dict(INTERNAL_ERRORS.counts)
print("RESULT " + json.dumps(result))
