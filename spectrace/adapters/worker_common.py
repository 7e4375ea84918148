"""Pieces both eagle-worker adapters (v1 `EAGLEWorker`, v2 `EAGLEWorkerV2`) share: rank
discovery, step spans, the aux-capture audit, and the on-device token comparison."""
from __future__ import annotations

from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace

from .. import signals
from ..instrumentation import STATE, note_ranks, recorder
from ..telemetry import sglang_version


def ranks_from_call(args, kwargs) -> dict:
    """tp/dp/pp ranks from a worker constructor's arguments (or its target worker)."""
    ranks = {k: kwargs.get(k) for k in ("tp_rank", "dp_rank", "pp_rank") if k in kwargs}
    if ranks.get("tp_rank") is None:
        for a in list(args) + list(kwargs.values()):
            r = getattr(a, "tp_rank", None)
            if isinstance(r, int):
                ranks["tp_rank"] = r
                ranks.setdefault("pp_rank", getattr(a, "pp_rank", None))
                ranks.setdefault("dp_rank", getattr(a, "dp_rank", None))
                break
    ranks = {k: v for k, v in ranks.items() if isinstance(v, int)}
    if "tp_rank" not in ranks:
        ranks.update(_ranks_from_sglang())
    return ranks


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


def start_worker(args, kwargs) -> None:
    """Called on entry to the worker constructor: fixes ranks, then sets up telemetry in
    this process (the draft model loads inside the constructor)."""
    note_ranks(**ranks_from_call(args, kwargs), **models_from_call(args, kwargs))
    recorder()


def models_from_call(args, kwargs) -> dict:
    """The served model name and draft path, from the `server_args` a worker receives."""
    for a in list(args) + list(kwargs.values()):
        if hasattr(a, "speculative_draft_model_path"):
            return {"model": getattr(a, "served_model_name", None) or getattr(a, "model_path", None),
                    "draft_model": a.speculative_draft_model_path}
    return {}


def after_worker_init(worker) -> None:
    """Once the worker exists: its speculative-step count fixes the series to create."""
    steps = getattr(worker, "speculative_num_steps", None)
    if isinstance(steps, int) and steps > 0:
        recorder().acceptance.prepare(steps)


_audited: set[int] = set()


def audit_once(worker, target_model, draft_model) -> None:
    """Audit the target's aux capture against the draft, once per worker, at its first
    forward (SGLang configures capture after the worker's constructor returns)."""
    if id(worker) in _audited:
        return
    _audited.add(id(worker))
    from .eagle3_model import audit_models
    if target_model is None or draft_model is None:
        return
    rec = recorder()
    for f in audit_models(target_model, draft_model):
        rec.finding(f)


_sglang_version: str | None = None


def _version() -> str:
    """SGLang's version, read once: `importlib.metadata` parses the wheel's METADATA on
    every call (milliseconds), too slow for a step span."""
    global _sglang_version
    if _sglang_version is None:
        _sglang_version = sglang_version()
    return _sglang_version


def step_span_start(worker_kind: str, attrs: dict):
    """Start a sampled step span and make it current; returns (span, token)."""
    rec = recorder()
    span = rec.tel.tracer.start_span(signals.SPAN_STEP, attributes={
        signals.SPAN_ATTR_WORKER: worker_kind,
        signals.SPAN_ATTR_SGLANG_VERSION: _version(), **attrs})
    token = otel_context.attach(otel_trace.set_span_in_context(span))
    rec.step_span = span
    return span, token


def step_span_end(ctx) -> None:
    span, token = ctx
    rec = STATE.recorder
    if rec is not None:
        rec.step_span = None
    otel_context.detach(token)
    span.end()


_IS_EXTEND: dict = {}  # ForwardMode member -> its is_extend(), asked once per member


def is_prefill(batch) -> bool:
    """A prefill (extend) batch, not a speculative step: `forward_mode.is_extend()` (read
    once per ForwardMode member: the enum method costs about 1 µs a call) or SGLang's
    `is_extend_in_batch`."""
    mode = batch.forward_mode
    try:
        extend = _IS_EXTEND[mode]
    except KeyError:
        extend = _IS_EXTEND[mode] = bool(mode.is_extend())
    except TypeError:  # an unhashable mode: ask it every time
        extend = mode.is_extend()
    return extend or getattr(batch, "is_extend_in_batch", False)


