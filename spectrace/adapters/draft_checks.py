"""What every runtime's EAGLE-3 draft hooks do with what they read (runtime-neutral):

- a draft pass's hidden-state width is checked once per kind of pass and width, then
  only counted (`DraftState` on the draft model holds what was already found healthy);
- a sampled draft pass (every Nth, `SPECTRACE_FINITE_EVERY`) has its hidden states (and,
  where the adapter has them, logits) checked for inf/nan on the device
  (`rules.finite`): the unsampled passes only bump a count;
- an observed `load_weights` (see `load_observer`) becomes the dropped-keys and
  unloaded-parameters findings, plus the vocabulary-map findings the adapter computed.

The adapters read their runtime's fields and call these.
"""
from __future__ import annotations

from typing import Callable, Hashable

from .. import signals
from ..rules.finite import FiniteChecks, dtype_name, finite_flags
from ..rules.weights import missing_parameters, missing_params_finding, unused_keys_finding
from ..rules.widths import ExpectedWidths, check_width
from ..findings import Finding
from ..objstate import peek, state_of
from ..process import STATE
from ..runtimes import Runtime
from ..safety import StrictModeError


class DraftState:
    """What spectrace keeps on one draft model (`objstate`): its expected widths, once its
    first pass has checked them (`widths_known`; None: it takes no aux layers, so any width
    is its own business), the passes already checked and healthy (runtime's key ->
    (kind, width)), which later are only counted, whether its first pass ran on a CUDA
    device (where a pass may be a CUDA-graph capture), its non-finite checks and the
    passes they sampled from, and (vLLM) the input width of a trained fc that the runtime
    did not build."""

    __slots__ = ("widths_known", "expected", "healthy", "on_cuda", "finite", "finite_passes",
                 "checkpoint_fc_in")

    def finite_due(self, every: int) -> bool:
        """Count a draft pass; True when it is sampled for a non-finite check (the first
        pass, then every `every`th; never when `every` is 0)."""
        n = self.finite_passes
        self.finite_passes = n + 1
        return bool(every) and n % every == 0

    def __init__(self) -> None:
        self.widths_known = False
        self.expected: ExpectedWidths | None = None
        self.healthy: dict = {}
        self.on_cuda = False
        self.finite: FiniteChecks | None = None
        self.finite_passes = 0
        self.checkpoint_fc_in: int | None = None


def state(model) -> DraftState:
    """The model's `DraftState` (made empty the first time)."""
    return state_of(model, DraftState)


def draft_state(model, rec, expected: Callable[[object], ExpectedWidths | None],
                on_cuda: bool = False) -> DraftState:
    """The model's `DraftState` with its expected widths, read at its first pass (the
    widths are known by then)."""
    st = peek(model) or state(model)
    if not st.widths_known:
        st.expected, st.on_cuda, st.widths_known = expected(model), on_cuda, True
        if st.expected is not None:
            rec.draft.expect(st.expected.as_dict())
    return st


def count_if_healthy(rec, st: DraftState, key: Hashable) -> bool:
    """Count a pass already found healthy (the common case: a dict lookup and an add)."""
    seen = st.healthy.get(key)
    if seen is None:
        return False
    rec.draft.count(seen)
    return True


def capturing() -> bool:
    """A CUDA graph is being captured (on dummy batches: not a pass to count)."""
    import torch
    return torch.cuda.is_current_stream_capturing()


def check_pass(rec, st: DraftState, key: Hashable, kind: str, width: int, runtime: Runtime,
               span_attributes: dict | None = None) -> None:
    """A pass not seen healthy before: count it, check its width, report what is wrong
    (and stop at an fc bypass in strict mode)."""
    rec.draft.count((kind, width))
    finding = None if st.expected is None else check_width(kind, width, st.expected, runtime)
    if finding is None:
        st.healthy[key] = (kind, width)
        return
    rec.finding(finding, span_attributes)
    if STATE.config.strict and finding.code == signals.FC_BYPASS:
        raise StrictModeError("spectrace strict mode (SPECTRACE_STRICT=1) stopped at the "
                              "first fc bypass: " + finding.message)


def report_load(rec, obs, subject: str, shared: set[str], vocab: list[Finding],
                hint: str | None = None, cause: str | None = None) -> None:
    """Findings for one observed `load_weights`, to the process's Recorder `rec`: keys that
    reached no parameter, draft parameters no key filled (except those the runtime fills
    from the target, `shared`), and the vocabulary-map findings. `subject` names the
    runtime and its version."""
    missing = [m for m in missing_parameters(obs.names.values(), obs.loaded)
               if m.split("[")[0] not in shared]
    rec.draft.loaded(len(obs.unused), len(missing))
    if obs.unused:
        rec.finding(unused_keys_finding(obs.unused, f"{subject}'s load_weights dropped",
                                        bool(missing), hint=hint, seen=obs.seen,
                                        cause=cause))
    if missing:
        rec.finding(missing_params_finding(missing, subject))
    for f in vocab:
        rec.finding(f)


def finite_due(rec, model) -> bool:
    """Count a draft pass; True when it is sampled for a non-finite check (the first pass,
    then every `finite_every`th). Two dict operations when it is not."""
    every = rec.cfg.finite_every
    if not every:
        return False
    return (peek(model) or state(model)).finite_due(every)


def check_finite(rec, model, names: tuple[str, ...], tensors: tuple) -> None:
    """Start the on-device check of `tensors` (named `names`), read the checks whose
    copies are done, and raise the non-finite finding once they reach its floor. Never
    waits for the device; nothing while a CUDA graph is captured."""
    first = tensors[0]
    if first.is_cuda and capturing():
        return
    st = peek(model) or state(model)
    checks = st.finite
    if checks is None:
        checks = st.finite = FiniteChecks(names, dtype_name(first))
    checks.add(*finite_flags(tensors))
    if checks.poll():
        rec.finding(checks.finding())
