"""A process for tests/test_algorithm_workers.py: SGLang's real worker class of every
speculative algorithm (and a plugin registered through `SpeculativeAlgorithm.register`),
built without weights (`cls.__new__`, the attributes its constructor would set), spectrace's
tables applied by its own Patcher, and the wrapped methods driven; prints `RESULT {json}`.

What stands in for what cannot run here, and nothing else:
- `BaseSpecWorker.__init__`, which every constructor calls first, raises once the
  constructor's hook has run (the rest would build draft models);
- the draft worker of FROZEN_KV_MTP (a stub proposing fixed tokens) and
  `eagle_worker_v2.run_eagle_verify` (the target's verify forward, which needs weights);
- a step's original method (not FROZEN_KV_MTP's) fails on the stub batch after its hook
  ran, and the error is caught here; multi-layer EAGLE's `run_eagle_verify` is stood in
  as FROZEN_KV_MTP's is; DFlash's `_accept_block` runs for real (greedy, on the CPU) with
  its TP sync a no-op (one rank);
- `flashinfer` (CUDA only, not installable here) for the import of Uno's module alone: its
  modules bind one name of it at import time, `top_k` (`FlashinferStandIn`); nothing of it
  runs in the driven methods (its one function raises if called, and the program reports
  every call: none).

    python tests/programs/algorithm_workers.py OUTPUT_DIR   (needs SGLang; cpu_env)
"""
import contextlib
import glob
import importlib
import importlib.util
import json
import os
import sys
import types

import torch

from tests.kit import stand_ins as hb

from tests.kit import process_state
from harness import sglang_families as fams
from spectrace import process
from spectrace.adapters import ADAPTERS
from spectrace.adapters.sglang_algorithms import ALGORITHMS
from spectrace.patching import Patcher
from spectrace.safety import INTERNAL_ERRORS

OUT = sys.argv[1]
BS, N = 2, 4  # requests per step, draft tokens (3 steps, top-k 1)

fams.prepare()
from sglang.srt.model_executor.forward_batch_info import ForwardMode  # noqa: E402
from sglang.srt.speculative import base_spec_worker, eagle_worker_v2  # noqa: E402
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm  # noqa: E402

result = {"not_built": {}, "counts": {}, "identity": {}, "steps": {}, "missing": []}
UNO = "sglang.srt.speculative.uno_worker_v2"


class FlashinferStandIn:
    """A stand-in for `flashinfer`, which is CUDA only (it cannot be installed on this
    machine), for the import of Uno's module alone. Of the modules that import brings in,
    two bind exactly one name of it at import time, `from flashinfer import top_k`:
    `srt/speculative/uno_utils.py` (UNO's sampled, non-greedy proposals and verify) and
    `kernels/ops/speculative/uno_tree.py` (the tree proposal, top-k > 1). Both are called
    only from a decode step's forward, which the driven methods never reach (the step's
    original stops at `_validate_batch` on the stub batch; `_accept_and_pack`, the greedy
    accept, is plain torch): the stand-in's `top_k` raises if called, and every call is
    reported (`calls`; none expected).

    It is in `sys.modules` only while that module is imported, and only where no real
    flashinfer exists; removed afterwards, so no later import sees it."""

    NAMES = ("top_k",)

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.module = types.ModuleType("flashinfer")
        self.module.__doc__ = "spectrace test stand-in: flashinfer is CUDA only"

        def top_k(*args, **kwargs):
            self.calls.append("top_k")
            raise NotImplementedError("flashinfer stand-in (tests/programs/algorithm_workers.py):"
                                      " flashinfer is CUDA only; not for forward passes")
        self.module.top_k = top_k
        self.used = False

    @contextlib.contextmanager
    def installed(self):
        if importlib.util.find_spec("flashinfer") is not None:
            yield  # the real one
            return
        sys.modules["flashinfer"] = self.module
        self.used = True
        try:
            yield
        finally:
            del sys.modules["flashinfer"]

    def bound_by(self) -> list[str]:
        """Where SGLang's modules hold the stand-in's functions (`module.name`)."""
        ours = {id(getattr(self.module, n)) for n in self.NAMES}
        return sorted(f"{m.__name__}.{k}" for m in list(sys.modules.values())
                      if getattr(m, "__name__", "").startswith("sglang")
                      for k, v in list(vars(m).items()) if id(v) in ours)


