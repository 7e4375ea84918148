"""No import cycles in spectrace: the module-level imports between its modules (read with
`ast`; imports inside functions and under `TYPE_CHECKING` do not count) form no cycle,
and every module imports on its own, each in a fresh interpreter (a cycle that breaks
shows only when its module is the first one imported).

    python scripts/check_imports.py      # exit 1, naming the cycles or failing modules
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def modules() -> list[str]:
    out = []
    for folder, _dirs, files in os.walk(os.path.join(ROOT, "spectrace")):
        for f in sorted(files):
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(folder, f), ROOT)[:-3]
                out.append(rel.replace(os.sep, ".").removesuffix(".__init__"))
    return sorted(out)


def _path(name: str) -> str:
    base = os.path.join(ROOT, *name.split("."))
    return os.path.join(base, "__init__.py") if os.path.isdir(base) else base + ".py"


def imports(name: str, known: set[str]) -> set[str]:
    """The spectrace modules `name` imports at module level: a submodule, or the package
    whose `__init__` defines a name it imports (`from . import UnusableInput`)."""
    with open(_path(name), encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    package = name if _path(name).endswith("__init__.py") else name.rpartition(".")[0]
    out = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for n in ast.walk(node) if isinstance(node, (ast.If, ast.Try)) else (node,):
            if isinstance(n, ast.Import):
                out |= {a.name for a in n.names}
            elif isinstance(n, ast.ImportFrom):
                base = n.module or ""
                if n.level:
                    parts = package.split(".")[:len(package.split(".")) - n.level + 1]
                    base = ".".join(parts + ([n.module] if n.module else []))
                out |= {f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                        for a in n.names}
    return {m for m in out if m in known and m != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found, state = [], {}

    def visit(m: str, stack: list[str]) -> None:
        state[m] = "open"
        for d in sorted(graph[m]):
            if state.get(d) == "open":
                found.append(stack[stack.index(d):] + [d])
            elif d not in state:
                visit(d, stack + [d])
        state[m] = "done"
    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    return found


def main() -> int:
    known = set(modules())
    loops = cycles({m: imports(m, known) for m in known})
    for loop in loops:
        print("import cycle: " + " -> ".join(loop))
    env = dict(os.environ, PYTHONPATH=ROOT)
    failed = []
    for name in modules():
        run = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True,
                             text=True, env=env, cwd=ROOT)
        if run.returncode != 0:
            failed.append(name)
            print(f"{name}: {run.stderr.strip().splitlines()[-1]}")
    print(f"{len(loops)} import cycles; {len(known) - len(failed)} of {len(known)} modules "
          "import on their own")
    return 1 if failed or loops else 0


if __name__ == "__main__":
    sys.exit(main())
