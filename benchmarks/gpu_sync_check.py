"""Check on a CUDA machine that spectrace's decode-loop hooks never synchronize the host
with the GPU.

    python benchmarks/gpu_sync_check.py [--steps 64] [--json OUT]

Drives the same steps as overhead.py (spectrace's real hooks, installed by its own
adapters onto stand-ins of SGLang's classes, see tests/kit/stand_ins.py), with CUDA tensors, under
`sync_debug_mode("error")`: any synchronizing CUDA call (`.item()`,
`.tolist()`/`.cpu()` of a device tensor, a blocking copy, `nonzero`, `torch.cuda.synchronize`,
...) raises. A hook's exception is caught by spectrace's guard and counted, so the check
reads spectrace's internal-error counters afterwards; it also fails if the uninstrumented
driver itself synchronizes (then the check would prove nothing).

Worst case for the device: every step sampled as spans and draft/target agreement compared
every step (SPECTRACE_STEP_SAMPLE_RATIO=1, SPECTRACE_AGREEMENT_EVERY=1), then the defaults.
Also checks that the agreement counts arrive through the non-blocking copy (polled event),
and that the draft-width hook counts nothing while a CUDA graph is being captured.

Exit status: 0 no synchronization; 1 a hook synchronized (or failed); 2 no CUDA device.
Without a GPU, `tests/test_no_device_sync.py` checks the same on fake CUDA tensors.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tests.kit import stand_ins as hb  # noqa: E402
from tests.kit import process_state

BATCHES = (1, 32, 256)


def run_steps(step, n: int) -> list[int]:
    pc = time.perf_counter_ns
    out = []
    for _ in range(n):
        t0 = pc()
        step()
        out.append(pc() - t0)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--json", default=None)
    ap.add_argument("--dry-run-cpu", action="store_true",
                    help="exercise this script's logic on CPU tensors (checks nothing)")
    args = ap.parse_args(argv)
    import torch
    dry = args.dry_run_cpu
    if not torch.cuda.is_available() and not dry:
        print("gpu_sync_check: no CUDA device here (torch.cuda.is_available() is False); this "
              "check needs an NVIDIA GPU. On a CPU-only machine run "
              "`pytest tests/test_no_device_sync.py` (same hooks on fake CUDA tensors).",
              file=sys.stderr)
        return 2
    from spectrace.safety import INTERNAL_ERRORS

    dev = "cpu" if dry else "cuda"

    def synchronize() -> None:
        if not dry:
            torch.cuda.synchronize()

    def sync_debug_mode(mode) -> None:
        if not dry:
            torch.cuda.set_sync_debug_mode(mode)

    report = {"device": "cpu (dry run)" if dry else torch.cuda.get_device_name(0),
              "torch": torch.__version__,
              "steps": args.steps, "cases": [], "ok": True}
    problems: list[str] = []

    def errors() -> dict:
        return dict(INTERNAL_ERRORS.counts)

    with tempfile.TemporaryDirectory(prefix="spectrace-gpu-") as tmp:
        for label, cfg in (("every step sampled + agreement every step",
                            {"step_sample_ratio": 1.0, "agreement_every": 1}),
                           ("defaults (Config())", {})):
            with process_state.own_recorder(os.path.join(tmp, label[:8]), **cfg) as rec:
                for bs in BATCHES:
                    t = hb.make_tensors(bs, dev)
                    for worker, cls in (("v2", hb.V2Step), ("v1", hb.V1Step)):
                        base, hooked = cls(bs, None, t), cls(bs, "spectrace", t)
                        for _ in range(8):  # warm up (first pinned allocation, spans)
                            base()
                            hooked()
                        synchronize()
                        before = errors()
                        rec.agreement.fold()  # the warm-up's counts
                        agr_before = rec.agreement.drafts
                        pending_before = len(rec.agreement._pending)
                        case = {"config": label, "worker": worker, "batch": bs}
                        sync_debug_mode("error")
                        try:
                            try:
                                run_steps(base, args.steps)
                            except RuntimeError as exc:
                                problems.append(f"the uninstrumented driver synchronizes: {exc}")
                            times = run_steps(hooked, args.steps)
                        finally:
                            sync_debug_mode(0)
                        after = errors()
                        new = {k: after.get(k, 0) - before.get(k, 0) for k in after
                               if after.get(k, 0) != before.get(k, 0)}
                        case["hook_errors"] = new
                        case["median_step_us"] = statistics.median(times) / 1000
                        if new:
                            problems.append(f"{label}, {worker}, batch {bs}: hooks raised "
                                            f"(synchronization or other) {new}")
                        if worker == "v2" and rec.cfg.agreement_every == 1:
                            queued = len(rec.agreement._pending) - pending_before
                            synchronize()
                            rec.agreement.fold()
                            got = rec.agreement.drafts - agr_before
                            case["agreement_copies"] = queued
                            if queued != args.steps or got != bs * args.steps:
                                problems.append(f"{worker} batch {bs}: {queued} agreement copies "
                                                f"queued, {got} drafts folded; expected "
                                                f"{args.steps} and {bs * args.steps}")
                        base.close()
                        hooked.close()
                        report["cases"].append(case)
                        print(f"{label:45s} {worker} batch {bs:3d}: hook errors {new or 'none'}, "
                              f"median step {case['median_step_us']:.1f} us")
                if dry:
                    continue
                # CUDA-graph capture: the width hook must not count dummy passes
                step = hb.V2Step(8, "spectrace", hb.make_tensors(8, dev))
                d = step.worker.draft_worker
                passes = dict(rec.draft.counts)
                x = torch.zeros(8, device=dev)
                g = torch.cuda.CUDAGraph()
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    x.add_(1)
                torch.cuda.current_stream().wait_stream(s)
                with torch.cuda.graph(g):
                    x.add_(1)
                    d.draft_model.forward(None, None, d.extend_fb)
                step.close()
                if dict(rec.draft.counts) != passes:
                    problems.append("the width hook counted a pass during CUDA-graph capture")
    report["problems"] = problems
    report["ok"] = not problems
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=1)
    if problems:
        print("FAILED:\n  " + "\n  ".join(problems))
        return 1
    if dry:
        print("dry run on CPU: the script's logic ran; nothing about synchronization was "
              "checked")
        return 0
    print("OK: no spectrace hook synchronized the host with the GPU "
          f"({len(report['cases'])} cases x {args.steps} steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
