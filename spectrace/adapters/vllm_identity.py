"""Who a vLLM process is, for its resource attributes: the runtime, its role (the
EngineCore that schedules, or a worker that runs the models), its ranks, the served model,
the draft and the speculative method, and the Prometheus port it takes.

vLLM runs speculative decoding in two kinds of process: the EngineCore counts accepted
tokens in its scheduler, and each worker runs the target and the draft. Each exports its
own signals. The EngineCore counts each request-step once (one EngineCore per
data-parallel rank); the workers of one engine run the draft on the same passes, so only
tensor-parallel rank 0 of the last pipeline stage counts its worker-side figures once,
the others are copies (`counting`). Ports above `SPECTRACE_PROMETHEUS_PORT`, per
data-parallel replica of `1 + world` processes: the EngineCore takes the first, worker
rank r (tp + pp * tp_size) the `1 + r`-th.
"""
from __future__ import annotations

from .. import counting, model_hash, signals
from . import vllm_settings
from ..process import STATE, note_identity, recorder


def _served_model(model_config) -> str | None:
    name = getattr(model_config, "served_model_name", None)
    if isinstance(name, (list, tuple)):
        name = name[0] if name else None
    return name or getattr(model_config, "model", None)


def _models(vllm_config) -> dict:
    """The served model, the draft and the speculative method as vLLM spells it
    (`speculative_config.method`: eagle3, ngram, mtp, dflash, ...), and the content hashes
    of the target's and the draft's folders (`model_hash`, read once, at start-up)."""
    spec = getattr(vllm_config, "speculative_config", None)
    method = getattr(spec, "method", None)
    model_config = getattr(vllm_config, "model_config", None)
    return {"model": _served_model(model_config),
            "draft_model": getattr(spec, "model", None),
            "spec_algorithm": method if isinstance(method, str) else None,
            **model_hash.hashes(getattr(model_config, "model", None),
                                getattr(spec, "model", None))}


def _sizes(vllm_config) -> tuple[int, int, int]:
    """(data-parallel rank, tensor-parallel size, pipeline-parallel size)."""
    par = getattr(vllm_config, "parallel_config", None)
    dp = getattr(par, "data_parallel_rank", 0)
    tp = getattr(par, "tensor_parallel_size", 1)
    pp = getattr(par, "pipeline_parallel_size", 1)
    return (dp if isinstance(dp, int) else 0, tp if isinstance(tp, int) else 1,
            pp if isinstance(pp, int) else 1)


def _worker_ranks() -> dict:
    """tp / pp ranks from vLLM's parallel state (initialised before models load)."""
    try:
        from vllm.distributed.parallel_state import get_pp_group, get_tp_group
        return {"tp_rank": int(get_tp_group().rank_in_group),
                "pp_rank": int(get_pp_group().rank_in_group)}
    except Exception:  # noqa: BLE001 - no parallel state: a single rank
        return {"tp_rank": 0, "pp_rank": 0}


def engine_recorder(vllm_config):
    """The EngineCore's Recorder, its identity noted first."""
    rec = STATE.recorder
    if rec is not None:
        return rec
    dp, tp, pp = _sizes(vllm_config)
    note_identity(runtime=signals.RUNTIME_VLLM, dp_rank=dp, counted=counting.ONCE,
                  port_offset=dp * (1 + tp * pp), **_models(vllm_config),
                  settings=vllm_settings.read(vllm_config))
    return recorder(signals.ROLE_ENGINE_CORE)


def worker_recorder(vllm_config=None):
    """A worker's Recorder, its identity noted first. `vllm_config`: the runner's, or
    None for the one vLLM sets while it loads models (`get_current_vllm_config`)."""
    rec = STATE.recorder
    if rec is not None:
        return rec
    if vllm_config is None:
        try:
            from vllm.config import get_current_vllm_config
            vllm_config = get_current_vllm_config()
        except Exception:  # noqa: BLE001
            vllm_config = None
    dp, tp, pp = _sizes(vllm_config)
    ranks = _worker_ranks()
    note_identity(runtime=signals.RUNTIME_VLLM, dp_rank=dp, **ranks,
                  counted=counting.scope(counting.Placement(
                      ranks["tp_rank"], ranks["pp_rank"], pp)),
                  port_offset=dp * (1 + tp * pp) + 1 + ranks["tp_rank"]
                  + ranks["pp_rank"] * tp, **_models(vllm_config),
                  settings=vllm_settings.read(vllm_config))
    return recorder(signals.ROLE_WORKER)