flashinfer = FlashinferStandIn()

# -- every worker module of the installed SGLang, spectrace's tables applied -------------
patcher = Patcher()
modules = {}
for name, ref in ADAPTERS.items():
    if not name.startswith("sglang.srt.speculative."):
        continue
    if importlib.util.find_spec(name.rpartition(".")[0]) is None or \
            importlib.util.find_spec(name) is None:
        continue  # not in this release (the v1 eagle worker)
    try:
        with flashinfer.installed() if name == UNO else contextlib.nullcontext():
            mod = importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - a module that cannot be built here, and why
        result["not_built"][name] = f"{type(exc).__name__}: {exc}"
        continue
    adapter, table = ref.split(":")
    patcher.apply(mod, getattr(importlib.import_module(adapter), table))
    modules[name] = mod
result["missing"] = patcher.missing
# the algorithm points are optional (older releases lack some): which installed, per class
result["wrapped"] = {}
for p in patcher.patches:
    result["wrapped"].setdefault(getattr(p.owner, "__name__", str(p.owner)), []).append(p.attr)


class PluginWorker(base_spec_worker.BaseSpecWorker):
    """A plugin algorithm's worker: only BaseSpecWorker's hooks apply."""

    target_worker = draft_worker = None

    def forward_batch_generation(self, batch, **kw):
        raise NotImplementedError


SpeculativeAlgorithm.register("SPECTRACE_PROBE")(lambda server_args: PluginWorker)
result["plugin_registered"] = type(SpeculativeAlgorithm.from_string("spectrace_probe")).__name__


def worker_classes():
    for row in ALGORITHMS:
        mod = modules.get(row.module)
        if mod is not None and row.worker != "BaseSpecWorker":
            yield row, getattr(mod, row.worker)
    yield None, PluginWorker


def bare(cls, **attrs):
    w = cls.__new__(cls)
    w.__dict__.update(dict(topk=1, speculative_num_steps=3, speculative_num_draft_tokens=N,
                           adaptive_controller=None, _target_worker=None,
                           _draft_worker=None, server_args=None))
    w.__dict__.update(attrs)
    return w


ACCEPTED = [[0, 3], [2, 1], [3, 3]]  # correct drafts per request, three hand-overs

# -- counts: the real on_verify_complete_cpu each class inherits or defines ----------------
for row, cls in worker_classes():
    w = bare(cls, speculative_num_draft_tokens=8 if cls.__name__ == "DFlashWorkerV2" else N)
    with process_state.own_recorder(OUT) as rec:
        for counts in ACCEPTED:
            w.on_verify_complete_cpu(list(counts), batch_size=len(counts))
        rec.acceptance.totals.fold()
        a = rec.acceptance.totals
        result["counts"][cls.__name__] = {
            "drafts": a.drafts, "accepted": a.accepted, "draft_tokens": a.draft_tokens,
            "per_position": list(a.per_position),
            "lengths": {str(k): v for k, v in a.length_counts.items() if v}}


# -- constructors: the hook notes the algorithm and the worker class ---------------------
class StopHere(Exception):
    pass


def stop(self):
    raise StopHere


real_base_init = base_spec_worker.BaseSpecWorker.__init__
base_spec_worker.BaseSpecWorker.__init__ = stop
try:
    for row, cls in worker_classes():
        if row is None or not row.own_init:
            continue
        args = types.SimpleNamespace(speculative_algorithm=row.name.split()[0].lower(),
                                     speculative_draft_model_path="/drafts/d",
                                     served_model_name="target-m", tp_size=1)
        with process_state.own_recorder(OUT):
            process.STATE.identity.clear()
            try:
                cls(args, 0, 0, types.SimpleNamespace(tp_rank=0))
            except StopHere:
                pass
            result["identity"][cls.__name__] = {
                k: process.STATE.identity.get(k)
                for k in ("spec_algorithm", "spec_worker", "draft_model", "model")}
