"""spectrace's decode-loop hooks never make the host wait for the GPU: checked on a CPU-only
machine with fake CUDA tensors. (On a real GPU: `benchmarks/gpu_sync_check.py`.)

What is real: spectrace's hooks, the wrap-point tables of its own adapters (`sglang_v2`,
`sglang_v1`, `sglang_eagle3`, and vLLM's `vllm_engine`, `vllm_runner`, `vllm_mrv2`,
`vllm_eagle3`)
applied by its Patcher (wrapt) and its Recorder; the tensors are
PyTorch's own `FakeTensor`s on device "cuda" (`FakeTensorMode`): they report `is_cuda`, so
every hook takes its CUDA code path, but they have no data. Every aten op the hooks issue is
recorded by a `TorchDispatchMode`; any read of tensor data on the host (`.item()`,
`.tolist()`, `bool(t)`, an op with data-dependent output shape) raises inside the fake mode
and shows up as a recorded op or a counted internal error. `torch.cuda.Event` and
`torch.cuda.synchronize` are replaced by recorders (there is no driver here).
What is a stand-in: the bodies of SGLang's and vLLM's methods (see tests/kit/stand_ins.py).

Asserted, for a v2 step (sampled, agreement compared), a v1 step and a vLLM engine step
(V1 runner, and the V2 model runner, MRV2):
- no `aten._local_scalar_dense` / `aten.is_nonzero` / data-dependent-shape op;
- no op that moves data from the device to the host, except the one copy of the
  agreement counts (`rules.tokens.to_host`): non-blocking, into a pinned buffer
  allocated for it;
- no `torch.cuda.synchronize`, no `Event.synchronize` / `Event.wait`;
- the draft-width hook (`LlamaModel.forward`) issues no aten op at all: shapes only;
- the non-finite check of the draft's outputs (SGLang: `LlamaModel.forward`'s result; vLLM:
  `compute_logits`' input and output), on a sampled pass: `isfinite`/`all` on the device
  and one pinned non-blocking copy per check, its event queried at later checks and never
  waited on; unsampled passes issue no aten op. (The tests of the other hooks switch it
  off, `finite_every=0`, so that each counts only its own ops.)
"""
from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from tests.kit import stand_ins as hb

from tests.kit import process_state
from spectrace import signals
from spectrace.safety import INTERNAL_ERRORS

pytestmark = pytest.mark.torch

BS = 8

SYNCING_OPS = {"aten._local_scalar_dense.default", "aten.is_nonzero.default",
               "aten.item.default", "aten.nonzero.default", "aten.masked_select.default",
               "aten._unique2.default", "aten.unique_consecutive.default",
               "aten.repeat_interleave.Tensor"}


def _tensors(x):
    return [t for t in tree_flatten(x)[0] if isinstance(t, torch.Tensor)]


