"""The report is one pipeline (docs/architecture.md): source, figures, judgement, views. The
views render what the judgement found and never judge: no view module imports a rule, the
advisor, its cost model or the judgement at run time (a type under `TYPE_CHECKING` is
allowed). Read from the source, so a view that starts judging fails here."""
from __future__ import annotations

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPORT = os.path.join(ROOT, "spectrace", "report")
VIEWS = ("text", "html", "html_parts", "html_speculation", "html_compare", "compare_text",
         "watch", "format", "findings_file")
JUDGING = ("spectrace.rules", "spectrace.report.advisor", "spectrace.report.cost_model",
           "spectrace.report.judgement")


def _runtime_imports(path: str) -> set[str]:
    """Absolute names of the modules `path` imports, leaving out `if TYPE_CHECKING:`."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ["spectrace", "report"][:max(0, 3 - node.level)] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)  # `from . import advisor`
    return out


def test_views_import_no_rule_and_no_advisor():
    found = {}
    for name in VIEWS:
        bad = sorted(m for m in _runtime_imports(os.path.join(REPORT, f"{name}.py"))
                     if m.startswith(JUDGING))
        if bad:
            found[name] = bad
    assert found == {}, f"views that judge (they should read the Report): {found}"


def test_the_check_sees_an_import_of_a_rule():
    """The check itself: the figures module imports rules (it may), and is seen doing so."""
    assert any(m.startswith("spectrace.rules")
               for m in _runtime_imports(os.path.join(REPORT, "figures.py")))
