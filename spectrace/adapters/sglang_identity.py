"""Who an SGLang eagle worker is: its tp / dp / pp ranks and the models it serves, read
from its constructor's arguments by name (or SGLang's own parallel state). They become
resource attributes of the process."""
from __future__ import annotations


def ranks(named: dict) -> dict:
    """tp/dp/pp ranks from a worker constructor's named arguments, or from an argument
    that carries them (the target worker), or from SGLang's parallel state."""
    out = {k: named.get(k) for k in ("tp_rank", "dp_rank", "pp_rank")}
    if not isinstance(out.get("tp_rank"), int):
        for value in named.values():
            r = getattr(value, "tp_rank", None)
            if isinstance(r, int):
                out = {"tp_rank": r, "pp_rank": getattr(value, "pp_rank", None),
                       "dp_rank": getattr(value, "dp_rank", None)}
                break
    out = {k: v for k, v in out.items() if isinstance(v, int)}
    if "tp_rank" not in out:
        out.update(_ranks_from_sglang())
    return out


def _ranks_from_sglang() -> dict:
    """SGLang's own parallel state: `runtime_context.get_parallel()` (0.5.16+), else the
    distributed group helpers (older releases)."""
    try:
        from sglang.srt.runtime_context import get_parallel
        par = get_parallel()
        return {k: getattr(par, k) for k in ("tp_rank", "pp_rank", "dp_rank")
                if isinstance(getattr(par, k, None), int)}
    except Exception:  # noqa: BLE001
        pass
    try:
        from sglang.srt.distributed.parallel_state import get_tensor_model_parallel_rank
        return {"tp_rank": int(get_tensor_model_parallel_rank())}
    except Exception:  # noqa: BLE001
        return {}


def models(named: dict) -> dict:
    """The served model name and draft path, from the `server_args` a worker receives."""
    for value in named.values():
        if hasattr(value, "speculative_draft_model_path"):
            return {"model": getattr(value, "served_model_name", None)
                    or getattr(value, "model_path", None),
                    "draft_model": value.speculative_draft_model_path}
    return {}