class OpLog(TorchDispatchMode):
    """Records every aten op with the devices of its tensor inputs and outputs; knows
    which host tensors were allocated pinned."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[dict] = []
        self.pinned: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        entry = {"op": str(func), "in": [t.device.type for t in _tensors((args, kwargs))],
                 "args": args, "kwargs": kwargs}
        self.ops.append(entry)
        out = func(*args, **kwargs)
        entry["out"] = [t.device.type for t in _tensors(out)]
        if func is torch.ops.aten.empty.memory_format and kwargs.get("pin_memory"):
            self.pinned.add(id(out))
        return out

    def aten(self) -> list[dict]:
        return [e for e in self.ops if e["op"].startswith("aten.")]

    def device_to_host(self) -> list[dict]:
        """Ops whose output lands on the host while an input is on the device, except a
        non-blocking copy into a pinned buffer."""
        bad = []
        for e in self.aten():
            if "cuda" in e["in"] and "cpu" in e["out"]:
                allowed = (e["op"] == "aten.copy_.default" and id(e["args"][0]) in self.pinned
                           and (len(e["args"]) > 2 and e["args"][2]
                                or e["kwargs"].get("non_blocking")))
                if not allowed:
                    bad.append(e)
        return bad

    def describe(self) -> str:
        return "\n".join(f"{e['op']} in={e['in']} out={e.get('out')}" for e in self.ops)


class FakeEvent:
    log: list[str] = []

    def __init__(self, *a, **k) -> None:
        pass

    def record(self, *a) -> None:
        FakeEvent.log.append("record")

    def query(self) -> bool:
        FakeEvent.log.append("query")
        return False

    def synchronize(self) -> None:
        FakeEvent.log.append("synchronize")

    def wait(self, *a) -> None:
        FakeEvent.log.append("wait")


@pytest.fixture
def fake_cuda(monkeypatch):
    """FakeTensorMode for CUDA tensors without a GPU, and recorders for the CUDA calls
    that would otherwise need a driver."""
    calls: list[str] = []
    FakeEvent.log = []
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: calls.append("synchronize"))
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing",
                        lambda: calls.append("is_current_stream_capturing") or False)
    mode = FakeTensorMode()
    return mode, calls


@pytest.fixture
def recorder_every_step(tmp_path):
    """Worst case for the device: every step sampled as spans, agreement every step."""
    with process_state.own_recorder(str(tmp_path), step_sample_ratio=1.0, agreement_every=1,
                         finite_every=0) as rec:
        yield rec


def _errors() -> int:
    return sum(INTERNAL_ERRORS.counts.values())


def _run_steps(step, mode, n: int = 3) -> OpLog:
    """Run `n` steps under the fake CUDA mode, logging every op; no hook may fail."""
    errors = _errors()
    log = OpLog()
    try:
        with mode, log:
            for _ in range(n):
                step()
    finally:
        step.close()
    assert _errors() == errors, dict(INTERNAL_ERRORS.counts)
    return log


def _run_vllm_steps(mode) -> OpLog:
    """Three vLLM engine steps through spectrace's hooks, on fake CUDA inputs."""
    with mode:
        inputs = hb.make_vllm_inputs(BS, "cuda")
    return _run_steps(hb.VllmStep(BS, "spectrace", inputs), mode)


def _assert_no_sync(log: OpLog, calls: list[str]) -> list[str]:
    """No op that reads device data on the host or moves it there (but the pinned
    non-blocking copy), no synchronize, no wait on an event; the aten ops issued."""
    ops = [e["op"] for e in log.aten()]
    assert not set(ops) & SYNCING_OPS, log.describe()
    assert not log.device_to_host(), log.describe()
    assert "synchronize" not in calls
    assert "synchronize" not in FakeEvent.log and "wait" not in FakeEvent.log
    return ops


def test_fake_cuda_tensors_take_the_cuda_path(fake_cuda):
    mode, _ = fake_cuda
    with mode:
        t = hb.make_tensors(BS, "cuda")
    assert t.draft_token.is_cuda and t.hidden_extend.is_cuda
    with mode, pytest.raises(Exception):
        t.accept_lens.tolist()  # a host read of device data cannot pass unnoticed


@pytest.mark.parametrize("sample_ratio", [1.0, 0.0])
def test_v2_step_issues_no_device_to_host_op(fake_cuda, tmp_path, sample_ratio):
    mode, calls = fake_cuda
    with process_state.own_recorder(str(tmp_path), step_sample_ratio=sample_ratio,
                         agreement_every=1, step_cost_every=0,
                         finite_every=0) as rec:
        with mode:
            tensors = hb.make_tensors(BS, "cuda")
        log = _run_steps(hb.V2Step(BS, "spectrace", tensors), mode)
        ops = _assert_no_sync(log, calls)
        # the agreement ran on the device, with exactly one pinned non-blocking copy a step
        assert ops.count("aten.copy_.default") == 3 and "aten.eq.Tensor" in ops, log.describe()
        assert len(rec.agreement._pending) == 3 and FakeEvent.log.count("record") == 3
        assert rec.steps.counts[signals.WORKER_V2] == 3
        assert len(rec.acceptance.totals._pending) == 3


