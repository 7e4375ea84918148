"""spectrace on one NVIDIA GPU: no device synchronization, CUDA-graph decode passes, what
each hook costs next to a real (tiny) draft step, and CUDA-event step timing. One table.

    python benchmarks/gpu_check.py [--wheels DIR] [--require-cuda] [--json OUT]

On a GPU machine with only PyTorch and no network: first, where there is a network,
`benchmarks/gpu_bundle.sh gpu_bundle` writes spectrace's wheel and those of its
dependencies (OpenTelemetry, wrapt) for CPython 3.10 - 3.13 into `gpu_bundle/wheels`; take
the repository checkout and that folder to the GPU machine and run
`python benchmarks/gpu_check.py --wheels gpu_bundle/wheels --require-cuda`. `--wheels`
unpacks the wheels that fit the interpreter into a temporary folder put first on
`sys.path` (no pip, nothing installed). SGLang is not needed: the test kit's stand-in of its
`ForwardMode` is used when SGLang is absent (the header says which). Under 8 minutes on a
GPU (about a minute expected); about 30 s on the CPU.

Parts (one row each check):
1. sync: every spectrace hook and detector that touches tensors, on CUDA tensors, under
   `torch.cuda.set_sync_debug_mode("error")` (a synchronizing call raises; spectrace's
   guard counts it as an internal error), then counted under "warn" (one warning per
   synchronizing call) and, where the profiler sees CUDA, as CUDA runtime synchronizing
   calls; zero expected. A control (`.item()` on a CUDA tensor) shows the counters work.
2. graph: a tiny pure-PyTorch EAGLE-3-shaped draft (`tiny_eagle3.py`: fc over 3 x H aux
   states, one decoder layer, lm_head) with spectrace's wrappers installed, run eagerly,
   then captured in a CUDA graph and replayed: replay gives the eager output, the passes
   and findings come from the eager passes only (capture runs on dummy batches, a replay
   runs no Python), nothing is counted twice.
3. cost: what spectrace's hooks add to one speculative step (the test kit's v2 step, its
   tensors on the device) at batch 1, 32, 256, next to a measured step of the tiny draft
   (eager, and as a graph replay on CUDA), as a ratio.
   The MRV2 case (vLLM's V2 model runner) also times every step with spectrace's CUDA
   events and checks, once they complete, a step, verify, target_forward and draft sample
   per measured step in each batch bucket.
4. events: step times from CUDA events recorded on the stream and read back only once
   `event.query()` is true (no synchronization), against a synchronizing reference
   (`synchronize(); t0; step; synchronize(); t1`), on a graph-replayed step of at least
   1 ms: the medians agree within 5 % or 50 us, whichever is larger. (This measures the
   method the step-cost feature will use; it is not that feature.)
5. capture: a graph capture in PyTorch's default ("global") mode while spectrace's metric
   reader polls a pending agreement copy (`event.query()`) from its own thread; run last.
Without CUDA, parts 1, 4, 5 and the CUDA halves of 2 and 3 print "skipped: no CUDA device"
with the reason; the rest runs on CPU tensors and prints its figures.

Exit status: 0 every check that ran passed; 1 a check failed; 2 `--require-cuda` and no
CUDA device. `tests/test_gpu_check.py` runs it in CPU mode.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
import traceback
import types
import warnings
import zipfile
from collections import deque
from dataclasses import asdict, dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCHES = (1, 32, 256)
SYNC_STEPS = 32          # steps per sync case and batch
EVENT_TOLERANCE = (0.05, 50.0)  # relative, absolute (us): the larger one applies
# CUDA runtime / driver calls that make the host wait for the device
SYNC_CALLS = {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
              "cudaMemcpy", "cudaMemcpy2D", "cuCtxSynchronize", "cuStreamSynchronize",
              "cuEventSynchronize", "cuMemcpyDtoH", "cuMemcpyDtoH_v2"}
SKIPPED = "skipped: no CUDA device"
CONTROL = "control: .item() on a CUDA tensor is caught by the counters"
READBACK = "agreement counts read back (event.query, no wait)"
MRV2_CASE = ("vLLM V2 model runner (MRV2) step: rejection-sampler agreement (argmax), step "
             "cost CUDA events at execute_model / vLLM's forward-start mark / speculator "
             "propose / sample_tokens (every step measured)")


# -- the bundle ---------------------------------------------------------------------------
def _fits(py: str, abi: str, plat: str) -> bool:
    """A wheel's tags fit this interpreter (CPython on Linux, or pure Python)."""
    minor = sys.version_info.minor
    pys = py.split(".")
    if abi == "abi3":
        ok_py = any(p.startswith("cp3") and p[3:].isdigit() and int(p[3:]) <= minor
                    for p in pys)
    else:
        ok_py = any(p in ("py3", f"py3{minor}", f"cp3{minor}") for p in pys)
    ok_abi = abi in ("none", "abi3", f"cp3{minor}")
    plats = plat.split(".")
    ok_plat = "any" in plats or any("linux" in p and platform.machine() in p for p in plats)
    return ok_py and ok_abi and ok_plat


