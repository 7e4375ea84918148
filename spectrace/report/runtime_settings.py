"""The runtimes' settings the advisor names (`spectrace.report.advisor`), exactly as the runtimes read
them (their released sources; docs/advisor.md has where):

- a fixed number of chain draft tokens K: SGLang `--speculative-num-steps K
  --speculative-eagle-topk 1 --speculative-num-draft-tokens K+1`; vLLM `num_speculative_tokens`
  in `--speculative-config`;
- K by batch size, 0 switching speculation off:
  - SGLang 0.5.16+ (`srt/speculative/adaptive_spec_params.py`): `--speculative-adaptive
    --speculative-adaptive-config FILE`, FILE a JSON object whose keys are batch sizes, each
    `{"candidate_steps": [...]}` (0 allowed: "A zero-step candidate disables drafting"); a
    batch goes to the largest key not above its size (`_find_closest_bs`); a single candidate
    keeps that K. `--speculative-num-steps` must be one of the candidates
    (`_init_adaptive_speculative_params`). EAGLE / EAGLE3 with top-k 1 only. SGLang 0.5.12's
    adaptive config has no batch-size keys.
  - vLLM 0.26+ (`config/speculative.py`, `v1/spec_decode/dynamic/utils.py`):
    `"num_speculative_tokens_per_batch_size": [[first, last, K], ...]` in
    `--speculative-config`, inclusive ranges from batch 1, K >= 0, capped at
    `num_speculative_tokens`; the last range's K carries on to larger batches.
"""
from __future__ import annotations

import json

from .. import names
from ..families.step_cost import BUCKET_INDEX
from ..rules.speculation import speculation_off


def fixed_k(runtime: str | None, num_steps: int) -> str:
    """The exact flags that serve `num_steps` chain draft tokens (0: no speculation). The
    words follow "serve with" in the findings' fixes (`messages.report.ADVICE_BEST`)."""
    if num_steps == 0:
        return f"no speculation ({speculation_off(runtime)})"
    if runtime == names.RUNTIME_VLLM:
        return (f"--speculative-config '{{..., \"num_speculative_tokens\": {num_steps}}}' "
                f"(num_speculative_tokens={num_steps}, other keys unchanged)")
    return (f"--speculative-num-steps {num_steps} --speculative-eagle-topk 1 "
            f"--speculative-num-draft-tokens {num_steps + 1}")


def _ranges(best: list[tuple[str, int]]) -> list[tuple[int, int, int]]:
    """(first batch size, last, K) of runs of buckets with the same best K, in order; the
    first starts at 1 and each runs up to the next's start."""
    runs: list[list[int]] = []
    for label, k in sorted(best, key=lambda x: BUCKET_INDEX.get(x[0], 99)):
        lo = 1 << BUCKET_INDEX[label]
        if runs and runs[-1][2] == k:
            continue
        runs.append([lo, lo, k])
    runs[0][0] = 1
    last = (1 << (BUCKET_INDEX[max((b for b, _ in best), key=BUCKET_INDEX.get)] + 1)) - 1
    for i, run in enumerate(runs):
        run[1] = runs[i + 1][0] - 1 if i + 1 < len(runs) else max(last, run[0])
    return [tuple(r) for r in runs]


def by_batch_size(runtime: str | None, best: list[tuple[str, int]]) -> str | None:
    """The setting that serves each batch-size bucket's best K (`best`: (bucket label, K)
    pairs, K 0 = no speculation), or None when one K is best everywhere (`fixed_k` says
    it) or no bucket is known."""
    best = [(b, k) for b, k in best if b in BUCKET_INDEX]
    if len({k for _, k in best}) < 2:
        return None
    runs = _ranges(best)
    top = max(k for _, _, k in runs)
    if runtime == names.RUNTIME_VLLM:
        schedule = json.dumps([[lo, hi, k] for lo, hi, k in runs])
        return (f"vLLM 0.26+: --speculative-config '{{..., \"num_speculative_tokens\": {top}, "
                f"\"num_speculative_tokens_per_batch_size\": {schedule}}}'")
    config = json.dumps({str(lo): {"candidate_steps": [k]} for lo, _, k in runs})
    return (f"SGLang 0.5.16+: --speculative-adaptive --speculative-adaptive-config FILE "
            f"--speculative-num-steps {top} --speculative-eagle-topk 1, FILE holding {config}")


def describe(best: list[tuple[str, int]]) -> str:
    """'batch 1: K=1, 2-3: K=1, 4-7: off' for the text views."""
    return ", ".join(f"{label}: {'off' if k == 0 else f'K={k}'}"
                     for label, k in sorted(best, key=lambda x: BUCKET_INDEX.get(x[0], 99)))