@pytest.mark.parametrize("sample_ratio", [1.0, 0.0])
def test_v2_step_cost_on_cuda_records_events_and_never_waits(fake_cuda, tmp_path,
                                                             sample_ratio):
    """Step cost on a GPU (`step_cost.CudaEventClock`, chosen because the batch lives on
    the device): one event on the current stream per boundary (the step's start, verify's
    start and end, the step's end) and four phases between them (step, draft, verify,
    draft-extend), plus two around the target's forward inside verify (its own pair, read
    with its tokens); no aten op beyond the agreement's (the forward's tokens are a shape),
    no synchronize, no wait; the metric reader only polls them and reads nothing while
    they have not completed."""
    from spectrace.families import step_cost
    mode, calls = fake_cuda
    with process_state.own_recorder(str(tmp_path), step_sample_ratio=sample_ratio,
                         agreement_every=1, step_cost_every=1, finite_every=0) as rec:
        with mode:
            tensors = hb.make_tensors(BS, "cuda")
        log = _run_steps(hb.V2Step(BS, "spectrace", tensors), mode)
        ops = _assert_no_sync(log, calls)
        assert ops.count("aten.copy_.default") == 3, log.describe()  # the agreement's only
        clock = rec.cost._clocks[True]
        assert isinstance(clock, step_cost.CudaEventClock) and False not in rec.cost._clocks
        assert FakeEvent.log.count("record") == 3 + 3 * 6
        assert len(clock._pending) == 3 * 5
        forward = step_cost.slot(step_cost.FORWARD, step_cost.bucket_of(BS), hb.STEPS)
        assert [(i, n) for _, _, i, n in clock._pending if n] == [
            (forward, (BS * hb.NUM_DRAFT_TOKENS, BS))] * 3
        assert rec.cost._observe(3) == [] and "query" in FakeEvent.log  # polled, not complete
        assert "synchronize" not in FakeEvent.log and "wait" not in FakeEvent.log
        assert rec.inflight.last_end is None  # between-steps time: host clocks only


def test_cuda_event_clock_reads_only_completed_pairs():
    """The fold adds a pair once its end event has completed, in order, and never waits
    (each pair here is a whole step's own: `test_advisor` has the fold's whole steps)."""
    from spectrace.families import step_cost

    class Event:
        def __init__(self, done, ms=2.0) -> None:
            self.done, self.ms, self.polled = done, ms, 0

        def record(self) -> None:
            pass

        def query(self) -> bool:
            self.polled += 1
            return self.done

        def elapsed_time(self, end) -> float:
            assert end.done, "read before completion"
            return end.ms

        def synchronize(self) -> None:  # pragma: no cover - must not be called
            raise AssertionError("waited for the device")

    made = iter([Event(True), Event(True, 4.0), Event(True), Event(False)])
    totals = step_cost.PhaseTotals()
    clock = step_cost.CudaEventClock(totals, event=lambda **kw: next(made))
    i = step_cost.slot(step_cost.STEP, step_cost.bucket_of(8), 3)
    clock.stop(clock.start(), i)
    clock.stop(clock.start(), i)
    second = clock._pending[-1][1]
    clock.fold()
    assert totals.samples[i] == 1 and totals.seconds[i] == pytest.approx(0.004)
    assert second.polled == 1 and len(clock._pending) == 1
    second.done = True
    clock.fold()
    assert totals.samples[i] == 2 and not clock._pending
    # a step's draft done on the device, the step not yet: neither is read
    made = iter([Event(True), Event(True), Event(False)])
    draft = step_cost.slot(step_cost.DRAFT, step_cost.bucket_of(8), 3)
    started = clock.start()
    clock.stop(started, draft)
    clock.interval(started, clock.start(), i)
    step_end = clock._pending[-1][1]
    clock.fold()
    assert totals.samples[draft] == 0 and totals.samples[i] == 2 and len(clock._pending) == 2
    step_end.done = True
    clock.fold()
    assert totals.samples[draft] == 1 and totals.samples[i] == 3 and not clock._pending


