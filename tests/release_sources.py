"""The Python sources of released runtime versions, read straight from what PyPI serves:
nothing is installed or imported, so no GPU, torch or runtime install is needed.

SGLang: the wheel (pure Python, a few MB), fetched with `pip download --no-deps`. vLLM: the
source distribution (10 – 50 MB, against 240 – 480 MB for a wheel full of CUDA kernels; the
Python files are the same), located through PyPI's JSON simple API and checked against the
sha256 PyPI lists, its Python files unpacked next to it.

They are fetched once, before the tests run, by `scripts/fetch_release_sources.py`
(scripts/test.sh runs it) into `$SPECTRACE_WHEEL_CACHE` (default
`~/.cache/spectrace-wheels`); the tests (marked `sources`) only read that folder, and one
that finds its release missing fails naming the script.
"""
from __future__ import annotations

import functools
import glob
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import urllib.request
import zipfile

INDEX = "https://pypi.org/simple"
FETCH = "python scripts/fetch_release_sources.py"

# Every release a test reads (tests/test_wrap_points.py, tests/test_vllm_wrap_points.py,
# tests/test_doctor_loader_facts.py); the fetch script fetches exactly these.
RELEASES = {
    "sglang": ("0.5.5", "0.5.8", "0.5.12", "0.5.16", "0.5.23"),
    "vllm": ("0.11.0", "0.13.0", "0.18.0", "0.20.0", "0.22.0", "0.26.0", "0.27.0", "0.28.0",
             "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0"),
}


class MissingRelease(AssertionError):
    """A release the tests read is not in the cache."""


def cache_dir() -> str:
    return os.environ.get("SPECTRACE_WHEEL_CACHE") or os.path.expanduser(
        "~/.cache/spectrace-wheels")


def _missing(package: str, version: str) -> MissingRelease:
    return MissingRelease(
        f"the released sources of {package} {version} are not in {cache_dir()}: run "
        f"`{FETCH}` once (it downloads every release in tests/release_sources.RELEASES; "
        f"scripts/test.sh runs it)")


def _check_listed(package: str, version: str) -> None:
    if version not in RELEASES.get(package, ()):
        raise MissingRelease(f"{package} {version} is not in tests/release_sources.RELEASES: "
                             f"add it there, then run `{FETCH}`")


# -- where a release lives in the cache -------------------------------------------------------
def _sglang_dir(version: str) -> str:
    return os.path.join(cache_dir(), version)


def _sglang_wheels(version: str) -> list[str]:
    return glob.glob(os.path.join(_sglang_dir(version), f"sglang-{version}-*.whl"))


def _sdist_dir(package: str, version: str) -> str:
    return os.path.join(cache_dir(), f"{package}-{version}")


def _sdist_names(package: str, version: str) -> tuple[str, str]:
    return (f"{package.replace('-', '_')}-{version}.tar.gz", f"{package}-{version}.tar.gz")


def _sdist_tree(package: str, version: str) -> str:
    return os.path.join(_sdist_dir(package, version), "src")


def python_tree(package: str, version: str) -> str:
    """The folder of a fetched vLLM release's Python files (its source distribution's)."""
    _check_listed(package, version)
    if not is_cached(package, version):
        raise _missing(package, version)
    return _sdist_tree(package, version)


def is_cached(package: str, version: str) -> bool:
    if package == "sglang":
        return len(_sglang_wheels(version)) == 1
    return os.path.exists(os.path.join(_sdist_tree(package, version), ".complete"))


# -- fetching (scripts/fetch_release_sources.py; never during a test) --------------------------
def fetch(package: str, version: str) -> None:
    """Download `package==version` into the cache (and unpack a vLLM sdist's Python files)."""
    if is_cached(package, version):
        return
    if package == "sglang":
        _fetch_sglang_wheel(version)
    else:
        _unpack_sdist(_fetch_sdist(package, version), _sdist_tree(package, version))


def _fetch_sglang_wheel(version: str) -> None:
    """Any platform's wheel has the same Python sources; the Linux x86_64 / CPython 3.11 one
    is asked for explicitly."""
    d = _sglang_dir(version)
    os.makedirs(d, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", f"sglang=={version}",
           "-d", d, "--only-binary=:all:", "--platform", "manylinux_2_34_x86_64",
           "--python-version", "3.11", "--implementation", "cp",
           "--disable-pip-version-check", "-q"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if out.returncode != 0 or len(_sglang_wheels(version)) != 1:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-2000:]}")


def _fetch_sdist(package: str, version: str) -> str:
    d = _sdist_dir(package, version)
    for name in _sdist_names(package, version):
        if os.path.exists(os.path.join(d, name)):
            return os.path.join(d, name)
    req = urllib.request.Request(f"{INDEX}/{package}/",
                                 headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        files = json.load(resp)["files"]
    [entry] = [f for f in files if f["filename"] in _sdist_names(package, version)]
    os.makedirs(d, exist_ok=True)
    target = os.path.join(d, entry["filename"])
    digest = hashlib.sha256()
    with (urllib.request.urlopen(entry["url"], timeout=600) as resp,
          open(target + ".part", "wb") as fh):
        for chunk in iter(lambda: resp.read(1 << 20), b""):
            digest.update(chunk)
            fh.write(chunk)
    if digest.hexdigest() != entry["hashes"]["sha256"]:
        raise RuntimeError(f"{entry['filename']}: bad sha256")
    os.replace(target + ".part", target)
    return target


def _unpack_sdist(archive: str, tree: str) -> None:
    """The release's Python files, unpacked once next to its source distribution."""
    with tarfile.open(archive) as t:
        for member in t:
            parts = member.name.split("/", 1)
            if member.isfile() and len(parts) == 2 and parts[1].endswith(".py"):
                out = os.path.join(tree, parts[1])
                os.makedirs(os.path.dirname(out), exist_ok=True)
                with t.extractfile(member) as src, open(out, "wb") as dst:
                    dst.write(src.read())
    open(os.path.join(tree, ".complete"), "w").close()


# -- reading (the tests) -----------------------------------------------------------------------
def python_files(package: str, version: str, folder: str) -> list[str]:
    """The paths (`folder/...py`) of a vLLM release's Python files under `folder`, sorted."""
    _check_listed(package, version)
    if not is_cached(package, version):
        raise _missing(package, version)
    root = _sdist_tree(package, version)
    return sorted(os.path.relpath(os.path.join(d, f), root)
                  for d, _, names in os.walk(os.path.join(root, folder))
                  for f in names if f.endswith(".py"))


@functools.lru_cache(maxsize=None)
def source(package: str, version: str, path: str) -> str | None:
    """The text of `path` (e.g. `vllm/model_executor/models/llama_eagle3.py`) in that
    release, or None when the release has no such file."""
    _check_listed(package, version)
    if not is_cached(package, version):
        raise _missing(package, version)
    if package == "sglang":
        [wheel] = _sglang_wheels(version)
        with zipfile.ZipFile(wheel) as z:
            try:
                return z.read(path).decode("utf-8")
            except KeyError:
                return None
    try:
        with open(os.path.join(_sdist_tree(package, version), path), encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        return None
