"""`check_pair(target_model, draft_model)`: the run-time audit of a loaded target + EAGLE-3
draft pair as a library call, for people who build the runtime's models themselves (tests,
CI, notebooks) and want to assert a healthy pair before serving.

    import spectrace
    findings = spectrace.check_pair(model_runner.model, draft_model_runner.model)  # SGLang
    findings = spectrace.check_pair(runner.get_model(), runner.drafter.model)     # vLLM
    assert not [f for f in findings if f.severity == "error"], findings

The same checks run inside instrumented servers: at SGLang's eagle worker's first step,
when vLLM's model runner has loaded both models.
"""
from __future__ import annotations

from .findings import Finding


def check_pair(target_model, draft_model, algorithm: str | None = None) -> list[Finding]:
    """Findings for a loaded target model and draft model of the same runtime: the
    target's aux hidden-state capture against what the draft expects (capture on, layer
    count, layer ids by the target family's own rule; SGLang's DFlash / DSpark drafts in
    their own convention). Empty when healthy, and for drafts that read no aux states
    (MTP / NextN). `algorithm`: the runtime's speculative algorithm
    setting, when known (SGLang's --speculative-algorithm, vLLM's speculative method; it
    names the cause when capture is off)."""
    module = type(target_model).__module__
    if module.startswith("sglang."):
        from .adapters import sglang_dflash
        if sglang_dflash.is_block_draft(draft_model):  # DFlash / DSpark: their convention
            return sglang_dflash.audit_pair(target_model, draft_model,
                                            sglang_dflash.algorithm_of(draft_model, algorithm))
        from .adapters.sglang_target import audit_pair
        return audit_pair(target_model, draft_model, algorithm)
    if module.startswith("vllm."):
        from .adapters.vllm_target import audit_pair as audit_vllm_pair
        return audit_vllm_pair(target_model, draft_model, algorithm)
    raise TypeError(f"check_pair: target_model is a {type(target_model).__qualname__} from "
                    f"{module!r}; expected a model object of a supported runtime (SGLang, "
                    f"vLLM)")