finally:
    base_spec_worker.BaseSpecWorker.__init__ = real_base_init


# -- steps: each own forward_batch_generation counts decode steps, skips prefill ---------
def batch(mode):
    return types.SimpleNamespace(forward_mode=mode, is_extend_in_batch=False, reqs=[None] * BS,
                                 seq_lens=torch.zeros(BS), spec_info=None)


for row, cls in worker_classes():
    if row is None or not row.own_step or cls.__name__ == "FrozenKVMTPWorkerV2":
        continue
    w = bare(cls)
    with process_state.own_recorder(OUT, step_sample_ratio=1.0) as rec:
        for mode in (ForwardMode.EXTEND, ForwardMode.DECODE, ForwardMode.DECODE):
            try:
                cls.forward_batch_generation(w, batch(mode))
            except Exception:  # noqa: BLE001 - the original, on the stub batch
                pass
        result["steps"][cls.__name__] = {"steps": dict(rec.steps.counts),
                                         "span_left_open": rec.inflight.span is not None}


# -- FROZEN_KV_MTP: its real step and the inherited, wrapped EAGLEWorkerV2.verify ---------
class FrozenDraft:
    """Proposes token 5 at every position; the target's verify (stood in) agrees on the
    first position only."""

    parallel_layout = types.SimpleNamespace(tp_group=None)

    def draft(self, batch):
        info = types.SimpleNamespace(draft_token=torch.full((BS * N,), 5),
                                     is_verify_input=lambda: True)
        return info

    def _draft_extend_for_decode(self, batch, out):
        pass

    def _idle_seed(self):
        return None


def stand_in_verify(batch, **kw):
    pred = torch.full((BS, N), 9)
    pred[:, 0] = 5
    return types.SimpleNamespace(accept_lens=torch.full((BS,), 2), next_token_ids=pred.reshape(-1),
                                 new_seq_lens=None)


def step_span_workers(out: str) -> list:
    """The `spectrace.worker` attribute of every step span written under `out`."""
    names = []
    for path in glob.glob(os.path.join(out, "**", "spans.jsonl"), recursive=True):
        with open(path) as f:
            names += [json.loads(line)["attributes"].get("spectrace.worker")
                      for line in f if line.strip() and json.loads(line)["name"] == "spectrace.spec.step"]
    return names


def frozen_run(every: int, steps: int, with_frozen_table: bool) -> dict:
    from sglang.srt.speculative import frozen_kv_mtp_worker_v2 as fk
    own = Patcher()
    saved = eagle_worker_v2.run_eagle_verify
    eagle_worker_v2.run_eagle_verify = stand_in_verify
    try:
        if not with_frozen_table:  # as before: only the EAGLE worker's table on its class
            own.patches = [p for p in patcher.patches if p.owner is fk.FrozenKVMTPWorkerV2]
            own.restore_all()
        w = bare(fk.FrozenKVMTPWorkerV2, _draft_worker=FrozenDraft(), req_to_token_pool=None,
                 token_to_kv_pool_allocator=None, plan_stream=None, plan_stream_ctx=None,
                 device="cpu")
        out = os.path.join(OUT, f"frozen-{every}-{steps}-{with_frozen_table}")
        with process_state.own_recorder(out, agreement_every=every, step_sample_ratio=1.0) as rec:
            for _ in range(steps):
                b = batch(ForwardMode.DECODE)
                b.spec_info = object()
                w.forward_batch_generation(b)
            rec.agreement.fold()  # CPU tensors: every copy is done
            got = {"comparisons": rec.agreement.drafts // BS,
                   "agreement_per_position": list(rec.agreement.per_position),
                   "steps": dict(rec.steps.counts)}
        if with_frozen_table:
            result["span_worker"].setdefault("FrozenKVMTPWorkerV2", step_span_workers(out))
        return got
    finally:
        eagle_worker_v2.run_eagle_verify = saved


