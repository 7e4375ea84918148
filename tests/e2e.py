"""What the end-to-end tests share: SGLang's own per-request figures, waiting for the
exporter's next snapshot, and planting a fault in a copy of a tiny checkpoint.

The waits return as soon as their condition holds; their bound (120 s) is only how long a
loaded 2-core machine may take before the test gives up, not a figure under test."""
from __future__ import annotations

import json
import os
import shutil
import time
import urllib.request


def generate(url: str, body: dict, timeout: float = 600) -> dict:
    """One request to SGLang's native `/generate` (`url`: the server's), its JSON reply."""
    req = urllib.request.Request(url + "/generate", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def sglang_totals(responses) -> tuple[int, int, dict]:
    """Request-steps, accepted draft tokens and the accept histogram, from meta_info."""
    verify = sum(r["meta_info"]["spec_verify_ct"] for r in responses)
    accepted = sum(r["meta_info"]["spec_num_correct_drafts"] for r in responses)
    hist: dict = {}
    for r in responses:
        for correct, n in enumerate(r["meta_info"]["spec_correct_drafts_histogram"]):
            if n:
                hist[str(correct + 1)] = hist.get(str(correct + 1), 0) + n
    return verify, accepted, hist


def settle(run, drafts: int, timeout: float = 120, requests: int | None = None) -> dict:
    """The scheduler's summary once its exported totals reach `drafts` request-steps and,
    given `requests`, that many finished requests are counted and recorded as spans."""
    deadline = time.time() + timeout
    while True:
        report = run.report()
        procs = run.schedulers(report)  # none before the first snapshot after the traffic
        if (len(procs) == 1 and procs[0]["drafts"] >= drafts
                and requests_settled(procs[0], requests)) or time.time() > deadline:
            return run.scheduler(report)
        time.sleep(0.5)


def report_after_traffic(run, timeout: float = 120, since: dict | None = None) -> dict:
    """The report once every process has written two metrics snapshots since this call:
    the second was collected wholly after it (the first may have been collecting as it
    began). Call it once the traffic's responses are back, so that no step runs during
    that collection: the families' figures and the synchronous counters (fc bypasses),
    and one family's figures against another's (finished requests against request-steps),
    are then of the same steps. `since`: a report read once the traffic was over, to count
    from (in place of reading one more). On timeout, the latest report."""
    first = {p["process"]: p["metric_snapshots"]
             for p in (since or run.report())["processes"]}
    deadline = time.time() + timeout
    while True:
        report = run.report()
        if (all(p["metric_snapshots"] >= first.get(p["process"], 0) + 2
                for p in report["processes"]) or time.time() > deadline):
            return report
        time.sleep(0.5)


def after_traffic(run, timeout: float = 120) -> dict:
    """The scheduler's summary from `report_after_traffic`."""
    return run.scheduler(report_after_traffic(run, timeout))


def requests_settled(proc: dict, requests: int | None) -> bool:
    """True when `requests` is None, or a process summary counts that many finished
    requests and holds each one's span: a sampled request's span is made at the metric
    collection after it finished and written at the span export after that, so the
    spans file can trail the finished count by up to two export intervals."""
    if requests is None:
        return True
    req = proc["requests"] or {}
    return req.get("finished") == req.get("recorded") == requests


def wait_for(fn, timeout: float = 120):
    """`fn()` once it is truthy, or its last value after `timeout` seconds."""
    deadline = time.time() + timeout
    while True:
        value = fn()
        if value or time.time() > deadline:
            return value
        time.sleep(0.5)


def codes(proc) -> dict:
    """A process summary's findings by code."""
    return {f["code"]: f for f in proc["findings"]}


# The advisor's judgement of what speculation costs (`speculation.*`): true of these tiny
# pairs on a loaded CPU (a step there can cost more than it gains) and not what a wiring
# test asserts; the tests that judge it read recordings (tests/test_advisor_recorded.py).
COST_CODES = frozenset({"speculation.slower", "speculation.small_gain",
                        "speculation.fewer_steps_faster"})


def findings_but_cost(proc) -> list:
    """A process summary's findings, less the advisor's cost findings (`COST_CODES`)."""
    return [f for f in proc["findings"] if f["code"] not in COST_CODES]


def runtime_codes(proc) -> set:
    """The codes of the findings the instrumentation raised in the process
    (`families.findings.RUNTIME_SPECS`), without those the report judges from the totals
    (the advisor's, nothing accepted, the breakdowns' gaps): what a wiring test names."""
    from spectrace.families.findings import RUNTIME_SPECS
    runtime = {s.code for s in RUNTIME_SPECS}
    return {f["code"] for f in proc["findings"] if f["code"] in runtime}


def plant(src: str, dst: str, edit) -> str:
    """Copy a tiny-model folder and let `edit(state_dict)` change the draft checkpoint."""
    from safetensors.torch import load_file, save_file
    shutil.copytree(src, dst)
    path = os.path.join(dst, "draft", "model.safetensors")
    sd = load_file(path)
    edit(sd)
    save_file(sd, path)
    return dst