def use_wheels(folder: str) -> list[str]:
    """Unpack the wheels in `folder` that fit this interpreter (binary before pure Python,
    one per distribution) into a temporary folder put first on `sys.path`."""
    if not os.path.isdir(folder):
        raise SystemExit(f"gpu_check: --wheels {folder}: no such folder (make it with "
                         "benchmarks/gpu_bundle.sh)")
    chosen: dict[str, str] = {}
    names = sorted(os.listdir(folder), key=lambda f: (f.endswith("-any.whl"), f))
    for f in names:
        parts = f[:-4].split("-") if f.endswith(".whl") else []
        if len(parts) >= 5 and _fits(*parts[-3:]):
            chosen.setdefault(parts[0].lower().replace("_", "-"), f)
    if "spectrace" not in chosen or "wrapt" not in chosen:
        raise SystemExit(f"gpu_check: --wheels {folder}: expected wheels of spectrace and wrapt "
                         f"for Python 3.{sys.version_info.minor} on {platform.machine()}, "
                         f"found {sorted(chosen.values()) or 'none that fit'}")
    target = tempfile.mkdtemp(prefix="spectrace-gpu-wheels-")
    for f in chosen.values():
        with zipfile.ZipFile(os.path.join(folder, f)) as z:
            z.extractall(target)
    sys.path.insert(0, target)
    return sorted(chosen.values())


# -- the table ----------------------------------------------------------------------------
@dataclass
class Row:
    part: str
    check: str
    status: str            # "ok", "FAILED: ...", "skipped: no CUDA device", "n/a"
    figures: str = ""
    data: dict = field(default_factory=dict)


class Table:
    def __init__(self, no_cuda_reason: str | None) -> None:
        self.rows: list[Row] = []
        self.no_cuda = no_cuda_reason

    def add(self, part: str, check: str, problems: list[str], figures: str = "",
            **data) -> Row:
        status = "ok" if not problems else "FAILED: " + "; ".join(problems)
        row = Row(part, check, status, figures, data)
        self.rows.append(row)
        return row

    def skip(self, part: str, check: str) -> None:
        self.rows.append(Row(part, check, SKIPPED, f"reason: {self.no_cuda}"))

    def failed(self) -> list[Row]:
        return [r for r in self.rows if r.status.startswith("FAILED")]

    def markdown(self) -> str:
        out = ["| part | check | status | figures |", "|---|---|---|---|"]
        for r in self.rows:
            cells = (r.part, r.check, r.status, r.figures)
            out.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
        return "\n".join(out)


def no_cuda_reason(torch) -> str | None:
    if torch.cuda.is_available():
        return None
    build = (f"torch {torch.__version__} is built with CUDA {torch.version.cuda}"
             if torch.version.cuda else f"torch {torch.__version__} is a CPU-only build")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    hidden = f", CUDA_VISIBLE_DEVICES={visible!r}" if visible is not None else ""
    return f"torch.cuda.is_available() is False ({build}{hidden})"


def median_us(ns: list[int]) -> float:
    return statistics.median(ns) / 1000


def run_timed(step, n: int) -> list[int]:
    pc = time.perf_counter_ns
    out = []
    for _ in range(n):
        t0 = pc()
        step()
        out.append(pc() - t0)
    return out


# -- part 1: synchronizations ---------------------------------------------------------------
class SyncCounter:
    """Synchronizations of the host with the device inside a call, three ways: raises
    under `set_sync_debug_mode("error")` (spectrace's guard turns a raise inside a hook
    into an internal-error count), warnings under "warn", and the CUDA runtime's
    synchronizing calls seen by the profiler (None where it sees no CUDA activity)."""

    def __init__(self, torch, profiler: bool = True) -> None:
        self.torch = torch
        self.profiler_offset = None
        if profiler:
            try:
                self.profiler_offset = self._profiled(lambda: None)
            except Exception:  # noqa: BLE001 - no CUPTI: the other two counters remain
                pass

    def _profiled(self, fn) -> int:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fn()
        return sum(1 for e in prof.events() if e.name in SYNC_CALLS)

    def raised(self, fn) -> str | None:
        """The error `fn` raised under "error" mode (None: it did not synchronize, or a
        hook's guard swallowed it: read the internal-error counts as well)."""
        t = self.torch
        t.cuda.set_sync_debug_mode("error")
        try:
            fn()
        except RuntimeError as exc:
            return str(exc).splitlines()[0][:120]
        finally:
            t.cuda.set_sync_debug_mode(0)
        return None

    def warned(self, fn) -> int:
        t = self.torch
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t.cuda.set_sync_debug_mode("warn")
            try:
                fn()
            finally:
                t.cuda.set_sync_debug_mode(0)
        return sum(1 for w in caught if "synchroniz" in str(w.message).lower())

    def profiled(self, fn) -> int | None:
        if self.profiler_offset is None:
            return None
        return self._profiled(fn) - self.profiler_offset


def internal_errors() -> dict:
    from spectrace.safety import INTERNAL_ERRORS
    return dict(INTERNAL_ERRORS.counts)


def new_errors(before: dict) -> dict:
    after = internal_errors()
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


