"""Per-request outliers on the `request_outliers` recording
(tests/recorders/record_request_outliers.py; tests/recorded/README.md says when and how):
the `context` tiny pair on the real CPU servers, SGLang 0.5.23's v2 worker and vLLM's V1
engine (`--per-request-spec-decode-metrics summary`), accepting exactly one draft token of
three per verify for a short walk, none for a garbled request (a walk past id 1024) and all
three for a generation loop; every request recorded.

A uniform run (24 short walks): no outlier finding, and the per-request acceptance
histogram holds every request at 1/3. Then one garbled and one looping request: the report
names each by the runtime's own id (SGLang's meta_info id; vLLM's engine request id, the
response's id plus a suffix), and each request's rate equals the runtime's own per-request
figures, kept beside the recording. A recording, not a live run: the findings are
statistical (each needs its floor of requests and request-steps); the live wiring (request
ids and exported totals equal the runtime's own) was asserted when recording and is again
here."""
from __future__ import annotations

import pytest

from spectrace import signals
from tests import recorded_runs
from tests.e2e import codes
from tests.recorded_runs import facts, path

OUTLIERS = (signals.REQUEST_LOW, signals.REQUEST_IMPLAUSIBLE)
ROLE = {"sglang": None, "vllm": "engine_core"}  # where the steps are counted


def _proc(run: str) -> dict:
    report = recorded_runs.report(path("request_outliers", run))
    role = ROLE[run.split("-")[0]]
    [proc] = [p for p in report["processes"] if (p["role"] == role if role else p["drafts"])]
    own = facts("request_outliers", run)["runtime"]
    assert proc["drafts"] == own["request_steps"]  # the runtime's own count of steps
    assert proc["requests"]["finished"] == proc["requests"]["recorded"] == own["requests"]
    return proc


def _rates(proc) -> dict:
    return proc["requests"]["by_acceptance_rate"]


def _request_id(runtime: str, proc: dict, own_id: str) -> str:
    """The id spectrace recorded for a response: SGLang's meta_info id itself; vLLM's
    engine request id, the response's id plus a suffix."""
    if runtime == "sglang":
        return own_id
    ids = [x["request_id"] for x in proc["requests"]["lowest"]] + [
        i for f in proc["findings"] for i in (f["details"] or {}).get("request_ids", [])]
    (mine,) = {i for i in ids if i.startswith(own_id + "-")}
    return mine


@pytest.mark.parametrize("runtime", ["sglang", "vllm"])
def test_a_uniform_run_names_no_request(runtime):
    proc = _proc(f"{runtime}-uniform")
    own = facts("request_outliers", f"{runtime}-uniform")["runtime"]
    assert set(own["rates"]) == {1 / 3}  # the runtime's own per-request rates
    assert not set(codes(proc)) & set(OUTLIERS), proc["findings"]
    assert _rates(proc) == {"0.3-0.4": own["requests"]}  # 1/3 each, every request


@pytest.mark.parametrize("runtime", ["sglang", "vllm"])
def test_the_garbled_and_the_looping_request_are_named(runtime):
    run = f"{runtime}-outliers"
    proc, own = _proc(run), facts("request_outliers", run)["runtime"]
    garbled, looping = own["garbled"], own["looping"]
    assert (garbled["rate"], looping["rate"]) == (0.0, 1.0)  # the runtime's own rates
    found = codes(proc)
    assert found[signals.REQUEST_LOW]["details"]["request_ids"] == [
        _request_id(runtime, proc, garbled["id"])]
    assert found[signals.REQUEST_IMPLAUSIBLE]["details"]["request_ids"] == [
        _request_id(runtime, proc, looping["id"])]
    assert found[signals.REQUEST_LOW]["details"]["rates"] == [0.0]
    assert found[signals.REQUEST_IMPLAUSIBLE]["details"]["rates"] == [1.0]
    assert _rates(proc) == {"0-0.05": 1, "0.3-0.4": own["requests"] - 2, "0.99-1": 1}
