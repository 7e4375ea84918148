"""Who an SGLang eagle worker is: its tp / dp / pp ranks, where it sits among the ranks
that count the same request-steps (`counting`), and the models it serves, read from its
constructor's arguments by name (or SGLang's own parallel state). They become resource
attributes of the process."""
from __future__ import annotations

from .. import model_hash
from ..counting import Placement


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


def server_args(named: dict):
    """The `server_args` a worker receives (the argument with a draft model path)."""
    return next((v for v in named.values() if hasattr(v, "speculative_draft_model_path")),
                None)


def models(named: dict) -> dict:
    """The served model name and draft path, from the `server_args` a worker receives, and
    the content hashes of both folders (`model_hash`, read once, at start-up)."""
    args = server_args(named)
    if args is None:
        return {}
    return {"model": getattr(args, "served_model_name", None)
            or getattr(args, "model_path", None),
            "draft_model": args.speculative_draft_model_path,
            **model_hash.hashes(getattr(args, "model_path", None),
                                args.speculative_draft_model_path)}


def algorithm(named: dict, worker) -> dict:
    """The speculative algorithm the `server_args` name (`NGRAM`, `STANDALONE`, a plugin's
    name, ...) and the worker class that runs it."""
    name = getattr(server_args(named), "speculative_algorithm", None)
    return {"spec_algorithm": str(name).upper() if name else None,
            "spec_worker": type(worker).__name__}


def port_offset(named: dict) -> int | None:
    """The Prometheus port above the base: SGLang's own rank in its world,
    `pp_rank * tp_size + tp_rank` (`runtime_context.spawn_world_rank`), so that the
    stages of a pipeline do not take the same ports; data-parallel replicas without
    attention DP each start their ranks at 0 (`data_parallel_controller`: every replica
    launches tp ranks 0..tp_size-1 with its `dp_rank`), so a replica adds
    `dp_rank * pp_size * tp_size`. With attention DP the tp ranks already span every
    replica and `dp_rank` is derived from them: nothing is added. None when a rank is not
    known."""
    r = ranks(named)
    args = server_args(named)
    tp_size = _int(getattr(args, "tp_size", None)) or 1
    if _int(r.get("tp_rank")) is None:
        return None
    offset = (_int(r.get("pp_rank")) or 0) * tp_size + r["tp_rank"]
    dp_rank = _int(r.get("dp_rank"))
    if dp_rank and not _attention_dp(args):
        offset += dp_rank * (_int(getattr(args, "pp_size", None)) or 1) * tp_size
    return offset


def _attention_dp(args) -> bool:
    """Attention DP on: `attn_dp_size > 1` (0.5.2x) or `enable_dp_attention` (older)."""
    size = _int(getattr(args, "attn_dp_size", None))
    return (size or 0) > 1 or getattr(args, "enable_dp_attention", False) is True


def placement(named: dict) -> Placement:
    """Where this worker sits among the ranks that run the same requests: its rank in the
    attention group (attention-TP x attention-CP: 0 counts once) and its pipeline stage
    (only the last verifies). From SGLang's parallel state (`get_parallel()`, 0.5.16+;
    `dp_attention.get_attention_*_rank` and `get_pp_group()` before), else from the
    `server_args` and ranks the constructor was given."""
    for read in (_placement_from_context, _placement_from_groups):
        try:
            place = read()
        except Exception:  # noqa: BLE001 - not this release's API, or not initialised
            continue
        if place is not None:
            return place
    return placement_from_args(named)


def _int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def peer_rank(attn_tp_rank, attn_tp_size, attn_cp_rank) -> int | None:
    """The rank among the attention-TP x attention-CP ranks of one attention group."""
    tp_rank, tp_size = _int(attn_tp_rank), _int(attn_tp_size)
    if tp_rank is None:
        return None
    cp_rank = _int(attn_cp_rank) or 0
    return cp_rank * (tp_size or 1) + tp_rank


def _read(obj, name):
    try:
        return getattr(obj, name)
    except Exception:  # noqa: BLE001 - ParallelContext raises for unset fields
        return None


def _placement_from_context() -> Placement | None:
    from sglang.srt.runtime_context import get_parallel
    par = get_parallel()
    peer = peer_rank(_read(par, "attn_tp_rank"), _read(par, "attn_tp_size"),
                     _read(par, "attn_cp_rank"))
    if peer is None:
        return None
    return Placement(peer, _int(_read(par, "pp_rank")), _int(_read(par, "pp_size")))


def _placement_from_groups() -> Placement | None:
    from sglang.srt.layers import dp_attention as dpa
    cp = getattr(dpa, "get_attention_cp_rank", None)
    peer = peer_rank(dpa.get_attention_tp_rank(), dpa.get_attention_tp_size(),
                     cp() if cp is not None else 0)
    if peer is None:
        return None
    try:
        from sglang.srt.distributed.parallel_state import get_pp_group
        pp = get_pp_group()
        return Placement(peer, _int(pp.rank_in_group), _int(pp.world_size))
    except Exception:  # noqa: BLE001 - no pipeline group: one stage
        return Placement(peer)


def placement_from_args(named: dict) -> Placement:
    """From the constructor's `tp_rank` / `pp_rank` and its `server_args`: the attention
    group is `tp_size / attn_dp_size / attn_cp_size` ranks wide (`attn_dp_size`, 0.5.2x),
    or `tp_size / dp_size` with `enable_dp_attention` (older), else all `tp_size`."""
    r = ranks(named)
    args = server_args(named)
    tp_rank = _int(r.get("tp_rank"))
    tp_size = _int(getattr(args, "tp_size", None))
    if tp_rank is None or tp_size is None:
        return Placement(tp_rank, _int(r.get("pp_rank")), _int(getattr(args, "pp_size", None)))
    attn_dp = _int(getattr(args, "attn_dp_size", None))
    attn_cp = _int(getattr(args, "attn_cp_size", None)) or 1
    if attn_dp is None:
        dp = _int(getattr(args, "dp_size", None)) or 1
        attn_dp = dp if getattr(args, "enable_dp_attention", False) is True else 1
    attn_tp = max(tp_size // max(attn_dp, 1) // attn_cp, 1)
    attn_tp_rank = tp_rank % attn_tp
    attn_cp_rank = (tp_rank // attn_tp) % attn_cp
    return Placement(peer_rank(attn_tp_rank, attn_tp, attn_cp_rank), _int(r.get("pp_rank")),
                     _int(getattr(args, "pp_size", None)))