class TreeStep:
    """A v2 step with a draft tree (top-k 4): the test kit's stand-ins, whose `verify` calls
    `_finalize_accept_tree_path` from its module as SGLang 0.5.16+ does, so the tree
    agreement hook (`sglang_v2.VERIFY_COMMON`) runs where it runs in SGLang."""

    TOPK, N = 4, 8   # top-k, draft tokens per request (tree nodes, root first)

    def __init__(self, bs: int, hooks: bool, device: str) -> None:
        import torch
        from tests.kit import stand_ins as hb
        from tests.kit import process_state
        from spectrace.adapters import sglang_eagle3, sglang_v2
        from spectrace.patching import Patcher
        FM = hb.forward_mode()
        n, steps = self.N, hb.STEPS
        common = types.ModuleType("spectrace_bench.eagle_worker_common")

        def _finalize_accept_tree_path(batch, accept_index, accept_lens, predict,
                                       logits_output, bs, *, token_to_kv_pool_allocator,
                                       num_draft_tokens):
            return predict

        common._finalize_accept_tree_path = _finalize_accept_tree_path
        mod, mod3 = hb.make_v2_module(), hb.make_eagle3_module()

        def verify(self, batch, pp_proxy_tensors=None, grammar_barrier=None):
            common._finalize_accept_tree_path(
                batch, None, None, self.predict, None, len(batch.reqs),
                token_to_kv_pool_allocator=None, num_draft_tokens=n)
            return self.result

        mod.EAGLEWorkerV2.verify = verify
        self.patcher = Patcher()
        if hooks:
            self.patcher.apply(mod, sglang_v2.WORKER_POINTS)
            self.patcher.apply(mod3, sglang_eagle3.LLAMA_EAGLE3)
            self.patcher.apply(common, sglang_v2.VERIFY_COMMON)
        t = hb.make_tensors(bs, device)
        w = mod.EAGLEWorkerV2(server_args=None, gpu_id=0, nccl_port=0,
                              target_worker=types.SimpleNamespace(tp_rank=0))
        w.topk, w.speculative_num_draft_tokens = self.TOPK, n
        w.draft_worker = mod.EagleDraftWorker(
            mod3.LlamaModel(), hb._forward_batch(FM.DECODE, t.hidden_decode),
            hb._forward_batch(FM.DRAFT_EXTEND_V2, t.hidden_extend), steps)
        w.predict = torch.zeros(bs * n, dtype=torch.int32, device=device)
        w.result = types.SimpleNamespace(accept_lens=t.accept_lens, next_token_ids=None)
        # node i's first child is i + 1 along the top-1 path, -1 past the last step
        nxt = torch.full((bs, n), -1, dtype=torch.long)
        nxt[:, :steps] = torch.arange(1, steps + 1)
        self.worker = w
        self.batch = types.SimpleNamespace(
            forward_mode=FM.DECODE, is_extend_in_batch=False, reqs=[None] * bs,
            seq_lens=None, spec_info=types.SimpleNamespace(
                draft_token=torch.zeros(bs * n, dtype=torch.long, device=device),
                retrieve_next_token=nxt.to(device)))
        self.lists = hb.accept_lists(bs)
        self.bs, self.i = bs, 0

    def __call__(self) -> None:
        self.worker.forward_batch_generation(self.batch)
        self.i = i = (self.i + 1) & 63
        self.worker.on_verify_complete_cpu(list(self.lists[i]), batch_size=self.bs)

    def close(self) -> None:
        self.patcher.restore_all()


class BypassPasses:
    """Draft-extend passes whose hidden states are one layer wide (H, not 3 x H): the
    fc-bypass finding on every pass (`sglang_eagle3` width hook)."""

    def __init__(self, bs: int, hooks: bool, device: str) -> None:
        import torch
        from tests.kit import stand_ins as hb
        from tests.kit import process_state
        from spectrace.adapters import sglang_eagle3
        from spectrace.patching import Patcher
        mod3 = hb.make_eagle3_module()
        self.patcher = Patcher()
        if hooks:
            self.patcher.apply(mod3, sglang_eagle3.LLAMA_EAGLE3)
        self.model = mod3.LlamaModel()
        hidden = torch.zeros(bs * hb.NUM_DRAFT_TOKENS, hb.DRAFT_HIDDEN, dtype=torch.bfloat16,
                             device=device)
        self.fb = hb._forward_batch(hb.forward_mode().DRAFT_EXTEND_V2, hidden)

    def __call__(self) -> None:
        self.model.forward(None, None, self.fb)

    def close(self) -> None:
        self.patcher.restore_all()


class TinyDraftPasses:
    """The tiny draft's step (real kernels) with or without spectrace's wrappers."""

    def __init__(self, bs: int, hooks: bool, device: str) -> None:
        import torch
        from tests.kit import stand_ins as hb
        from tests.kit import process_state
        from benchmarks import tiny_eagle3 as tiny
        from spectrace.adapters import sglang_eagle3
        from spectrace.patching import Patcher
        mod, draft, _ = tiny.build(device, torch.bfloat16)
        self.patcher = Patcher()
        if hooks:
            self.patcher.apply(mod, sglang_eagle3.LLAMA_EAGLE3)
        self.step = tiny.DraftStep(draft, hb.forward_mode(), bs, device, torch.bfloat16)
        self.no_grad = torch.no_grad

    def __call__(self) -> None:
        with self.no_grad():
            self.step()

    def close(self) -> None:
        self.patcher.restore_all()