def child_span_start(name: str):
    rec = STATE.recorder
    if rec is None or rec.step_span is None:
        return None  # step not sampled: no span
    return rec.tel.tracer.start_span(name)


def child_span_hook(name: str):
    """A `before` hook that opens the child span `name` under a sampled step span."""
    def before(instance, args, kwargs):
        return child_span_start(name)
    return before


def begin_step(worker_kind: str, worker, batch, audit) -> tuple | None:
    """The step hook both workers share: audit once, skip prefill, count the step, and
    start a span for a sampled one (returns its context for `step_span_end`)."""
    if id(worker) not in _audited:
        audit(worker)
    if is_prefill(batch):
        return None  # prefill: not a speculative step
    rec = STATE.recorder or recorder()
    if rec.begin_step(worker_kind):
        return step_span_start(worker_kind, step_attrs(worker, batch))
    return None


def child_span_end(span) -> None:
    span.end()


def compare_chain_tokens(draft_token, predicted, batch_size: int, num_draft_tokens: int):
    """Per-position agreement of a top-k 1 chain, computed on the device: draft token at
    position k (column k+1 of the verify input) vs the target's prediction at column k.
    Returns (counts on the CPU, completion event or None). Never blocks: on CUDA the copy
    is asynchronous into pinned memory and its event is polled later."""
    import torch
    n = num_draft_tokens
    d = draft_token.reshape(batch_size, n)[:, 1:]
    t = predicted.reshape(batch_size, n)[:, :-1]
    return _to_host((d == t).sum(0))


def compare_tree_top1_path(draft_token, predicted, next_token, batch_size: int,
                           num_draft_tokens: int, steps: int):
    """Per-position agreement along the top-1 path of a draft tree (top-k > 1), on the
    device: from the root, follow each node's first child (`retrieve_next_token`; SGLang
    orders a node's children by rank, so the first is the best kept one) and compare the
    child's draft token with the target's prediction at its parent. A path that ends early
    counts as disagreement from there on. Same return as `compare_chain_tokens`."""
    import torch
    n = num_draft_tokens
    d = draft_token.reshape(batch_size, n)
    t = predicted.reshape(batch_size, n)
    nxt = next_token.reshape(batch_size, n).long()
    cur = torch.zeros((batch_size, 1), dtype=torch.long, device=d.device)
    alive = torch.ones((batch_size, 1), dtype=torch.bool, device=d.device)
    agree = []
    for _ in range(steps):
        child = nxt.gather(1, cur)
        alive = alive & (child >= 0)
        child = child.clamp(min=0)
        agree.append(alive & (d.gather(1, child) == t.gather(1, cur)))
        cur = child
    return _to_host(torch.cat(agree, 1).sum(0))


def _to_host(counts):
    """Counts on the CPU without blocking: on CUDA an asynchronous copy into pinned memory
    plus an event to poll; on the CPU the tensor itself."""
    import torch
    if counts.is_cuda:
        host = torch.empty(counts.shape, dtype=counts.dtype, device="cpu", pin_memory=True)
        host.copy_(counts, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        return host, event
    return counts, None


def step_attrs(worker, batch) -> dict:
    """Step-span attributes from the worker's settings and the batch (a `ScheduleBatch` or
    `ModelWorkerBatch`: `reqs` when present, else the length of `seq_lens`)."""
    reqs = getattr(batch, "reqs", None)
    return {signals.SPAN_ATTR_BATCH_SIZE: len(reqs) if reqs is not None
            else int(batch.seq_lens.shape[0]),
            signals.SPAN_ATTR_NUM_STEPS: worker.speculative_num_steps,
            signals.SPAN_ATTR_TOPK: worker.topk,
            signals.SPAN_ATTR_NUM_DRAFT_TOKENS: worker.speculative_num_draft_tokens}


def named_args(signature, instance, args, kwargs) -> dict:
    """A call's arguments by parameter name (positional ones included), from the signature
    of the original function taken before it was wrapped; the keywords alone if they do
    not bind."""
    try:
        bound = signature.bind_partial(instance, *args, **kwargs)
    except TypeError:
        return dict(kwargs)
    return dict(bound.arguments)
