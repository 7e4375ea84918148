"""docs/architecture.md names every module of the package, and names no module that is
gone: a module is listed by its path (`spectrace/x.py`), or by its name in its package's
row (`spectrace/report/`: `judgement`, ...). What its prose names of the package (a path,
`module.name`, `Class.attribute`) exists, and its paragraph on process-wide state names
every module-level table `process.reset()` clears."""
from __future__ import annotations

import ast
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


# -- what the prose names resolves (issue 44: the doc had drifted) ---------------------------
# A backticked path with a folder in it (`report/judgement.py`, `doctor/files/`) is a file
# or folder of the repository or of the package; a backticked dotted name that starts with
# a module's name (`vllm_engine._FIRST_COMPUTED`, `rules.buckets.GapRule`, `process.on_reset`)
# or a class of the package (`Steps.start_span`) is something that module or class defines.
# The package is read with `ast`, not imported (no torch, no runtime). Names that are not
# the package's (a runtime's `Scheduler.update_from_output`, a file name such as
# `steps.sh`) and its words (a finding code, a resource attribute: a string in its source)
# are left alone.

_FILE_SUFFIXES = (".py", ".sh", ".json", ".jsonl", ".pth", ".md", ".yml", ".yaml", ".txt")


def _tree(path: str) -> ast.Module:
    with open(os.path.join(ROOT, path), encoding="utf-8") as fh:
        return ast.parse(fh.read(), path)


def _dotted_modules() -> dict[str, list[str]]:
    """Each module's and package's dotted name and every tail of it (`vllm_engine`,
    `adapters.vllm_engine`, `spectrace.adapters.vllm_engine`) -> its files."""
    out: dict[str, list[str]] = {}
    for root, dirs, files in os.walk(os.path.join(ROOT, "spectrace")):
        dirs[:] = [d for d in dirs if d not in ("__pycache__", "assets")]
        for f in files:
            if not f.endswith(".py"):
                continue
            path = os.path.relpath(os.path.join(root, f), ROOT)
            parts = path[:-3].split(os.sep)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            for i in range(len(parts)):
                out.setdefault(".".join(parts[i:]), []).append(path)
    return out


def _names_in(body) -> dict[str, ast.AST]:
    """The names a module or class body defines (functions, classes, assignments,
    imports), each with its node."""
    out: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = node
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        out[n.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                out[(a.asname or a.name).split(".")[0]] = node
    return out


def _class_attributes(cls: ast.ClassDef) -> set[str]:
    """A class's attributes: its body's names and what its methods assign to `self.`."""
    out = set(_names_in(cls.body))
    for node in ast.walk(cls):
        if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name) and node.value.id == "self"):
            out.add(node.attr)
    return out


def _classes() -> dict[str, list[ast.ClassDef]]:
    out: dict[str, list[ast.ClassDef]] = {}
    for path in _modules():
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ClassDef):
                out.setdefault(node.name, []).append(node)
    return out


def _string_constants(path: str) -> set[str]:
    return {n.value for n in ast.walk(_tree(path))
            if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def _resolves(path: str, rest: list[str]) -> bool:
    """Whether `rest` (`["Recorder", "inflight"]`) names something module `path` defines:
    a name it defines, an attribute of a class it defines, a submodule of a package; one
    name may also be an attribute of any class it defines (`steps.begin`: `Steps.begin`)."""
    if not rest:
        return True
    tree = _tree(path)
    names = _names_in(tree.body)
    node = names.get(rest[0])
    if node is None:
        return len(rest) == 1 and any(
            rest[0] in _class_attributes(c) for c in ast.walk(tree) if isinstance(c, ast.ClassDef))
    if len(rest) == 1:
        return True
    if isinstance(node, ast.ClassDef):
        return len(rest) == 2 and rest[1] in _class_attributes(node)
    return True  # an attribute of a value or an import: not followed further


def test_names_in_the_prose_resolve():
    doc = _doc()
    modules = _dotted_modules()
    classes = _classes()
    vocabulary = set().union(*map(_string_constants, _modules()))
    wrong = []
    for line in doc.splitlines():
        row = line.split("`")[1] if line.startswith("| `") else ""
        bases = ("", "spectrace") + ((row,) if row.endswith("/") else ())
        for tok in re.findall(r"`([A-Za-z_][\w./-]*/[\w./-]*)`", line):
            # a path: from the repository's root, the package's or its table row's folder
            if not any(os.path.exists(os.path.join(ROOT, base, tok)) for base in bases):
                wrong.append(tok)
    for tok in sorted(set(re.findall(r"`([A-Za-z_][\w.]*)`", doc))):
        if "." not in tok or tok.endswith(_FILE_SUFFIXES) or tok in vocabulary:
            continue
        parts = tok.split(".")
        if not all(p.isidentifier() for p in parts):
            continue
        prefix = next((i for i in range(len(parts), 0, -1)
                       if ".".join(parts[:i]) in modules), 0)
        if prefix:
            if not any(_resolves(path, parts[prefix:])
                       for path in modules[".".join(parts[:prefix])]):
                wrong.append(tok)
        elif parts[0] in classes and len(parts) == 2:
            if not any(parts[1] in _class_attributes(c) for c in classes[parts[0]]):
                wrong.append(tok)
    assert wrong == [], f"docs/architecture.md names what the code does not have: {wrong}"


def test_process_wide_state_is_named():
    """The module-level tables and caches `process.reset()` clears (`on_reset(X.clear)`)
    are the exceptions to "no module-level registry": the doc names each, with its module."""
    doc = _doc()
    missing = []
    for path in _modules():
        for node in ast.walk(_tree(path)):
            if (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(
                    node.func, "id", None)) == "on_reset" and node.args
                    and isinstance(node.args[0], ast.Attribute)
                    and isinstance(node.args[0].value, ast.Name)):
                module = os.path.splitext(os.path.basename(path))[0]
                name = f"{module}.{node.args[0].value.id}"
                if f"`{name}`" not in doc:
                    missing.append(name)
    assert missing == [], f"name in docs/architecture.md's state paragraph: {missing}"