def sync_cases():
    """(check, recorder settings, driver(bs, hooks, device), extra check(rec, bs, steps))."""
    from tests.kit import stand_ins as hb
    from tests.kit import process_state

    def v2(bs, hooks, device):
        return hb.V2Step(bs, "spectrace" if hooks else None, hb.make_tensors(bs, device))

    def v1(bs, hooks, device):
        return hb.V1Step(bs, "spectrace" if hooks else None, hb.make_tensors(bs, device))

    def vllm(log_stats, runner="v1"):
        def make(bs, hooks, device):
            return hb.VllmStep(bs, "spectrace" if hooks else None,
                               hb.make_vllm_inputs(bs, device), log_stats=log_stats,
                               runner=runner)
        return make

    every = {"step_sample_ratio": 1.0, "agreement_every": 1}
    return [
        ("SGLang v2 step: step count, spans, chain agreement, accept counts, widths "
         "(every step sampled and compared)", every, v2, True),
        ("SGLang v2 step, default settings", {}, v2, False),
        ("SGLang v1 step (every step sampled)", every, v1, False),
        ("SGLang v2 tree step (top-k 4): tree agreement hook", every,
         lambda bs, hooks, device: TreeStep(bs, hooks, device), True),
        ("vLLM engine step, vLLM stats on: accept counts, _sample agreement (argmax), "
         "combine_hidden_states width", every, vllm(True), True),
        ("vLLM engine step, vLLM stats off (sampled lengths snapshotted)", every, vllm(False),
         True),
        (MRV2_CASE, {**every, "step_cost_every": 1}, vllm(True, "mrv2"), True),
        ("fc bypass: draft-extend pass 1 layer wide, finding each pass", every,
         lambda bs, hooks, device: BypassPasses(bs, hooks, device), False),
        ("tiny draft step (real kernels), width hook on each pass", every,
         lambda bs, hooks, device: TinyDraftPasses(bs, hooks, device), False),
    ]


def part_sync(table: Table, torch, tmp: str) -> None:
    from tests.kit import stand_ins as hb
    from tests.kit import process_state
    cases = [c[0] for c in sync_cases()]
    if table.no_cuda:
        for check in [CONTROL, *cases, READBACK]:
            table.skip("1 sync", check)
        return
    counter = SyncCounter(torch)
    x = torch.ones(4, device="cuda")
    control = (counter.raised(lambda: x.sum().item()), counter.warned(lambda: x.sum().item()),
               counter.profiled(lambda: [x.sum().item() for _ in range(3)]))
    problems = []
    if control[0] is None:
        problems.append("sync debug mode 'error' did not raise on .item()")
    if control[1] < 1:
        problems.append("sync debug mode 'warn' counted no warning for .item()")
    table.add("1 sync", CONTROL, problems, f"error mode raised: {control[0] is not None}; warnings: "
              f"{control[1]}; profiler sync calls for 3 x .item(): "
              f"{'unavailable' if control[2] is None else control[2]}")
    profiler_works = control[2] is not None and control[2] >= 3
    folded_problems, folded = [], []
    for n, (check, cfg, make, queues_agreement) in enumerate(sync_cases()):
        problems, figures = [], []
        with process_state.own_recorder(os.path.join(tmp, f"sync{n}"), **cfg) as rec:
            for bs in BATCHES:
                base, hooked = make(bs, False, "cuda"), make(bs, True, "cuda")
                try:
                    for _ in range(4):  # warm up: first pinned allocation, first spans
                        base()
                        hooked()
                    torch.cuda.synchronize()
                    rec.agreement.fold()
                    drafts0 = rec.agreement.drafts
                    if counter.raised(lambda: run_timed(base, SYNC_STEPS)):
                        problems.append(f"batch {bs}: the uninstrumented driver synchronizes "
                                        "(the check would prove nothing)")
                    errors = internal_errors()
                    exc = counter.raised(lambda: run_timed(hooked, SYNC_STEPS))
                    raised = new_errors(errors)
                    warned = counter.warned(lambda: run_timed(hooked, SYNC_STEPS))
                    prof_hooked = prof_base = None
                    if profiler_works:
                        prof_base = counter.profiled(lambda: run_timed(base, SYNC_STEPS))
                        prof_hooked = counter.profiled(lambda: run_timed(hooked, SYNC_STEPS))
                finally:
                    base.close()
                    hooked.close()
                if exc or raised:
                    problems.append(f"batch {bs}: synchronized under error mode: "
                                    f"{exc or raised}")
                if warned:
                    problems.append(f"batch {bs}: {warned} sync warnings")
                if prof_hooked is not None and prof_hooked > prof_base:
                    problems.append(f"batch {bs}: {prof_hooked} CUDA sync calls "
                                    f"(uninstrumented: {prof_base})")
                if queues_agreement:  # (the metric reader's thread may fold some too)
                    folded.append((check, bs))
                    deadline = time.monotonic() + 5
                    while rec.agreement._pending and time.monotonic() < deadline:
                        counter.raised(rec.agreement.fold)  # polls event.query()
                        time.sleep(0.01)
                    got = rec.agreement.drafts - drafts0
                    # the warn and profiled runs compared steps as well
                    runs = 2 + (1 if profiler_works else 0)
                    if got != bs * SYNC_STEPS * runs:
                        folded_problems.append(f"{check[:24]}, batch {bs}: {got} drafts "
                                               f"folded, expected {bs * SYNC_STEPS * runs}")
                figures.append(f"{bs}: {sum(raised.values()) + bool(exc)}/{warned}/"
                               f"{'-' if prof_hooked is None else prof_hooked}")
            if cfg.get("step_cost_every"):
                problems += step_cost_problems(counter, rec)
        table.add("1 sync", check, problems,
                  "syncs (error-mode raises/warnings/profiler calls) at batch "
                  + ", ".join(figures) + f"; {SYNC_STEPS} steps each")
    table.add("1 sync", READBACK, folded_problems,
              f"{len(folded)} case x batch runs: all counts arrived through the pinned "
              "non-blocking copy, folded while polled under error mode"
              if not folded_problems else "")


