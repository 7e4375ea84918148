"""Test tiers (README "Tests"; the markers are registered in pyproject.toml).

A test marked with one of `TIERS` needs what that tier names; every other test is in the
fast tier: it needs only `spectrace[test]` (no torch, SGLang or vLLM, no network, no
server) and is marked `fast` here, so `pytest -m fast` selects it. Under `pytest -m fast`:

- modules whose `pytestmark` names a tier are not imported (none of their tests is fast);
- torch, SGLang and vLLM cannot be imported: a fast test that imports one fails loudly,
  naming the marker it needs, even where they are installed.

The hooks are imported into tests/conftest.py, whose own collection hook calls `mark_tiers`.
"""
from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import sys
from pathlib import Path

import pytest

# marker -> what a test with it needs (the same words as pyproject.toml's markers)
TIERS = {
    "torch": "PyTorch",
    "sglang": "SGLang 0.5.23 (and torch)",
    "vllm": "the vLLM environment",
    "trainers": "the trainers' environment (speculators, SpecForge, Model Optimizer)",
    "sources": "released runtime sources (scripts/fetch-release-sources)",
    "browser": "Chromium",
    "prometheus": "the Prometheus server or promtool",
    "tmux": "tmux",
    "grafana_schema": "node and Grafana's schema packages (npm ci --prefix tests/grafana_schema)",
    "wheel": "PyPI or pip's cache, to build and install spectrace's wheel",
    "slow": "time: it waits out real timeouts",
}
# packages the fast tier never imports -> the marker a test importing one needs
HEAVY_PACKAGES = {"torch": "torch", "sglang": "sglang", "sgl_kernel": "sglang", "vllm": "vllm"}


def fast_only(config) -> bool:
    """The run selects the fast tier alone (`pytest -m fast`)."""
    return (config.getoption("markexpr", "") or "").strip() == "fast"


class _Unimportable(importlib.abc.Loader):
    def __init__(self, name: str) -> None:
        self.name = name

    def create_module(self, spec):
        top = self.name.split(".")[0]
        mark = HEAVY_PACKAGES[top]
        raise ModuleNotFoundError(
            f"the fast tier (`pytest -m fast`) imports no {top}: mark the test that needs it "
            f"@pytest.mark.{mark} (a whole module: `pytestmark = pytest.mark.{mark}`) and "
            f"import {top} inside it (tests/tiers.py, README 'Tests')", name=self.name)

    def exec_module(self, module) -> None:  # never reached: create_module raises
        raise AssertionError(self.name)


class FastTierGuard(importlib.abc.MetaPathFinder):
    """Makes the heavy packages unimportable, as in an environment without them."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HEAVY_PACKAGES:
            return importlib.machinery.ModuleSpec(name, _Unimportable(name))
        return None


def module_tiers(path: Path) -> set[str]:
    """The tier markers a test module's `pytestmark` names (read without importing it)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError):
        return set()  # let pytest import it and report the problem
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            names |= {n.attr for n in ast.walk(node.value) if isinstance(n, ast.Attribute)
                      and isinstance(n.value, ast.Attribute) and n.value.attr == "mark"}
    return names & set(TIERS)


def pytest_configure(config) -> None:
    if fast_only(config):
        already = sorted(m for m in HEAVY_PACKAGES if m in sys.modules)
        if already:
            raise pytest.UsageError(f"the fast tier: {already} were imported before the tests "
                                    "started (by a plugin or conftest); they must not be")
        sys.meta_path.insert(0, FastTierGuard())


def pytest_ignore_collect(collection_path: Path, config):
    if (fast_only(config) and collection_path.suffix == ".py"
            and collection_path.name.startswith("test_") and module_tiers(collection_path)):
        return True
    return None


def mark_tiers(items) -> None:
    """Marks `fast` every test without a tier marker (tests/conftest.py calls it from its
    pytest_collection_modifyitems, before `-m` deselects)."""
    for item in items:
        if not any(item.get_closest_marker(m) for m in TIERS):
            item.add_marker(pytest.mark.fast)
