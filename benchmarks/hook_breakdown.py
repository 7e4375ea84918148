"""Where a step's hook cost goes: each hooked method called alone, wrapped vs unwrapped,
on the same stand-ins as overhead.py (default Config()). Median ns per call
(including the ~50 ns of the timer itself, on both sides).

    python benchmarks/hook_breakdown.py [--batch 256] [--n 20000]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tests.kit import stand_ins as hb  # noqa: E402
from tests.kit import process_state


def med_ns(fn, n: int) -> float:
    """Median of per-call times (each call timed alone, so sampled steps and the
    every-16th agreement step do not move it)."""
    pc = time.perf_counter_ns
    out = []
    for _ in range(n):
        t0 = pc()
        fn()
        out.append(pc() - t0)
    return statistics.median(out)


def calls(step: hb.V2Step) -> dict:
    w, d, b = step.worker, step.worker.draft_worker, step.batch
    fb_dec, fb_ext = d.decode_fb, d.extend_fb
    lst = step.lists[0]
    m = d.draft_model
    from spectrace import signals
    from spectrace.process import STATE

    def bump() -> None:  # what the step hook does: the verify hook reads the step count
        steps = STATE.recorder.steps.counts
        steps[signals.WORKER_V2] = steps.get(signals.WORKER_V2, 0) + 1

    return {
        "forward_batch_generation (whole step body)": lambda: w.forward_batch_generation(b),
        "draft (incl. 2 draft forwards)": lambda: d.draft(b),
        "verify (1 in 16 compares draft/target tokens)": lambda: (bump(), w.verify(b)),
        "_draft_extend_for_decode (incl. 1 forward)": lambda: d._draft_extend_for_decode(b, None),
        "on_verify_complete_cpu": lambda: w.on_verify_complete_cpu(lst, batch_size=step.bs),
        "LlamaModel.forward DECODE": lambda: m.forward(None, None, fb_dec),
        "LlamaModel.forward DRAFT_EXTEND_V2": lambda: m.forward(None, None, fb_ext),
        "_resolve_spec_v2_tokens (context buckets; incl. on_verify_complete_cpu)":
            lambda: (setattr(step.processor, "counts", list(lst)),
                     step.processor._resolve_spec_v2_tokens(w.result, b)),
        "_prepare_kv_cache_release (1 finished request)":
            lambda: step.processor._prepare_kv_cache_release(step.finished),
        "full step": step,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--n", type=int, default=20000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        process_state.ensure_recorder(tmp)
        t = hb.make_tensors(a.batch)
        base, inst = hb.V2Step(a.batch, None, t), hb.V2Step(a.batch, "spectrace", t)
        cb, ci = calls(base), calls(inst)
        print(f"load {os.getloadavg()}; batch {a.batch}; median ns per call")
        print(f"{'call':50s} {'plain':>8s} {'hooked':>8s} {'added':>8s}")
        for k in cb:
            p, h = med_ns(cb[k], a.n), med_ns(ci[k], a.n)
            print(f"{k:50s} {p:8.0f} {h:8.0f} {h - p:8.0f}")
        base.close()
        inst.close()
        process_state.shutdown_recorder()


if __name__ == "__main__":
    main()