@pytest.mark.parametrize("sample_ratio", [1.0, 0.0])
def test_vllm_step_issues_no_device_to_host_op(fake_cuda, tmp_path, sample_ratio):
    """vLLM: the scheduler's and the engine's hooks touch no tensor; the runner's `_sample`
    hook compares drafts with the target's argmax on the device and copies the counts
    back without blocking; the draft's `combine_hidden_states` hook reads a shape."""
    mode, calls = fake_cuda
    with process_state.own_recorder(str(tmp_path), step_sample_ratio=sample_ratio,
                         agreement_every=1, finite_every=0, step_cost_every=0) as rec:
        log = _run_vllm_steps(mode)
        ops = _assert_no_sync(log, calls)
        assert ops.count("aten.argmax.default") == ops.count("aten.copy_.default") == 3
        assert len(rec.agreement._pending) == 3 and FakeEvent.log.count("record") == 3
        assert rec.steps.counts[signals.WORKER_VLLM] == 3 and len(rec.acceptance.totals._pending) == 3
        assert rec.draft.counts == {("target_fed", hb.NUM_AUX * hb.TARGET_HIDDEN): 3}


@pytest.mark.parametrize("every", [1, 2])
def test_vllm_step_cost_on_cuda_records_events_and_never_waits(fake_cuda, tmp_path, every):
    """vLLM's step cost on a GPU (the runner's device is CUDA): per measured step one event
    where `execute_model` starts (the step's and verify's start), two around its
    `_model_forward` (the target's forward, with the step's scheduled tokens), one where
    it returns (verify), two around `propose_draft_token_ids` (draft), one where
    `sample_tokens` returns (step): four pairs, seven events; no aten op beyond the
    agreement's, no synchronize, no wait; the reader only polls."""
    from spectrace.families import step_cost
    mode, calls = fake_cuda
    with process_state.own_recorder(str(tmp_path), step_sample_ratio=0.0, agreement_every=1,
                         step_cost_every=every, finite_every=0) as rec:
        log = _run_vllm_steps(mode)
        ops = _assert_no_sync(log, calls)
        assert ops.count("aten.copy_.default") == 3, log.describe()  # the agreement's only
        clock = rec.cost._clocks[True]
        assert isinstance(clock, step_cost.CudaEventClock) and False not in rec.cost._clocks
        measured = len(range(0, 3, every))  # steps 0 and 2 with every 2
        assert FakeEvent.log.count("record") == 3 + 7 * measured
        assert [(i, n) for _, _, i, n in clock._pending] == [
            (step_cost.slot(phase, step_cost.bucket_of(BS), hb.STEPS),
             (BS * hb.NUM_DRAFT_TOKENS, BS) if phase == step_cost.FORWARD else 0)
            for phase in (step_cost.FORWARD, step_cost.VERIFY, step_cost.DRAFT,
                          step_cost.STEP)] * measured
        assert rec.cost._observe(3) == [] and "query" in FakeEvent.log  # polled, not complete
        assert "synchronize" not in FakeEvent.log and "wait" not in FakeEvent.log
        assert rec.inflight.last_end is None and rec.inflight.cost is None


def _run_mrv2_steps(mode) -> OpLog:
    """Three steps of vLLM's V2 model runner (MRV2) through spectrace's hooks
    (`vllm_mrv2`), on fake CUDA inputs."""
    with mode:
        inputs = hb.make_vllm_inputs(BS, "cuda")
    return _run_steps(hb.VllmStep(BS, "spectrace", inputs, runner="mrv2"), mode)