def step_cost_problems(counter, rec) -> list[str]:
    """Once the device is idle, the step-cost events of every measured step are read (by
    polling, under error mode): in each batch bucket as many `step`, `verify`,
    `target_forward` and `draft` samples, each phase inside its step and the target's
    forward inside verify."""
    deadline, samples, seconds = time.monotonic() + 5, {}, {}
    while time.monotonic() < deadline:
        rows = []
        counter.raised(lambda: rows.extend(rec.cost.rows()))
        samples = {(k.bucket, k.phase): n for k, _, _, n, *_ in rows}
        seconds = {(k.bucket, k.phase): sec for k, sec, _, _, *_ in rows}
        if samples and not any(c._pending for c in rec.cost._clocks.values()):
            break
        time.sleep(0.01)
    buckets = {b for b, _ in samples}
    problems = [f"bucket {b}: samples {[samples.get((b, p)) for p in PHASES]}"
                for b in sorted(buckets)
                if len({samples.get((b, p)) for p in PHASES}) != 1]
    problems += [f"bucket {b}: verify + draft {seconds[(b, 'verify')] + seconds[(b, 'draft')]}"
                 f" s > step {seconds[(b, 'step')]} s" for b in sorted(buckets)
                 if not problems and seconds[(b, "verify")] + seconds[(b, "draft")]
                 > seconds[(b, "step")]]
    problems += [f"bucket {b}: target_forward {seconds[(b, 'target_forward')]} s > verify "
                 f"{seconds[(b, 'verify')]} s" for b in sorted(buckets)
                 if not problems and seconds[(b, "target_forward")] > seconds[(b, "verify")]]
    if len(buckets) != len(BATCHES):
        problems.append(f"step cost in buckets {sorted(buckets)}, expected one per batch size")
    return problems


PHASES = ("step", "verify", "target_forward", "draft")


# -- last: a runtime's graph capture while the metric reader polls -------------------------
CAPTURE_WHILE_POLLING = ("a runtime's graph capture (PyTorch's default 'global' mode) while "
                         "spectrace's metric reader polls a pending agreement copy from its "
                         "thread")


def part_capture_while_polling(table: Table, torch, tmp: str) -> None:
    """The metric reader thread calls `event.query()` on agreement copies still in flight
    (`AgreementTotals.fold`). Should a runtime capture a CUDA graph in the "global" mode at
    that moment, CUDA may forbid that call from another thread and invalidate the capture.
    Run last: a broken capture must not disturb the other checks."""
    import threading
    from tests.kit import stand_ins as hb
    from tests.kit import process_state
    from benchmarks import tiny_eagle3 as tiny
    from spectrace.rules.tokens import to_host
    if table.no_cuda:
        table.skip("5 capture", CAPTURE_WHILE_POLLING)
        return
    with process_state.own_recorder(os.path.join(tmp, "poll")) as rec, torch.no_grad():
        _, draft, _ = tiny.build("cuda", torch.bfloat16)
        step = tiny.DraftStep(draft, hb.forward_mode(), 8, "cuda", torch.bfloat16)
        step()
        torch.cuda.synchronize()
        errors = internal_errors()
        seen: list[str] = []

        def reader() -> None:
            try:
                rec.agreement.fold()
            except Exception as exc:  # noqa: BLE001 - what the reader's guard would count
                seen.append(f"fold raised {str(exc).splitlines()[0][:100]}")

        def captured():
            out = step()
            t = threading.Thread(target=reader)
            t.start()
            t.join()
            return out

        # a copy queued by a compared step just before (its event done or not: polled)
        rec.agreement.add(*to_host(torch.ones(3, dtype=torch.long, device="cuda")), 1)
        try:
            capture(torch, captured, warmup=0)
        except RuntimeError as exc:
            seen.append(f"capture failed: {str(exc).splitlines()[0][:100]}")
        try:
            torch.cuda.synchronize()
            rec.agreement.fold()
        except RuntimeError as exc:
            seen.append(f"afterwards: {str(exc).splitlines()[0][:100]}")
        problems = seen + ([f"hook errors {new_errors(errors)}"] if new_errors(errors) else [])
    table.add("5 capture", CAPTURE_WHILE_POLLING, problems,
              "capture and the reader's poll both went through" if not problems else
              "a real hazard: the reader must not poll while a runtime captures")


def part_nonfinite(table: Table) -> None:
    table.rows.append(Row("1 sync", "non-finite checks on tensors", "n/a",
                          "spectrace has no hook that checks tensor values for nan/inf "
                          "(only shapes and token ids are read); nothing to check"))


