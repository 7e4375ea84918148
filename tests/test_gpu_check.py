"""`benchmarks/gpu_check.py` keeps working on a machine without a GPU: run as a user would
(a subprocess, CUDA hidden), it prints its one table, every CUDA check says
"skipped: no CUDA device" with the reason, and the CPU checks run and pass with figures.
Its parts are checked to fail when a hook misbehaves, and the test kit's stand-in of SGLang's
`ForwardMode` (used on a GPU machine without SGLang) is compared with SGLang's own.
What runs on a GPU (syncs, graph capture, events) cannot run here: it has not run yet."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from benchmarks import gpu_check
from tests.kit import stand_ins as hb
from tests.kit import process_state

# the tier markers tests/tiers.py introduces (registered with them in pyproject.toml)
pytestmark = pytest.mark.torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "gpu_check.py")
REASON = "torch.cuda.is_available() is False"


def _run(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": ROOT}
    env.pop("SPECTRACE_ENABLED", None)
    proc = subprocess.Popen([sys.executable, SCRIPT, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _table(stdout: str) -> list[tuple[str, ...]]:
    rows = [tuple(c.strip() for c in line.strip("|").split(" | "))
            for line in stdout.splitlines() if line.startswith("| ")]
    assert rows[0] == ("part", "check", "status", "figures"), rows[:1]
    return rows[1:]


def test_cpu_mode_prints_the_table_skips_cuda_and_runs_the_rest(tmp_path):
    out_json = tmp_path / "gpu_check.json"
    res = _run("--json", str(out_json))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert f"skipped: no CUDA device: {REASON}" in res.stdout
    assert "CUDA_VISIBLE_DEVICES=''" in res.stdout
    rows = _table(res.stdout)
    by_check = {r[1]: r for r in rows}
    assert len(by_check) == len(rows), "two rows with the same check"
    skipped = [r for r in rows if r[2] == gpu_check.SKIPPED]
    # every CUDA check is there, skipped, with the reason
    sync_checks = [c[0] for c in gpu_check.sync_cases()]
    cuda_checks = sync_checks + [
        gpu_check.CONTROL, gpu_check.READBACK,
        "CUDA graph capture + replay with the wrappers installed: counts from eager passes only",
        "fc bypass inside a captured graph: no finding from capture or replay",
        gpu_check.CAPTURE_WHILE_POLLING,
    ] + [f"hooks vs tiny draft step, CUDA tensors, batch {bs}" for bs in gpu_check.BATCHES]
    cuda_checks.append(next(c for c in by_check if c.startswith("step time from CUDA events")))
    assert sorted(r[1] for r in skipped) == sorted(cuda_checks)
    assert all(REASON in r[3] for r in skipped)
    assert by_check["non-finite checks on tensors"][2] == "n/a"
    # the CPU checks ran and passed, with their figures
    ran = [r for r in rows if r not in skipped and r[2] != "n/a"]
    assert ran and all(r[2] == "ok" for r in ran), ran
    eager = by_check["tiny draft step, wrappers installed, eager (cpu, batch 8)"]
    assert "draft_decode/256: 6, target_fed/768: 3 + 1 vLLM combine" in eager[3]
    assert "max abs diff 0;" in eager[3]
    bypass = by_check["fc bypass on the tiny draft, eager (1 layer, H wide, to the draft extend)"]
    assert bypass[3] == "3 fc_bypass findings for 3 bypassed passes"
    report = json.loads(out_json.read_text())
    costs = {r["check"]: r["data"] for r in report["rows"] if r["part"] == "3 cost"
             and r["status"] == "ok"}
    assert sorted(costs) == [f"hooks vs tiny draft step, CPU tensors, batch {bs}"
                             for bs in (1, 256, 32)]
    for data in costs.values():
        assert data["hook_us"] > 0 and data["eager_step_us"] > data["hook_us"]
    assert report["device"] == "cpu" and report["spectrace"] == os.path.join(ROOT, "spectrace")


def test_require_cuda_refuses_a_machine_without_one():
    res = _run("--require-cuda", timeout=180)
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"skipped: no CUDA device: {REASON}" in res.stderr


def test_graph_part_fails_when_a_pass_is_counted_twice(tmp_path, monkeypatch):
    """The eager draft check can fail: a width hook that counts every pass twice."""
    from spectrace.families.draft_passes import DraftPasses
    count = DraftPasses.count

    def twice(self, key):
        count(self, key)
        count(self, key)

    table = gpu_check.Table("no CUDA here")
    part_ok = gpu_check.Table("no CUDA here")
    gpu_check.part_graph(part_ok, torch, str(tmp_path / "ok"))
    monkeypatch.setattr(DraftPasses, "count", twice)
    gpu_check.part_graph(table, torch, str(tmp_path / "twice"))
    assert not part_ok.failed()
    failed = table.failed()
    assert failed and "passes counted" in failed[0].status, [r.status for r in table.rows]


@pytest.mark.sglang
def test_forward_mode_stand_in_matches_sglang():
    from sglang.srt.model_executor.forward_batch_info import ForwardMode
    assert hb.forward_mode() is ForwardMode
    for member in hb.ForwardModeStandIn:
        real = ForwardMode[member.name]
        assert member.is_extend() == real.is_extend(), member
        assert (member.is_extend(include_draft_extend_v2=True)
                == real.is_extend(include_draft_extend_v2=True)), member


def test_wheel_tags_fit_this_interpreter_only():
    minor = sys.version_info.minor
    import platform
    arch = platform.machine()
    assert gpu_check._fits("py3", "none", "any")
    assert gpu_check._fits(f"cp3{minor}", f"cp3{minor}", f"manylinux_2_17_{arch}")
    assert gpu_check._fits("cp38", "abi3", f"manylinux2014_{arch}")
    assert not gpu_check._fits(f"cp3{minor + 1}", f"cp3{minor + 1}", f"manylinux_2_17_{arch}")
    assert not gpu_check._fits(f"cp3{minor}", f"cp3{minor}", "macosx_11_0_arm64")
    assert not gpu_check._fits(f"cp3{minor}", f"cp3{minor}", "manylinux_2_17_s390x")


def test_mrv2_step_cost_check_passes_whole_steps_and_fails_a_missing_phase(tmp_path):
    """The MRV2 case's step-cost check (run on a GPU after its sync runs), here on the CPU
    clocks: every batch size's steps measured, step = verify = draft per bucket, passes;
    with the draft phase's hook gone (its samples missing) it names the bucket."""
    class Counter:  # gpu_check's SyncCounter.raised, without sync debug mode
        @staticmethod
        def raised(fn):
            fn()

    for broken in (False, True):
        with process_state.own_recorder(str(tmp_path / str(broken)), step_cost_every=1,
                             agreement_every=0) as rec:
            for bs in gpu_check.BATCHES:
                step = hb.VllmStep(bs, "spectrace", runner="mrv2")
                if broken:  # the speculator's `propose` put back unwrapped: no draft phase
                    [patch] = [pt for pt in step.patcher.patches if pt.attr == "propose"]
                    setattr(patch.owner, patch.attr, patch.original)
                    step.patcher.patches.remove(patch)
                try:
                    for _ in range(3):
                        step()
                finally:
                    step.close()
            problems = gpu_check.step_cost_problems(Counter, rec)
        if broken:
            assert problems and all("samples" in p for p in problems), problems
        else:
            assert problems == [], problems
