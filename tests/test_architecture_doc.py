"""docs/architecture.md names every module of the package, and names no module that is
gone: a module is listed by its path (`spectrace/x.py`), or by its name in its package's
row (`spectrace/report/`: `judgement`, ...)."""
from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _doc() -> str:
    with open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8") as fh:
        return fh.read()


def _modules() -> list[str]:
    out = []
    for root, dirs, files in os.walk(os.path.join(ROOT, "spectrace")):
        dirs[:] = [d for d in dirs if d not in ("__pycache__", "assets")]
        out += [os.path.relpath(os.path.join(root, f), ROOT) for f in files
                if f.endswith(".py") and f != "__init__.py"]
    return sorted(out)


def test_every_module_is_named():
    doc = _doc()
    rows = {line.split("`")[1]: line for line in doc.splitlines()
            if line.startswith("| `spectrace/") and line.split("`")[1].endswith("/")}
    missing = []
    for path in _modules():
        name = os.path.splitext(os.path.basename(path))[0]
        row = rows.get(os.path.dirname(path) + "/", "")
        if f"`{path}`" not in doc and f"`{name}`" not in row:
            missing.append(path)
    assert missing == [], f"add to docs/architecture.md: {missing}"


def test_no_module_named_is_gone():
    gone = [p for p in re.findall(r"`(spectrace/[\w/]+\.py)`", _doc())
            if not os.path.exists(os.path.join(ROOT, p))]
    assert gone == []