# -- part 2: the tiny draft, eager and in a CUDA graph ------------------------------------
def part_graph(table: Table, torch, tmp: str) -> None:
    from tests.kit import stand_ins as hb
    from tests.kit import process_state
    from benchmarks import tiny_eagle3 as tiny
    from spectrace import signals
    from spectrace.adapters import sglang_eagle3, vllm_eagle3
    from spectrace.patching import Patcher
    FM = hb.forward_mode()
    cuda = table.no_cuda is None
    device, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    H, AUX = tiny.HIDDEN, tiny.NUM_AUX * tiny.HIDDEN
    dd, tf, tf1 = ((signals.PASS_DRAFT_DECODE, H), (signals.PASS_TARGET_FED, AUX),
                   (signals.PASS_TARGET_FED, H))
    bs, n = 8, 3
    with process_state.own_recorder(os.path.join(tmp, "graph")) as rec, torch.no_grad():
        mod, draft, vdraft = tiny.build(device, dtype)
        step = tiny.DraftStep(draft, FM, bs, device, dtype)
        plain = step()  # before the wrappers
        patcher = Patcher()
        patcher.apply(mod, sglang_eagle3.LLAMA_EAGLE3)
        patcher.apply(mod, vllm_eagle3.LLAMA_EAGLE3)
        try:
            errors = internal_errors()
            passes0 = dict(rec.draft.counts)
            outs = [step() for _ in range(n)]
            eager = {k: v - passes0.get(k, 0) for k, v in rec.draft.counts.items()
                     if v != passes0.get(k, 0)}
            problems = []
            want = {dd: (tiny.STEPS - 1) * n, tf: n}
            if eager != want:
                problems.append(f"passes counted {eager}, expected {want}")
            diff = max(float((o[1].float() - plain[1].float()).abs().max()) for o in outs)
            if diff > 1e-3:
                problems.append(f"the wrapped draft's output differs from the unwrapped one "
                                f"by up to {diff:.3g}")
            if not all(torch.isfinite(o[1]).all() for o in outs):
                problems.append("non-finite logits")
            comb = vdraft.combine_hidden_states(step.extend.spec_info.hidden_states)
            if rec.draft.counts.get(tf, 0) - passes0.get(tf, 0) != n + 1 or comb.shape[-1] != H:
                problems.append("vLLM combine_hidden_states pass not counted once")
            if new_errors(errors):
                problems.append(f"hook errors {new_errors(errors)}")
            if rec.draft.expected.get("fc_in") != AUX:
                problems.append(f"expected widths {rec.draft.expected}")
            t = median_us(run_timed(step, 3))
            table.add("2 graph", f"tiny draft step, wrappers installed, eager ({device}, "
                      f"batch {bs})", problems,
                      f"{n} steps: passes {fmt_passes(eager)} + 1 vLLM combine "
                      f"(target_fed/{AUX}); output vs unwrapped max abs diff {diff:.2g}; "
                      f"expected fc_in {rec.draft.expected.get('fc_in')}; step {t:.0f} us")
            # fc bypass, eager: one finding per pass
            bypass = tiny.DraftStep(draft, FM, bs, device, dtype, bypass=True)
            found0 = rec.findings.counts.get(signals.FC_BYPASS, 0)
            for _ in range(n):
                bypass()
            found = rec.findings.counts.get(signals.FC_BYPASS, 0) - found0
            table.add("2 graph", "fc bypass on the tiny draft, eager (1 layer, H wide, to "
                      "the draft extend)", [] if found == n and rec.draft.counts.get(tf1) == n
                      else [f"{found} fc_bypass findings, {rec.draft.counts.get(tf1)} passes "
                            f"target_fed/{H}; expected {n} each"],
                      f"{found} fc_bypass findings for {n} bypassed passes")
            if not cuda:
                table.skip("2 graph", "CUDA graph capture + replay with the wrappers "
                           "installed: counts from eager passes only")
                table.skip("2 graph", "fc bypass inside a captured graph: no finding from "
                           "capture or replay")
                return
            graph_checks(table, torch, rec, step, bypass, vdraft, n, (dd, tf, tf1))
        finally:
            patcher.restore_all()


def fmt_passes(passes: dict) -> str:
    return ", ".join(f"{k}/{w}: {v}" for (k, w), v in sorted(passes.items()))


def capture(torch, fn, warmup: int = 2, mode: str = "global"):
    """A CUDA graph of `fn` (warmed up on a side stream first, as PyTorch asks) and the
    output tensors the graph writes. `mode`: PyTorch's `capture_error_mode` ("global", its
    default, forbids other threads' unsafe CUDA calls during the capture)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, capture_error_mode=mode):
        out = fn()
    return g, out


def graph_checks(table: Table, torch, rec, step, bypass, vdraft, n, keys) -> None:
    from spectrace import signals
    dd, tf, tf1 = keys
    problems = []
    p0 = dict(rec.draft.counts)
    s = torch.cuda.Stream()  # warm up on a side stream: eager passes, counted
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(s)
    p1 = dict(rec.draft.counts)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_out = step()
        vdraft.combine_hidden_states(step.extend.spec_info.hidden_states)
    p2 = dict(rec.draft.counts)
    diffs = []
    for seed in range(1, 6):
        step.refill(seed)
        g.replay()
        torch.cuda.synchronize()
        eager = step()  # same inputs, eager (counted)
        diffs.append(float((static_out[1].float() - eager[1].float()).abs().max()))
    p3 = dict(rec.draft.counts)
    for _ in range(20):
        g.replay()
    torch.cuda.synchronize()
    p4 = dict(rec.draft.counts)

    def delta(a, b):
        return {k: v - a.get(k, 0) for k, v in b.items() if v != a.get(k, 0)}

    if delta(p0, p1) != {dd: 4, tf: 2}:
        problems.append(f"side-stream warm-up counted {delta(p0, p1)}")
    if delta(p1, p2):
        problems.append(f"capture counted {delta(p1, p2)}")
    if delta(p2, p3) != {dd: 10, tf: 5}:
        problems.append(f"5 replays + 5 eager steps counted {delta(p2, p3)} (only the "
                        "eager ones should count)")
    if delta(p3, p4):
        problems.append(f"20 replays counted {delta(p3, p4)}")
    if max(diffs) > 0.05:
        problems.append(f"replay output differs from eager by up to {max(diffs):.3g}")
    table.add("2 graph", "CUDA graph capture + replay with the wrappers installed: counts "
              "from eager passes only", problems,
              f"warm-up {fmt_passes(delta(p0, p1))}; capture {fmt_passes(delta(p1, p2)) or 0}; "
              f"5 replays + 5 eager {fmt_passes(delta(p2, p3))}; 20 replays "
              f"{fmt_passes(delta(p3, p4)) or 0}; replay vs eager max abs diff {max(diffs):.2g}")
    # fc bypass inside a graph
    f0 = rec.findings.counts.get(signals.FC_BYPASS, 0)
    gb, _ = capture(torch, bypass, warmup=1)
    f1 = rec.findings.counts.get(signals.FC_BYPASS, 0)
    for _ in range(10):
        gb.replay()
    torch.cuda.synchronize()
    f2 = rec.findings.counts.get(signals.FC_BYPASS, 0)
    problems = []
    if f1 - f0 != 1:
        problems.append(f"{f1 - f0} findings from 1 eager warm-up pass + capture (expected 1)")
    if f2 != f1:
        problems.append(f"{f2 - f1} findings from 10 replays")
    table.add("2 graph", "fc bypass inside a captured graph: no finding from capture or "
              "replay", problems, f"findings: warm-up + capture {f1 - f0}, 10 replays "
              f"{f2 - f1}")


# -- part 3: hook cost next to a tiny-draft step ------------------------------------------
def hook_cost_us(torch, bs: int, device: str, rounds: int, steps: int) -> float:
    """Median over interleaved rounds of (median hooked step - median bare step), us:
    the test kit's v2 step, its tensors on `device`, `Config()` defaults."""
    from tests.kit import stand_ins as hb
    from tests.kit import process_state
    t = hb.make_tensors(bs, device)
    base, hooked = hb.V2Step(bs, None, t), hb.V2Step(bs, "spectrace", t)
    try:
        run_timed(base, 50)
        run_timed(hooked, 50)
        diffs = []
        for r in range(rounds):
            order = (base, hooked) if r % 2 == 0 else (hooked, base)
            med = {id(s): median_us(run_timed(s, steps)) for s in order}
            diffs.append(med[id(hooked)] - med[id(base)])
        return statistics.median(diffs)
    finally:
        base.close()
        hooked.close()