@pytest.mark.parametrize("every", [1, 2])
def test_mrv2_step_cost_and_agreement_on_cuda_never_wait(fake_cuda, tmp_path, every):
    """MRV2 on a GPU: the rejection sampler's hook takes the target's argmax and the
    verify input at the logits rows, compares them on the device and copies the counts
    back without blocking; a measured step records one event where `execute_model`
    starts, one at vLLM's forward-start mark, two where `execute_model` returns (the end
    of target_forward, then of verify), two around the speculator's `propose` (draft), one
    where `sample_tokens` returns (step): seven events, four pairs; no synchronize, no
    wait; the reader only polls."""
    from spectrace.families import step_cost
    mode, calls = fake_cuda
    with process_state.own_recorder(str(tmp_path), step_sample_ratio=0.0, agreement_every=1,
                         step_cost_every=every, finite_every=0) as rec:
        log = _run_mrv2_steps(mode)
        ops = _assert_no_sync(log, calls)
        assert ops.count("aten.argmax.default") == ops.count("aten.copy_.default") == 3
        assert ops.count("aten.index.Tensor") == 3 and "aten.eq.Tensor" in ops, log.describe()
        assert len(rec.agreement._pending) == 3
        clock = rec.cost._clocks[True]
        assert isinstance(clock, step_cost.CudaEventClock) and False not in rec.cost._clocks
        measured = len(range(0, 3, every))
        assert FakeEvent.log.count("record") == 3 + 7 * measured
        assert [i for _, _, i, _ in clock._pending] == [
            step_cost.slot(phase, step_cost.bucket_of(BS), hb.STEPS)
            for phase in (step_cost.FORWARD, step_cost.VERIFY, step_cost.DRAFT,
                          step_cost.STEP)] * measured
        assert rec.cost._observe(3) == [] and "query" in FakeEvent.log  # polled, not complete
        assert "synchronize" not in FakeEvent.log and "wait" not in FakeEvent.log
        assert rec.inflight.last_end is None and rec.inflight.cost is None
        assert rec.draft.counts == {("target_fed", hb.NUM_AUX * hb.TARGET_HIDDEN): 3}


def test_mrv2_step_without_agreement_or_cost_issues_no_aten_op(fake_cuda, tmp_path):
    """MRV2 steps neither compared nor measured (15 of 16 by default) touch no tensor."""
    mode, calls = fake_cuda
    with process_state.own_recorder(str(tmp_path), step_sample_ratio=1.0, agreement_every=0,
                         step_cost_every=0, finite_every=0):
        log = _run_mrv2_steps(mode)
    assert not log.aten(), log.describe()
    assert "synchronize" not in calls and not FakeEvent.log


def test_vllm_step_without_agreement_issues_no_aten_op(fake_cuda, tmp_path):
    """Steps that compare nothing (15 of 16 by default) touch no tensor at all."""
    mode, calls = fake_cuda
    with process_state.own_recorder(str(tmp_path), step_sample_ratio=1.0, agreement_every=0,
                         finite_every=0):
        log = _run_vllm_steps(mode)
    assert not log.aten(), log.describe()
    assert "synchronize" not in calls


def test_v1_step_issues_no_aten_op(fake_cuda, recorder_every_step):
    mode, calls = fake_cuda
    with mode:
        tensors = hb.make_tensors(BS, "cuda")
    log = _run_steps(hb.V1Step(BS, "spectrace", tensors), mode)
    assert not log.aten(), log.describe()
    assert "synchronize" not in calls


def test_draft_width_hook_reads_shapes_only(fake_cuda, recorder_every_step):
    """The draft-model hook runs on every draft pass: it must not issue a single aten op
    (not even a view); it still counts each pass and checks the width."""
    mode, calls = fake_cuda
    rec = recorder_every_step
    with mode:
        tensors = hb.make_tensors(BS, "cuda")
    step = hb.V2Step(BS, "spectrace", tensors)
    d = step.worker.draft_worker
    log = OpLog()
    errors = _errors()
    try:
        with mode, log:
            for _ in range(5):
                d.draft_model.forward(None, None, d.decode_fb)
                d.draft_model.forward(None, None, d.extend_fb)
    finally:
        step.close()
    assert _errors() == errors, dict(INTERNAL_ERRORS.counts)
    assert not log.aten(), log.describe()
    assert rec.draft.counts == {("draft_decode", hb.DRAFT_HIDDEN): 5,
                          ("target_fed", hb.NUM_AUX * hb.TARGET_HIDDEN): 5}
    assert calls.count("is_current_stream_capturing") == 10  # asked, never waited on


