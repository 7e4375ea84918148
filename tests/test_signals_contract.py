"""`spectrace/names.py` (the vocabulary `signals` re-exports) and the signal families that
declare their metrics (`spectrace/families/`) are the only places that spell a telemetry name: no other module of
spectrace has a string literal shaped like one (`spectrace.something`) unless it names a
module of spectrace itself (an `importlib` target)."""
from __future__ import annotations

import ast
import importlib.util
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = re.compile(r"^spectrace\.[A-Za-z0-9_.]+$")


def _literals():
    pkg = os.path.join(ROOT, "spectrace")
    for folder, _dirs, files in os.walk(pkg):
        for f in files:
            path = os.path.join(folder, f)
            if (not f.endswith(".py") or f in ("signals.py", "names.py") and folder == pkg
                    or folder == os.path.join(pkg, "families")):
                continue
            with open(path, encoding="utf-8") as fh:
                tree = ast.parse(fh.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    yield os.path.relpath(path, ROOT), node.lineno, node.value


def test_no_telemetry_name_outside_signals():
    found = [f"{path}:{line}: {text!r}" for path, line, text in _literals()
             if NAME.match(text) and not _is_module(text)]
    assert found == [], ("spell these in spectrace/signals.py or the family that declares "
                         "them (spectrace/families/): " + "; ".join(found))


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def test_the_check_sees_a_name():
    """Control: a name in signals.py has the shape the check looks for."""
    from spectrace import signals
    assert NAME.match(signals.SPAN_ATTR_FINDING_CODE) and NAME.match(signals.SPAN_STEP)