def tiny_step_us(torch, step, device: str, n: int) -> float:
    """A tiny-draft step's time: median per step on the CPU; on CUDA the mean over `n`
    back-to-back steps between two synchronizations (device time plus launches)."""
    with torch.no_grad():
        step()
        if device == "cpu":
            return median_us(run_timed(step, n))
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        for _ in range(n):
            step()
        torch.cuda.synchronize()
        return (time.perf_counter_ns() - t0) / n / 1000


def part_cost(table: Table, torch, tmp: str, graphs: dict) -> None:
    from tests.kit import stand_ins as hb
    from tests.kit import process_state
    from benchmarks import tiny_eagle3 as tiny
    FM = hb.forward_mode()
    cuda = table.no_cuda is None
    with process_state.own_recorder(os.path.join(tmp, "cost")) as rec:
        for device in ("cpu", "cuda"):
            if device == "cuda" and not cuda:
                for bs in BATCHES:
                    table.skip("3 cost", f"hooks vs tiny draft step, CUDA tensors, batch {bs}")
                continue
            dtype = torch.bfloat16 if device == "cuda" else torch.float32
            _, draft, _ = tiny.build(device, dtype)
            for bs in BATCHES:
                hook = hook_cost_us(torch, bs, device, rounds=6, steps=300)
                step = tiny.DraftStep(draft, FM, bs, device, dtype)
                eager = tiny_step_us(torch, step, device, 20 if device == "cuda" else
                                     (3 if bs == 256 else 8))
                figures = (f"hooks add {hook:.1f} us/step; tiny draft step eager "
                           f"{eager:.0f} us; ratio {100 * hook / eager:.2g} %")
                data = {"hook_us": hook, "eager_step_us": eager}
                problems = [] if math.isfinite(hook) and eager > 0 else ["no figure"]
                if device == "cuda":
                    torch.cuda.synchronize()
                    rec.agreement.fold()  # the hook runs' copies: none left for the reader
                    with torch.no_grad():
                        g, _ = capture(torch, step, mode="thread_local")
                    graphs[bs] = (g, step)
                    replay = tiny_step_us(torch, g.replay, device, 50)
                    figures += (f"; as a graph replay {replay:.0f} us, ratio "
                                f"{100 * hook / replay:.2g} %")
                    data["graph_step_us"] = replay
                table.add("3 cost", f"hooks vs tiny draft step, {device.upper()} tensors, "
                          f"batch {bs}", problems, figures, **data)


