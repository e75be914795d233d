"""Measure import cycles in ``dualflow/``: the largest set of files that import each other.

Every import counts (module level, inside functions, under ``if TYPE_CHECKING:``, and
``importlib.import_module``/``__import__`` with a literal name), as drawn by a dependency graph.
Prints the size of the largest strongly connected component of files, its files, and the
cycles between folders (the top-level package or module under ``dualflow``).

Usage: ``python scripts/import_cycles.py [--list]``

Example:
    >>> graph = {"a": {"b"}, "b": {"a", "c"}, "c": set()}
    >>> sorted(map(sorted, components(graph)))
    [['a', 'b'], ['c']]
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "dualflow"


def module_name(path: Path) -> str:
    """``dualflow/a/b.py`` -> ``dualflow.a.b``; a package's ``__init__`` is the package."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(name: str, known: set[str]) -> str | None:
    """The longest prefix of ``name`` that is a module of the tree."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The modules of the tree that ``path`` imports, wherever the import is written."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            # ``from a import b`` imports the module ``a.b`` when there is one, else ``a``
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            arg = node.args[0]
            if called in ("import_module", "__import__") and isinstance(arg, ast.Constant):
                targets = [str(arg.value)]
        for target in targets:
            if (module := _resolve(target, known)) is not None:
                found.add(module)
    found.discard(name)
    return found


def graph() -> dict[str, set[str]]:
    """Module -> the modules of the tree it imports."""
    paths = [p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts]
    known = {module_name(p) for p in paths}
    return {module_name(p): imports_of(p, known) for p in paths}


def components(edges: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of a graph (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    part = set()
                    while (top := stack.pop()) != node:
                        part.add(top)
                        on_stack.discard(top)
                    on_stack.discard(node)
                    found.append(part | {node})
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def folder(module: str) -> str:
    """The folder (top-level package or module) a module belongs to; "" for ``dualflow``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print the largest cycle's files")
    args = parser.parse_args()
    edges = graph()
    largest = max(components(edges), key=len)
    print(f"files: {len(edges)}; largest import cycle: {len(largest) if len(largest) > 1 else 0}")
    if args.list:
        print("\n".join(sorted(largest)))
    folders: dict[str, set[str]] = {}
    for module, targets in edges.items():
        folders.setdefault(folder(module), set()).update(folder(t) for t in targets)
    for unit, targets in folders.items():
        targets.discard(unit)
    cycles = [sorted(part) for part in components(folders) if len(part) > 1]
    print(f"folders in a cycle: {cycles or 'none'}")


if __name__ == "__main__":
    main()
