"""Inside each package of ``dualflow``, modules import each other in a cycle only where the
package's docstring names the cycle (issue 37).

Every import counts, as in ``tests/test_layering.py``. A cycle is named by a paragraph of the
package's ``__init__`` docstring that begins with "Import cycle" and names every module of the
cycle in double backquotes, as in ``core`` or ``methods.layout`` (names relative to the package;
``__init__`` for the package itself), saying why the modules need each other.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.test_layering import MODULES, PACKAGE, imports_of, module_name, unit_of

PACKAGES = sorted(
    p.parent for p in MODULES if p.name == "__init__.py" and p.parent.parent == PACKAGE
)


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo += graph.get(node, ())
    return seen


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The graph's strongly connected parts of two or more nodes (its import cycles).

    Example:
        >>> cycles({"a": {"b"}, "b": {"a", "c"}, "c": set()})
        [{'a', 'b'}]
    """
    reach = {node: _reachable(graph, node) for node in graph}
    found: list[set[str]] = []
    for node in sorted(graph):
        if node in reach[node] and not any(node in part for part in found):
            found.append({other for other in reach[node] if node in reach[other]})
    return found


def relative(module: str, package: str) -> str:
    """``dualflow.tensor.methods.layout`` -> ``methods.layout`` inside ``dualflow.tensor``."""
    return "__init__" if module == package else module.removeprefix(package + ".")


def cycle_notes(docstring: str) -> list[set[str]]:
    """The module names (in double backquotes) of each "Import cycle" paragraph of a docstring."""
    paragraphs = re.split(r"\n\s*\n", docstring)
    return [
        set(re.findall(r"``([\w.]+)``", text))
        for text in paragraphs
        if text.lstrip().startswith("Import cycle")
    ]


def package_cycles(folder: Path) -> list[set[str]]:
    """The import cycles among one package's modules, each as names relative to the package."""
    package = module_name(folder / "__init__.py")
    inside = [p for p in MODULES if unit_of(module_name(p)) == unit_of(package)]
    graph = {
        module_name(p): {i.module for i in imports_of(p) if unit_of(i.module) == unit_of(package)}
        - {module_name(p)}
        for p in inside
    }
    return [{relative(m, package) for m in part} for part in cycles(graph)]


def unnamed(found: list[set[str]], notes: list[set[str]]) -> list[list[str]]:
    """The cycles no note names in full, and the notes that name no cycle (stale ones)."""
    missing = [sorted(part) for part in found if not any(part <= note for note in notes)]
    stale = [sorted(note) for note in notes if not any(part <= note for part in found)]
    return missing + stale


@pytest.mark.parametrize("folder", PACKAGES, ids=[p.name for p in PACKAGES])
def test_every_cycle_inside_a_package_is_named_in_its_docstring(folder: Path) -> None:
    docstring = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
    bad = unnamed(package_cycles(folder), cycle_notes(docstring))
    assert not bad, (
        f"dualflow/{folder.name}: import cycles (or stale notes) that the package docstring does "
        f"not name in an 'Import cycle' paragraph: {bad}"
    )


def test_the_check_finds_unnamed_and_stale_cycles() -> None:
    doc = "Map.\n\nImport cycles: ``a`` and ``b`` need each other because...\n\nOther ``c``."
    assert cycle_notes(doc) == [{"a", "b"}]
    assert unnamed([{"a", "b"}], cycle_notes(doc)) == []
    assert unnamed([{"a", "b", "c"}], cycle_notes(doc)) == [["a", "b", "c"], ["a", "b"]]
    assert unnamed([], cycle_notes(doc)) == [["a", "b"]]
    assert len(PACKAGES) > 10 and PACKAGE / "tensor" in PACKAGES