# -- part 4: CUDA-event step timing --------------------------------------------------------
def part_events(table: Table, torch, graphs: dict) -> None:
    check = ("step time from CUDA events polled with event.query() vs a synchronizing "
             "reference (graph-replayed step >= 1 ms)")
    if table.no_cuda:
        table.skip("4 events", check)
        return
    g, _ = graphs[max(graphs)]
    one = statistics.median(sync_times(torch, g.replay, 20))
    reps = max(1, math.ceil(1000 / one))

    def step():
        for _ in range(reps):
            g.replay()

    counter = SyncCounter(torch, profiler=False)
    ref, in_ref, polled, raised = [], [], [], []
    for _ in range(5):  # interleaved blocks: clock changes hit both alike
        ref += sync_times(torch, step, 20, events_out=in_ref)
        torch.cuda.synchronize()
        exc = counter.raised(lambda: polled.extend(event_times(torch, step, 20)))
        if exc:
            raised.append(exc)
    r, p, e = (statistics.median(v) for v in (ref, polled, in_ref))
    rel, absolute = EVENT_TOLERANCE
    tol = max(rel * r, absolute)
    problems = []
    if raised:
        problems.append(f"the polled-event loop synchronized: {raised[0]}")
    if abs(p - r) > tol:
        problems.append(f"polled events {p:.1f} us vs reference {r:.1f} us: off by "
                        f"{abs(p - r):.1f} us > {tol:.1f} us")
    table.add("4 events", check, problems,
              f"step = {reps} replays at batch {max(graphs)}; median us: synchronizing "
              f"reference {r:.1f}, events in that loop {e:.1f}, polled events (no sync) "
              f"{p:.1f}; difference {p - r:+.1f} us, tolerance {tol:.1f} us "
              f"(max of {rel:.0%}, {absolute:.0f} us); {len(polled)} steps each",
              reference_us=r, events_in_reference_us=e, polled_events_us=p, tolerance_us=tol)


def sync_times(torch, step, n: int, events_out: list | None = None) -> list[float]:
    """The synchronizing reference: wall time of each step between synchronizations (us);
    the step's events as well, read after the synchronize, into `events_out`."""
    out = []
    for _ in range(n):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        start.record()
        step()
        end.record()
        torch.cuda.synchronize()
        out.append((time.perf_counter_ns() - t0) / 1000)
        if events_out is not None:
            events_out.append(start.elapsed_time(end) * 1000)
    return out


def event_times(torch, step, n: int) -> list[float]:
    """The method under test: events recorded around each step on the current stream, the
    host never waits; a step's time is read once its end event reports done."""
    pending, out = deque(), []

    def drain() -> None:
        while pending and pending[0][1].query():
            s, e = pending.popleft()
            out.append(s.elapsed_time(e) * 1000)

    for _ in range(n):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        pending.append((start, end))
        drain()
    while pending:
        drain()
        time.sleep(0.0002)
    return out


# -- main ------------------------------------------------------------------------------------
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wheels", help="folder of wheels from benchmarks/gpu_bundle.sh")
    ap.add_argument("--require-cuda", action="store_true",
                    help="exit 2 when there is no CUDA device (for the GPU run)")
    ap.add_argument("--json", help="also write the table and figures here")
    args = ap.parse_args(argv)
    started = time.monotonic()
    wheels = use_wheels(args.wheels) if args.wheels else []
    if ROOT not in sys.path:
        sys.path.insert(len(wheels) and 1, ROOT)
    import torch
    os.environ.pop("SPECTRACE_ENABLED", None)  # the script installs the wrappers itself
    from opentelemetry.sdk import version as otel_sdk
    import wrapt

    import spectrace
    from tests.kit import stand_ins as hb
    from tests.kit import process_state
    reason = no_cuda_reason(torch)
    if reason and args.require_cuda:
        print(f"gpu_check: --require-cuda: {SKIPPED}: {reason}", file=sys.stderr)
        return 2
    fm = hb.forward_mode()
    header = {
        "device": torch.cuda.get_device_name(0) if reason is None else "cpu",
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "spectrace": os.path.dirname(spectrace.__file__),
        "wrapt": f"{wrapt.__version__} from {os.path.dirname(wrapt.__file__)}",
        "opentelemetry-sdk": f"{otel_sdk.__version__} from "
                             f"{os.path.dirname(os.path.dirname(otel_sdk.__file__))}",
        "forward_mode": "SGLang's" if fm is not hb.ForwardModeStandIn
        else "stand_ins.ForwardModeStandIn (SGLang not installed)",
        "wheels": wheels, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    for k, v in header.items():
        print(f"{k}: {v}")
    # one intra-op thread for the CPU figures: with one per core, OpenMP workers
    # spin-wait for each other and a busy neighbour changes a CPU step's time tenfold
    torch.set_num_threads(1)
    header["cpu_threads"] = 1
    print("cpu_threads: 1")
    if reason:
        print(f"{SKIPPED}: {reason}; the CUDA parts are skipped, the CPU parts run")
    table = Table(reason)
    graphs: dict = {}
    with tempfile.TemporaryDirectory(prefix="spectrace-gpu-check-") as tmp:
        for part, run in (("1 sync", lambda: part_sync(table, torch, tmp)),
                          ("1 sync", lambda: part_nonfinite(table)),
                          ("2 graph", lambda: part_graph(table, torch, tmp)),
                          ("3 cost", lambda: part_cost(table, torch, tmp, graphs)),
                          ("4 events", lambda: part_events(table, torch, graphs)),
                          ("5 capture", lambda: part_capture_while_polling(table, torch, tmp))):
            try:
                run()
            except Exception as exc:  # noqa: BLE001 - one broken part must not hide the rest
                traceback.print_exc()
                table.add(part, "the part itself", [f"raised {exc!r}"[:300]])
        process_state.shutdown_recorder()
        from spectrace.export import final_flush
        final_flush.uninstall()  # no exit-time snapshot into the removed folder
    elapsed = time.monotonic() - started
    print()
    print(table.markdown())
    failed = table.failed()
    print(f"\n{len(table.rows)} rows: {len(failed)} failed, "
          f"{sum(r.status == SKIPPED for r in table.rows)} skipped (no CUDA device); "
          f"{elapsed:.0f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({**header, "seconds": elapsed, "rows": [asdict(r) for r in table.rows]},
                      fh, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
