"""`instrument()` / `uninstrument()` against SGLang 0.5.23's real modules, in fresh
interpreters (SGLang's post-import state must not leak between tests)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from harness.server import cpu_env, server_args

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROBE = os.path.join(ROOT, "tests", "programs", "instrument_probe.py")


def run_probe(scenario: str, env: dict | None = None, timeout: int = 300) -> dict:
    """tests/programs/instrument_probe.py SCENARIO in a fresh interpreter."""
    e = cpu_env({k: v for k, v in os.environ.items() if not k.startswith("SPECTRACE_")})
    e = {k: v for k, v in e.items() if not k.startswith("SPECTRACE_")}
    e.update(env or {})
    out = subprocess.run([sys.executable, PROBE, scenario], capture_output=True, text=True,
                         env=e, timeout=timeout, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.sglang
def test_instrument_after_import_then_uninstrument_restores_the_originals():
    res = run_probe("after-import")
    assert all(res["wrapped"])
    assert all(res["second_same"])
    assert all(res["restored"])
    assert res["env_on"] == "1" and res["env_after"] is None


@pytest.mark.sglang
def test_instrument_before_import_wraps_on_import_and_reinstrument_works():
    res = run_probe("before-import")
    assert all(res["wrapped"])
    assert not any(res["after_un"])
    assert all(res["again"])


@pytest.mark.sglang
def test_env_alone_instruments_via_the_installed_startup_hook():
    """No code change: SPECTRACE_ENABLED=1 and the .pth hook installed with spectrace."""
    res = run_probe("as-started", env={"SPECTRACE_ENABLED": "1"})
    assert all(res["wrapped"]) and res["active"]


@pytest.mark.sglang
def test_bad_setting_in_auto_mode_leaves_process_uninstrumented():
    res = run_probe("as-started", env={"SPECTRACE_ENABLED": "1",
                                       "SPECTRACE_EXPORTERS": "file,carrier-pigeon"})
    assert not any(res["wrapped"]) and not res["active"]


@pytest.mark.sglang
def test_instrument_in_parent_reaches_engine_scheduler(tiny_models, tmp_path):
    """spectrace.instrument() in the launching process, then sglang.Engine(...): telemetry
    arrives from the spawned scheduler process."""
    models = tiny_models("partial")
    args = [a for a in server_args(models, port=0) if a != "--skip-server-warmup"]
    kwargs = {}
    for flag, val in zip(args[::2], args[1::2]):  # the same settings as the server tests
        key = flag.lstrip("-").replace("-", "_")
        if key not in ("host", "port"):
            kwargs[key] = int(val) if val.isdigit() else val
    data = tmp_path / "data"
    script = tmp_path / "engine_run.py"
    script.write_text(textwrap.dedent(f"""
        import json, os, sys, time
        import sgl_kernel  # the pure-torch CPU kernel stand-in (harness)
        from sglang.srt.runtime_context import override_platform
        import spectrace

        def exported(data):  # request-steps in the newest whole snapshot of each process
            total = 0
            for folder, _, names in os.walk(data):
                if "metrics.jsonl" not in names:
                    continue
                with open(os.path.join(folder, "metrics.jsonl")) as fh:
                    for line in reversed(fh.read().splitlines()):
                        try:
                            snap = json.loads(line)
                        except ValueError:
                            continue  # a line being written
                        total += sum(p["value"] for p in
                                     snap["metrics"].get("spectrace.spec.drafts", []))
                        break
            return total

        if __name__ == "__main__":
            spectrace.instrument(output_dir={str(data)!r}, metric_interval_s=0.5)
            override_platform(has_amx=True).install()
            import sglang
            engine = sglang.Engine(**{kwargs!r})
            out = engine.generate(input_ids=[3, 7, 11],
                                  sampling_params={{"max_new_tokens": 16, "temperature": 0}})
            deadline = time.time() + 300  # the scheduler's next export (0.5 s unloaded)
            while exported({str(data)!r}) < out["meta_info"]["spec_verify_ct"]:
                assert time.time() < deadline, "the scheduler never exported its totals"
                time.sleep(0.2)
            print(json.dumps({{"pid": os.getpid(), "verify": out["meta_info"]["spec_verify_ct"]}}))
            sys.stdout.flush()
            os._exit(0)  # Engine.shutdown() SIGKILLs the scheduler; exit at once
    """))
    env = {k: v for k, v in cpu_env().items() if not k.startswith("SPECTRACE_")}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=env, timeout=400, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr[-4000:]
    parent = json.loads(out.stdout.strip().splitlines()[-1])
    from conftest import run_report
    procs = [p for p in run_report(data)["processes"] if p["drafts"]]
    assert len(procs) == 1
    assert procs[0]["pid"] != parent["pid"]
    assert procs[0]["drafts"] == parent["verify"]
    assert procs[0]["mean_acceptance_length"] == 2.0
    # what an Engine user asserts in CI: the in-scheduler pair audit found nothing
    from spectrace.report import read_findings
    assert read_findings(str(data)) == []
