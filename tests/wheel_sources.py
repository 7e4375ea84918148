"""The released sources of a runtime, read with `ast`: nothing is imported, so no GPU,
torch or runtime install is needed. Shared by the wrap-point tests
(tests/test_wrap_points.py for SGLang, tests/test_vllm_wrap_points.py for vLLM); the files
come from tests/release_sources.py (SGLang's wheels, vLLM's source distributions).
"""
from __future__ import annotations

import ast
import functools

import pytest

from release_sources import source


def version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def since(versions: tuple[str, ...], v: str) -> tuple[str, ...]:
    """The versions from `v` on."""
    return tuple(x for x in versions if version_key(x) >= version_key(v))


def until(versions: tuple[str, ...], v: str) -> tuple[str, ...]:
    """The versions up to `v`."""
    return tuple(x for x in versions if version_key(x) <= version_key(v))


@functools.lru_cache(maxsize=None)
def module(package: str, version: str, path: str) -> ast.Module | None:
    text = source(package, version, path)
    return None if text is None else ast.parse(text, filename=f"{package}-{version}/{path}")


def get_class(package: str, version: str, path: str, name: str) -> ast.ClassDef:
    tree = module(package, version, path)
    assert tree is not None, f"{package} {version}: no {path}"
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise AssertionError(f"{package} {version}: no class {name} in {path}")


def base_classes(package: str, version: str, path: str, cls: ast.ClassDef):
    """(path, ClassDef) of the bases defined in the package: in the same module, or
    imported with `from package.x import Name` (attributes such as properties are
    inherited)."""
    tree = module(package, version, path)
    imported = {a.asname or a.name: n.module.replace(".", "/") + ".py"
                for n in tree.body if isinstance(n, ast.ImportFrom)
                and (n.module or "").startswith(package + ".") for a in n.names}
    local = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    for base in cls.bases:
        name = ast.unparse(base)
        where = path if name in local else imported.get(name)
        if where is not None and module(package, version, where) is not None:
            yield where, get_class(package, version, where, name)


def get_method(package: str, version: str, path: str, dotted: str,
               inherited: bool = False) -> ast.FunctionDef | None:
    """`Class.method` defined in the class itself (or, with `inherited`, in its bases)."""
    cls_name, meth = dotted.split(".")
    todo = [(path, get_class(package, version, path, cls_name))]
    while todo:
        where, cls = todo.pop(0)
        for node in cls.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == meth:
                return node
        if not inherited:
            return None
        todo.extend(base_classes(package, version, where, cls))
    return None


def instance_attrs(cls: ast.ClassDef) -> set[str]:
    """`self.x = ...` anywhere in the class, class-level (dataclass) fields, methods."""
    out = set()
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
        elif isinstance(node, ast.Assign):
            out.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.add(node.name)
    for node in ast.walk(cls):
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign))
                   else [])
        for t in targets:
            if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                    and t.value.id == "self"):
                out.add(t.attr)
    return out


def class_attrs(package: str, version: str, path: str, cls: str) -> set[str]:
    """The attributes of a class and of its base classes defined in the package."""
    names, todo = set(), [(path, get_class(package, version, path, cls))]
    while todo:
        where, node = todo.pop()
        names |= instance_attrs(node)
        todo.extend(base_classes(package, version, where, node))
    return names


def module_names(tree: ast.Module) -> set[str]:
    out = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Assign):
            out.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return out


def parameters(fn: ast.FunctionDef) -> list[str]:
    return [a.arg for a in fn.args.posonlyargs + fn.args.args]


def expressions(fn: ast.AST) -> set[str]:
    """Every expression inside `fn`, as `ast.unparse` spells it."""
    return {ast.unparse(n) for n in ast.walk(fn) if isinstance(n, ast.expr)}


def rows(table):
    """One pytest case per (row, version): the version first, then the row without its
    last field (the versions it holds in)."""
    return [pytest.param(version, *row[:-1], id=f"{version}-{row[1] or row[0]}-{row[-2]}")
            for row in table for version in row[-1]]


def adapter_points(runtime: str) -> dict:
    """(source path, target) -> the `WrapPoint` of spectrace's adapters for `runtime`."""
    import importlib

    from spectrace.adapters import ADAPTERS
    out = {}
    for name, ref in ADAPTERS.items():
        if name.startswith(runtime + "."):
            adapter, table = ref.split(":")
            for point in getattr(importlib.import_module(adapter), table):
                out[(name.replace(".", "/") + ".py", point.target)] = point
    return out


def unread_names(point, fn: ast.FunctionDef) -> list[str]:
    """The names in `point.reads` that `fn` has no parameter for (none: every hook
    argument is found by name in that release)."""
    if point.reads == "all":
        return []
    a = fn.args
    params = {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs}
    return [" / ".join(r) if isinstance(r, tuple) else r for r in point.reads
            if not params & ({r} if isinstance(r, str) else set(r))]
