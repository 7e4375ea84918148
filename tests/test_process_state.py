"""Process-wide state: `uninstrument()` forgets every piece of it (`process.reset()`), so a
later `instrument()` (or the next test) starts from zero; the global providers spectrace
looks at before building its own."""
from __future__ import annotations

import enum
import types

import spectrace
from spectrace import process
from spectrace.adapters import sglang_worker
from spectrace.export import final_flush
from spectrace.process import STATE, note_identity
from spectrace.safety import DROPPED, INTERNAL_ERRORS


class Mode(enum.Enum):
    """Shaped like SGLang's ForwardMode: the step hook caches `is_extend()` per member."""
    DECODE = 1

    def is_extend(self):
        return False


def test_uninstrument_forgets_the_process_state(tmp_path):
    spectrace.instrument(output_dir=str(tmp_path), exporters=["file"])
    try:
        INTERNAL_ERRORS.record("test.hook", RuntimeError("x"))
        DROPPED.add("spans", 3)
        note_identity(runtime="vllm", tp_rank=1)
        STATE.patcher.note_missing("runtime.Class.method")
        assert not sglang_worker.is_prefill(types.SimpleNamespace(forward_mode=Mode.DECODE))
        assert process.recorder() is not None          # telemetry and the final flush
        final_flush.flush()  # (in time or not: what matters here is that it ran)
        assert final_flush._STATE.workers and final_flush._STATE.last_flush_s is not None
        assert INTERNAL_ERRORS.counts and DROPPED.counts and STATE.identity
        assert sglang_worker._IS_EXTEND
    finally:
        spectrace.uninstrument()
    assert dict(INTERNAL_ERRORS.counts) == {} and dict(DROPPED.counts) == {}
    assert STATE.identity == {} and STATE.patcher.missing == []
    assert sglang_worker._IS_EXTEND == {}
    assert final_flush._STATE.workers == [] and final_flush._STATE.last_flush_s is None
    assert not final_flush._STATE.atexit and final_flush._STATE.previous == {}
    assert STATE.recorder is None and STATE.telemetry is None and STATE.config is None


def test_an_internal_error_is_logged_again_after_a_reset(caplog):
    """The once-per-hook log starts afresh too."""
    INTERNAL_ERRORS.record("test.again", RuntimeError("first"))
    process.reset()
    with caplog.at_level("ERROR", logger="spectrace"):
        INTERNAL_ERRORS.record("test.again", RuntimeError("second"))
    assert "second" in caplog.text and dict(INTERNAL_ERRORS.counts) == {"test.again": 1}
    process.reset()


def test_the_apis_placeholder_meter_provider_is_not_taken_for_the_hosts():
    """`providers.host_meter_provider` recognises the API's placeholder by its private class
    name (there is no public way to ask): this fails if opentelemetry-api renames it."""
    from opentelemetry.metrics import _internal
    assert type(_internal._PROXY_METER_PROVIDER).__name__ == "_ProxyMeterProvider"