def test_agreement_fold_never_waits_for_the_copy(recorder_every_step):
    """The metric reader folds agreement counts only once their copy has completed; it
    polls the event and never waits on it."""

    class Event:
        def __init__(self) -> None:
            self.done = False
            self.polled = 0

        def query(self) -> bool:
            self.polled += 1
            return self.done

        def synchronize(self) -> None:  # pragma: no cover - must not be called
            raise AssertionError("fold waited for the device")

    agr = recorder_every_step.agreement
    ev = Event()
    agr.add(torch.tensor([4, 1, 0]), ev, 4)
    agr.fold()
    assert ev.polled == 1 and agr.drafts == 0 and len(agr._pending) == 1
    ev.done = True
    agr.fold()
    assert agr.drafts == 4 and agr.per_position == [4, 1, 0] and not agr._pending


def test_tree_top1_path_agreement_stays_on_the_device(fake_cuda):
    """The tree (top-k > 1) comparison: `steps` gathers along first children, on the device,
    then one non-blocking copy into pinned memory, like the chain's."""
    from spectrace.rules.tokens import compare_tree_top1_path
    mode, calls = fake_cuda
    n, steps = 6, 3
    with mode:
        draft = torch.zeros(BS * n, dtype=torch.long, device="cuda")
        predict = torch.zeros(BS * n, dtype=torch.int32, device="cuda")
        next_token = torch.full((BS, n), -1, dtype=torch.long, device="cuda")
    log = OpLog()
    with mode, log:
        host, event = compare_tree_top1_path(draft, predict, next_token, BS, n, steps)
    ops = {e["op"] for e in log.aten()}
    assert not ops & SYNCING_OPS, log.describe()
    assert not log.device_to_host(), log.describe()
    assert [e["op"] for e in log.aten()].count("aten.gather.default") == 3 * steps
    assert list(host.shape) == [steps] and host.device.type == "cpu"
    assert FakeEvent.log.count("record") == 1 and "synchronize" not in calls


def _finite_copies(log: OpLog) -> int:
    return sum(1 for e in log.aten() if e["op"] == "aten.copy_.default"
               and id(e["args"][0]) in log.pinned)