# -- the step span names the worker's own class ------------------------------------------
# StandaloneWorkerV2 inherits EAGLEWorkerV2's (wrapped) step; FROZEN_KV_MTP's own step runs
# EAGLEWorkerV2's step hook (frozen_run below). Both are counted as EAGLEWorkerV2 steps.
result["span_worker"] = {}
for cls_name in ("EAGLEWorkerV2", "StandaloneWorkerV2"):
    mod = modules[ALGORITHMS[0].module if cls_name == "EAGLEWorkerV2" else
                  "sglang.srt.speculative.standalone_worker_v2"]
    cls = getattr(mod, cls_name)
    out = os.path.join(OUT, "span-" + cls_name)
    with process_state.own_recorder(out, step_sample_ratio=1.0) as rec:
        try:
            cls.forward_batch_generation(bare(cls), batch(ForwardMode.DECODE))
        except Exception:  # noqa: BLE001 - the original, on the stub batch
            pass
        counted = dict(rec.steps.counts)
    result["span_worker"][cls_name] = {"spans": step_span_workers(out), "steps": counted}

result["frozen"] = frozen_run(every=4, steps=12, with_frozen_table=True)
result["frozen_every_1"] = frozen_run(every=1, steps=5, with_frozen_table=True)
result["frozen_without_its_table"] = frozen_run(every=4, steps=12, with_frozen_table=False)
# -- multi-layer EAGLE: its own verify (run_eagle_verify stood in), agreement every Nth step -
def multi_layer_run(every: int, steps: int) -> dict:
    from sglang.srt.speculative import multi_layer_eagle_worker_v2 as ml
    saved = ml.run_eagle_verify
    ml.run_eagle_verify = stand_in_verify
    try:
        w = bare(ml.MultiLayerEagleWorkerV2, req_to_token_pool=None,
                 token_to_kv_pool_allocator=None, plan_stream=None, plan_stream_ctx=None,
                 device="cpu")
        with process_state.own_recorder(os.path.join(OUT, f"multi-{every}"), agreement_every=every) as rec:
            for _ in range(steps):
                try:  # its wrapped step counts the step; the original fails on the stub
                    ml.MultiLayerEagleWorkerV2.forward_batch_generation(w, batch(ForwardMode.DECODE))
                except Exception:  # noqa: BLE001
                    pass
                b = batch(ForwardMode.DECODE)
                b.spec_info = FrozenDraft().draft(b)
                w.verify(b)
            rec.agreement.fold()
            return {"comparisons": rec.agreement.drafts // BS,
                    "agreement_per_position": list(rec.agreement.per_position),
                    "steps": dict(rec.steps.counts)}
    finally:
        ml.run_eagle_verify = saved


result["multi_layer"] = multi_layer_run(every=4, steps=12)


# -- DFlash: its real _accept_block, agreement every Nth step ---------------------------
def dflash_run(every: int, steps: int, with_predict: bool) -> dict:
    from sglang.srt.speculative.dflash_worker_v2 import DFlashWorkerV2
    w = bare(DFlashWorkerV2, block_size=N, _selector_sample=None, _use_triton_accept_bonus=False,
             _tp_sync=types.SimpleNamespace(sync=lambda *a, **k: None))
    # drafts [5, 6, 7] after the verified token; the target predicts 5, 9, 7 (then 8):
    # SGLang accepts 1 draft per request, the agreement is 1, 0, 1 per position
    candidates = torch.tensor([[1, 5, 6, 7]] * BS)
    predict = torch.tensor([[5, 9, 7, 8]] * BS)
    logits = torch.nn.functional.one_hot(predict.reshape(-1), 16).float()
    accepted = []
    with process_state.own_recorder(os.path.join(OUT, f"dflash-{every}-{with_predict}"),
                         agreement_every=every) as rec:
        for _ in range(steps):
            try:
                DFlashWorkerV2.forward_batch_generation(w, batch(ForwardMode.DECODE))
            except Exception:  # noqa: BLE001 - the original, on the stub batch
                pass
            accept_len = w._accept_block(
                candidates=candidates, next_token_logits=logits, sampling_info=None,
                draft_input=None, prefix_lens=torch.zeros(BS, dtype=torch.int64), bs=BS,
                target_predict=predict.reshape(-1) if with_predict else None)[0]
            accepted.append(accept_len.tolist())
        rec.agreement.fold()
        return {"comparisons": rec.agreement.drafts // BS,
                "agreement_per_position": list(rec.agreement.per_position),
                "sglang_accept_lens": accepted[0], "steps": dict(rec.steps.counts)}


