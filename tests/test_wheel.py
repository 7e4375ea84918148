"""spectrace as a user gets it: the wheel is built (`pip wheel --no-deps`, the project's
own build backend), installed into a new environment (not editable; spectrace's install
requirements alone, then the `instrumentation` extra for the OpenTelemetry entry point),
and everything is run from there, in a folder outside the source tree, with no path to it:
`spectrace --help`, `spectrace grafana --out` (the repository's grafana/ files, byte for
byte) and `--check`, the start-up hook (installed, run at interpreter start-up), every
entry point of every group, and `spectrace report` (text, JSON, HTML) on a recorded folder,
equal to the source tree's report of it.

Why: every other test runs an editable install, so a file left out of the package (a
module, the report's assets, the hook) would pass them all and fail every user.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import zipfile

import pytest

from spectrace.grafana import files
from spectrace.report import build_report
from tests.test_report import lines, process, snapshot

pytestmark = pytest.mark.wheel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(ROOT, "pyproject.toml"), "rb") as _fh:
    PROJECT = tomllib.load(_fh)["project"]
GROUPS = {"console_scripts": PROJECT["scripts"],
          **{g: PROJECT["entry-points"][g] for g in
             ("sglang.srt.plugins", "vllm.general_plugins", "opentelemetry_instrumentor")}}
HOOK = ("spectrace_autostart.pth", "_spectrace_autostart.py")
LOAD_ENTRY_POINTS = """
import json, sys
from importlib.metadata import entry_points
out = {}
for group in sys.argv[1:]:
    for ep in entry_points(group=group):
        if ep.dist.name != "spectrace":
            continue
        try:
            ep.load()
            out.setdefault(group, {})[ep.name] = ep.value
        except ImportError as exc:
            out.setdefault(group, {})[ep.name] = f"ImportError: {exc.name}"
print(json.dumps(out))
"""


def run(cmd, cwd, env, timeout=300):
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, f"{cmd}: exit {out.returncode}\n{out.stdout}\n{out.stderr}"
    return out.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(wheel path, the new environment's bin/, a folder outside the source tree, its env)"""
    tmp = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
           and not k.startswith("SPECTRACE_")}
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check",
         "-w", str(tmp / "dist"), ROOT], tmp, env, timeout=600)
    [wheel] = [str(p) for p in (tmp / "dist").iterdir() if p.suffix == ".whl"]
    run([sys.executable, "-m", "venv", str(tmp / "venv")], tmp, env)
    bindir = str(tmp / "venv" / "bin")
    run([os.path.join(bindir, "python"), "-m", "pip", "install", "--disable-pip-version-check",
         wheel], tmp, env, timeout=600)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    (tmp / "work").mkdir()
    return wheel, bindir, tmp / "work", env


def py(installed, code: str, *args) -> str:
    _, bindir, work, env = installed
    return run([os.path.join(bindir, "python"), "-c", code, *args], work, env)


