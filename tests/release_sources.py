"""The Python sources of released runtime versions, read straight from what PyPI serves:
nothing is installed or imported, so no GPU, torch or runtime install is needed.

SGLang: the wheel (pure Python, a few MB), fetched with `pip download --no-deps`. vLLM: the
source distribution (10 – 50 MB, against 240 – 480 MB for a wheel full of CUDA kernels; the
Python files are the same), located through PyPI's JSON simple API and checked against the
sha256 PyPI lists. Both are cached once in `$SPECTRACE_WHEEL_CACHE` (default
`~/.cache/spectrace-wheels`).
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


def cache_dir() -> str:
    return os.environ.get("SPECTRACE_WHEEL_CACHE") or os.path.expanduser(
        "~/.cache/spectrace-wheels")


@functools.lru_cache(maxsize=None)
def sglang_wheel(version: str) -> str:
    """The sglang wheel of `version`, downloaded once (any platform's wheel has the same
    Python sources; the Linux x86_64 / CPython 3.11 one is asked for explicitly)."""
    d = os.path.join(cache_dir(), version)
    found = glob.glob(os.path.join(d, f"sglang-{version}-*.whl"))
    if not found:
        os.makedirs(d, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", f"sglang=={version}",
               "-d", d, "--only-binary=:all:", "--platform", "manylinux_2_34_x86_64",
               "--python-version", "3.11", "--implementation", "cp",
               "--disable-pip-version-check", "-q"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, f"{' '.join(cmd)} failed:\n{out.stderr[-2000:]}"
        found = glob.glob(os.path.join(d, f"sglang-{version}-*.whl"))
    assert len(found) == 1, found
    return found[0]


@functools.lru_cache(maxsize=None)
def sdist(package: str, version: str) -> str:
    """The source distribution of `package==version`, downloaded once and checked."""
    d = os.path.join(cache_dir(), f"{package}-{version}")
    name = f"{package.replace('-', '_')}-{version}.tar.gz"
    path = os.path.join(d, name)
    alt = os.path.join(d, f"{package}-{version}.tar.gz")
    for p in (path, alt):
        if os.path.exists(p):
            return p
    req = urllib.request.Request(f"{INDEX}/{package}/",
                                 headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        files = json.load(resp)["files"]
    [entry] = [f for f in files if f["filename"] in (name, os.path.basename(alt))]
    os.makedirs(d, exist_ok=True)
    target = os.path.join(d, entry["filename"])
    digest = hashlib.sha256()
    with urllib.request.urlopen(entry["url"], timeout=600) as resp, open(target + ".part", "wb") as fh:
        for chunk in iter(lambda: resp.read(1 << 20), b""):
            digest.update(chunk)
            fh.write(chunk)
    assert digest.hexdigest() == entry["hashes"]["sha256"], f"{entry['filename']}: bad sha256"
    os.replace(target + ".part", target)
    return target


@functools.lru_cache(maxsize=None)
def sdist_tree(package: str, version: str) -> str:
    """The release's Python files, unpacked once next to its source distribution."""
    archive = sdist(package, version)
    tree = os.path.join(os.path.dirname(archive), "src")
    done = os.path.join(tree, ".complete")
    if not os.path.exists(done):
        with tarfile.open(archive) as t:
            for member in t:
                parts = member.name.split("/", 1)
                if member.isfile() and len(parts) == 2 and parts[1].endswith(".py"):
                    out = os.path.join(tree, parts[1])
                    os.makedirs(os.path.dirname(out), exist_ok=True)
                    with t.extractfile(member) as src, open(out, "wb") as dst:
                        dst.write(src.read())
        open(done, "w").close()
    return tree


@functools.lru_cache(maxsize=None)
def source(package: str, version: str, path: str) -> str | None:
    """The text of `path` (e.g. `vllm/model_executor/models/llama_eagle3.py`) in that
    release, or None when the release has no such file."""
    if package == "sglang":
        with zipfile.ZipFile(sglang_wheel(version)) as z:
            try:
                return z.read(path).decode("utf-8")
            except KeyError:
                return None
    try:
        with open(os.path.join(sdist_tree(package, version), path), encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        return None