result["dflash"] = dflash_run(every=4, steps=12, with_predict=True)
result["dflash_logits_only"] = dflash_run(every=4, steps=8, with_predict=False)


# -- UNO: its real greedy accept, the counts as the scheduler hands them over ------------
def uno_counts() -> dict:
    """`UnoWorkerV2._accept_and_pack` (SGLang's greedy accept of linear UNO: the seed, then
    F - 1 proposals, against the target's top-1) on 2 requests, one accepting every
    proposal; the scheduler hands over `accept_lens - num_non_draft_tokens_per_req`
    (`_resolve_spec_v2_tokens`; UNO's results set 2: the seed and the correction)."""
    from sglang.srt.speculative.uno_worker_v2 import UnoWorkerV2
    candidates = torch.tensor([[1, 5, 6, 7], [1, 5, 6, 7]])  # F = N = 4: 3 proposals
    target_top1 = torch.tensor([[5, 6, 7, 8], [5, 9, 7, 8]])  # all 3 accepted; the first only
    _, accept_lens, _, _ = UnoWorkerV2._accept_and_pack(
        candidates=candidates, target_top1=target_top1,
        committed_seq_lens=torch.zeros(BS, dtype=torch.int64))
    counts = [n - 2 for n in accept_lens.tolist()]
    # the fields its constructor sets for linear UNO (top-k 1): F draft tokens, tree depth 1
    w = bare(UnoWorkerV2, speculative_num_draft_tokens=N, speculative_num_steps=1, topk=1)
    with process_state.own_recorder(os.path.join(OUT, "uno-counts")) as rec:
        w.on_verify_complete_cpu(counts, batch_size=BS)
        rec.acceptance.totals.fold()
        a = rec.acceptance.totals
        return {"sglang_accept_lens": accept_lens.tolist(), "counts": counts,
                "drafts": a.drafts, "accepted": a.accepted, "draft_tokens": a.draft_tokens,
                "per_position": list(a.per_position)}


# -- the step hook's audit on a real target whose capture was never switched on: UNO has
# no draft model (its draft pass is the target's own, with UNO's LoRA), so no finding;
# the EAGLE worker with an EAGLE-3 draft on the same target, for contrast, finds one
def audit_findings(cls, label: str, **attrs) -> dict:
    target = fams.build("llama")  # SGLang's real Llama, meta device, no aux capture
    w = bare(cls, _target_worker=types.SimpleNamespace(
        model_runner=types.SimpleNamespace(model=target)), **attrs)
    with process_state.own_recorder(os.path.join(OUT, "audit-" + label)) as rec:
        try:
            cls.forward_batch_generation(w, batch(ForwardMode.DECODE))
        except Exception:  # noqa: BLE001 - the original, on the stub batch
            pass
        return dict(rec.findings.counts)


if UNO in modules:
    result["uno_counts"] = uno_counts()
    result["audit"] = {
        "UnoWorkerV2": audit_findings(modules[UNO].UnoWorkerV2, "uno"),
        "EAGLEWorkerV2": audit_findings(
            eagle_worker_v2.EAGLEWorkerV2, "eagle3",
            _draft_worker=types.SimpleNamespace(
                draft_runner=types.SimpleNamespace(model=fams.build_draft([2, 4, 5]))))}
result["flashinfer_standin"] = {"used": flashinfer.used, "bound_by": flashinfer.bound_by(),
                                "calls": flashinfer.calls,
                                "left_in_sys_modules": "flashinfer" in sys.modules}
result["internal_errors"] = dict(INTERNAL_ERRORS.counts)
print("RESULT " + json.dumps(result))