@pytest.mark.parametrize("every", [1, 4])
def test_sglang_non_finite_check_stays_on_the_device(fake_cuda, tmp_path, every):
    """v2 steps with the draft's outputs checked every `every`th pass: each check is an
    on-device reduction plus one pinned non-blocking copy; the copies still in flight
    (the fake event never completes) are polled, not waited on, and nothing is read."""
    mode, calls = fake_cuda
    with process_state.own_recorder(str(tmp_path), step_sample_ratio=0.0, agreement_every=0,
                         finite_every=every, step_cost_every=0):
        with mode:
            tensors = hb.make_tensors(BS, "cuda")
        step = hb.V2Step(BS, "spectrace", tensors)
        log = _run_steps(step, mode, n=4)
        ops = _assert_no_sync(log, calls)
        passes = 4 * hb.STEPS  # draft passes of 4 steps (steps - 1 decode + 1 extend)
        checks = -(-passes // every)
        assert ops.count("aten.all.default") == checks, log.describe()
        assert _finite_copies(log) == checks and FakeEvent.log.count("record") == checks
        assert FakeEvent.log.count("query") == checks  # each check polls the oldest in flight
        from spectrace.adapters.draft_checks import state
        checked = state(step.worker.draft_worker.draft_model).finite
        assert len(checked.pending) == checks and checked.checks == 0  # nothing read yet


def test_vllm_non_finite_check_stays_on_the_device(fake_cuda, tmp_path):
    """vLLM: `compute_logits` checked on every call (worst case): its hidden states (the
    logits hold -inf by design), one pinned non-blocking copy per call."""
    mode, calls = fake_cuda
    with process_state.own_recorder(str(tmp_path), step_sample_ratio=0.0, agreement_every=0,
                         finite_every=1, step_cost_every=0):
        log = _run_vllm_steps(mode)
        ops = _assert_no_sync(log, calls)
        checks = 3 * hb.STEPS
        assert ops.count("aten.all.default") == checks, log.describe()
        assert _finite_copies(log) == checks and FakeEvent.log.count("record") == checks


def test_unsampled_draft_passes_issue_no_aten_op(fake_cuda, tmp_path):
    """Between checks the hook only counts the pass."""
    mode, calls = fake_cuda
    with process_state.own_recorder(str(tmp_path), step_sample_ratio=0.0, agreement_every=0,
                         finite_every=1000):
        with mode:
            tensors = hb.make_tensors(BS, "cuda")
        step = hb.V2Step(BS, "spectrace", tensors)
        with mode:
            step()  # the first pass is checked
        log = _run_steps(step, mode, n=3)
    assert not log.aten(), log.describe()


def test_non_finite_checks_are_read_only_once_their_copy_is_done():
    """`FiniteChecks.poll` reads a check only after its event completes, raises the
    finding at the first non-finite one (the floor: 1), and never again."""
    from spectrace.rules.finite import FiniteChecks

    class Event:
        def __init__(self) -> None:
            self.done = False

        def query(self) -> bool:
            return self.done

        def synchronize(self) -> None:  # pragma: no cover - must not be called
            raise AssertionError("poll waited for the device")

    checks = FiniteChecks(("hidden states", "logits"), "float16")
    ev = Event()
    checks.add(torch.tensor([True, False]), ev)
    assert checks.poll() is False and checks.checks == 0
    ev.done = True
    assert checks.poll() is True and checks.checks == 1 and checks.bad == 1
    f = checks.finding()
    assert f.details == {"where": ["logits"], "dtype": "float16", "non_finite_checks": 1,
                         "checks": 1}
    assert "the draft's logits, found by 1 of 1 sampled on-device checks; the draft runs " \
           "in float16" in f.message and "float16 overflows above 65504" in f.message
    checks.add(torch.tensor([False, False]), None)
    assert checks.poll() is False  # reported once


def test_a_float16_overflow_is_found():
    """The real failure: bfloat16 weights above float16's range, cast to float16, give
    inf in the draft's hidden states (torch float16 on this CPU), and the check says so;
    the same computation in bfloat16 is finite."""
    from spectrace.rules.finite import FiniteChecks, finite_flags
    w = torch.full((8, 8), 9000.0, dtype=torch.bfloat16)  # fine in bfloat16
    x = torch.full((2, 8), 2.0, dtype=torch.bfloat16)
    for dtype, finite in ((torch.bfloat16, True), (torch.float16, False)):
        h = x.to(dtype) @ w.to(dtype).T  # 8 x 2 x 9000 = 144000 > 65504
        checks = FiniteChecks(("hidden states",), str(dtype).removeprefix("torch."))
        checks.add(*finite_flags((h,)))
        assert checks.poll() is (not finite)
        assert checks.checks == 1 and checks.bad == (0 if finite else 1)


@pytest.mark.vllm  # and SGLang: both runtimes' real signatures
def test_stand_ins_have_the_runtimes_parameter_lists():
    """The stand-ins' methods take the parameters of the installed SGLang 0.5.23 and of
    vLLM 0.32.0 (in the vLLM environment), so the hooks see what they would see there."""
    from conftest import vllm_python_or_skip
    assert hb.check_signatures() == []
    vllm_python_or_skip()
    assert hb.check_signatures(vllm=True) == []
