"""What an acceptance figure means under the verification in use (issue 48). The server
setting `spec_verification` (`server_settings`, read at start-up) says how drafts are
verified:

- lossless: the output is the target's own and acceptance is the draft's agreement with
  it: vLLM `standard` (0.22+), `strict` and `probabilistic` (0.18 - 0.20), `block` (0.26+:
  block verification, Sun et al. 2024, arXiv 2403.10444, which keeps the target's
  distribution); SGLang `standard` (its own check), `rejection sampling` (0.5.16+), `block`
  (0.5.23). Block verification and probabilistic rejection accept more than token-by-token
  or strict verification under sampling by construction (the same under greedy), so a
  comparison across methods is not the draft's change alone.
- lossy: the server accepts draft tokens the target would not have produced, so its
  acceptance is higher than the draft earns and not comparable with standard
  verification's: vLLM `fly` (0.33: FLy's entropy-gated deferral of rejections; vLLM logs
  "FLy verification is a lossy speculative decoding method"), SGLang `relaxed (...)`
  (`speculative_accept_threshold_single` or `_acc` below 1: lossy for sampled requests;
  SGLang 0.5.23 verifies all-greedy batches, and every batch on CPU or XPU, by argmax).
- `synthetic` (vLLM) is no verification at all: `rules.synthetic` raises an error for it.

Pure functions over the settings' values (a list where processes differ).
"""
from __future__ import annotations

from ..findings import INFO, Finding, FindingSpec
from ..messages import Message

CODE = "acceptance.lossy_verification"
LOSSY_VLLM = ("fly",)
RELAXED = "relaxed"  # SGLang's value with an accept threshold below 1 ("relaxed (...)")
# each lossless method as the settings spell it (both runtimes, lower case)
LOSSLESS = ("standard", "strict", "probabilistic", "block", "rejection sampling")
KEY = "spec_verification"

SPEC = FindingSpec(
    CODE, INFO,
    "drafts are verified by a lossy method (vLLM's FLy, SGLang's accept thresholds below "
    "1): it accepts draft tokens the target would not have produced, so acceptance is not "
    "comparable with standard verification's (named in the verdict and in comparisons)",
    floor="the setting, read once at start-up",
    message=Message(
        CODE,
        "drafts are verified by {method}, a lossy verification: it accepts draft tokens the "
        "target would not have produced, so acceptance under it is higher than the draft "
        "earns and is not comparable with standard verification's.",
        "compare acceptance only with runs under the same verification; for the target's "
        "own output, serve with {standard}"))


def lossy(method) -> bool:
    """Whether a `spec_verification` value is a lossy verification."""
    m = str(method or "").lower()
    return m in LOSSY_VLLM or m.startswith(RELAXED)


def words(method) -> str:
    """'FLy (rejection_sample_method "fly")'; SGLang's relaxed thresholds with where they
    apply (its sampling verify: an all-greedy batch, and any on CPU or XPU, is verified
    by the target's argmax, `eagle_utils._verify_uses_greedy`); else the value."""
    if str(method).lower() in LOSSY_VLLM:
        return f'FLy (rejection_sample_method "{method}")'
    if str(method).lower().startswith(RELAXED):
        return f"{method}, for sampled requests on GPUs"
    return str(method)


def _standard(method) -> str:
    if str(method).lower() in LOSSY_VLLM:
        return 'rejection_sample_method "standard"'
    return "--speculative-accept-threshold-single 1 --speculative-accept-threshold-acc 1"


def _values(value) -> list:
    return list(value) if isinstance(value, list) else [] if value is None else [value]


def judge(settings) -> Finding | None:
    """The finding when a process of the view verifies lossily (the settings of a view:
    a value, or the list of values where its processes differ)."""
    found = [v for v in _values(settings.get(KEY)) if lossy(v)]
    if not found:
        return None
    method = " and ".join(words(v) for v in found)
    note = (f"acceptance under lossy verification ({method}) is not comparable with "
            f"standard verification's")
    return SPEC.found({"method": found, "verdict_note": note}, method=method,
                      standard=" / ".join(_standard(v) for v in found))


def comparison_note(baseline, current) -> str | None:
    """The clause a comparison adds when the two runs verify differently, or None (the
    same method, or one run's not recorded)."""
    b, c = _values(baseline), _values(current)
    if not b or not c or [str(x).lower() for x in b] == [str(x).lower() for x in c]:
        return None
    lossy_side = [words(v) for v in b + c if lossy(v)]
    if lossy_side:
        return (f"acceptance under lossy verification ({' and '.join(lossy_side)}) is not "
                f"comparable with standard verification's")
    return ("the runs verify drafts differently (" + "/".join(map(str, b)) + " -> "
            + "/".join(map(str, c)) + "): under sampling acceptance depends on the method "
            "(block verification accepts more than token-by-token by construction), so the "
            "change is not the draft's alone")