def test_the_wheel_holds_the_package_the_hook_and_the_entry_points(installed):
    wheel = installed[0]
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        [ep_file] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        entry_points_txt = z.read(ep_file).decode()
    tracked = subprocess.run(["git", "ls-files", "spectrace"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    assert set(tracked) <= names, sorted(set(tracked) - names)
    assert set(HOOK) <= names
    assert {n.split("/")[0] for n in names} == {
        "spectrace", *HOOK, os.path.basename(ep_file.rsplit("/", 1)[0])}
    for group, eps in GROUPS.items():
        assert f"[{group}]" in entry_points_txt
        for name, value in eps.items():
            assert f"{name} = {value}" in entry_points_txt, (group, name)


def test_spectrace_comes_from_the_new_environment_not_the_source_tree(installed):
    _, bindir, work, _ = installed
    where = json.loads(py(installed, "import json, sys, spectrace; print(json.dumps("
                                      "[spectrace.__file__, sys.path]))"))
    venv = os.path.dirname(bindir)
    assert where[0].startswith(os.path.join(venv, "lib")), where[0]
    paths = [os.path.realpath(p or work) for p in where[1]]  # "": the current folder
    assert not [p for p in paths if p == ROOT or p.startswith(ROOT + os.sep)], paths


def test_help_lists_every_command(installed):
    _, bindir, work, env = installed
    out = run([os.path.join(bindir, "spectrace"), "--help"], work, env)
    assert all(c in out for c in ("report", "doctor", "grafana")), out
    out = run([os.path.join(bindir, "spectrace"), "grafana", "--help"], work, env)
    assert "--selector" in out and "--check" in out


def test_grafana_out_writes_the_repositorys_files(installed):
    _, bindir, work, env = installed
    run([os.path.join(bindir, "spectrace"), "grafana", "--out", "g"], work, env)
    for path in files.files():
        with open(work / "g" / path, encoding="utf-8") as mine, \
                open(os.path.join(ROOT, "grafana", path), encoding="utf-8") as repo:
            assert mine.read() == repo.read(), path
    out = run([os.path.join(bindir, "spectrace"), "grafana", "--check",
               os.path.join(ROOT, "grafana")], work, env)
    assert "as spectrace" in out


def test_the_start_up_hook_is_installed_and_runs_at_start_up(installed):
    found = json.loads(py(installed, """
import json, os, site, sys
pkgs = site.getsitepackages()
print(json.dumps({"files": [f for f in %r if any(os.path.isfile(os.path.join(p, f))
                                              for p in pkgs)],
                  "ran": "_spectrace_autostart" in sys.modules}))""" % (HOOK,)))
    assert found == {"files": list(HOOK), "ran": True}
    # with spectrace on, the hook hands over to spectrace.autostart without an error
    _, bindir, work, env = installed
    out = subprocess.run([os.path.join(bindir, "python"), "-c",
                          "import sys; print('spectrace.autostart' in sys.modules)"],
                         cwd=work, env={**env, "SPECTRACE_ENABLED": "1"},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr
    assert "failed to start" not in out.stderr


def test_report_on_a_recorded_folder(installed, tmp_path):
    _, bindir, work, env = installed
    folder = tmp_path / "spectrace-data"
    process(folder, "sglang-h-1", metrics=lines(snapshot(5, 4), snapshot(10, 9)))
    process(folder, "sglang-h-2", metrics=lines(snapshot(8, 2, steps=4)))
    exe = os.path.join(bindir, "spectrace")
    text = run([exe, "report", str(folder)], work, env)
    assert "sglang-h-1" in text and "sglang-h-2" in text
    mine = json.loads(run([exe, "report", str(folder), "--json"], work, env))
    assert mine == json.loads(json.dumps(build_report(str(folder)).to_json()))
    run([exe, "report", str(folder), "--html", "page.html"], work, env)
    page = (work / "page.html").read_text()
    assert "uPlot" in page and len(page) > 30_000  # the assets went into the wheel


def test_every_entry_point_loads(installed):
    wheel, bindir, work, env = installed
    groups = list(GROUPS)
    loaded = json.loads(py(installed, LOAD_ENTRY_POINTS, *groups))
    # spectrace's install requirements alone: all but the OpenTelemetry instrumentor, which
    # needs what opentelemetry-instrument comes with (the `instrumentation` extra)
    expect = {g: dict(eps) for g, eps in GROUPS.items()}
    expect["opentelemetry_instrumentor"] = {
        "spectrace": "ImportError: opentelemetry.instrumentation"}
    assert loaded == expect
    run([os.path.join(bindir, "python"), "-m", "pip", "install", "--disable-pip-version-check",
         f"{wheel}[instrumentation]"], work, env, timeout=600)
    assert json.loads(py(installed, LOAD_ENTRY_POINTS, *groups)) == GROUPS
