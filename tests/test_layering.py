"""DESIGN §1: imports only go downward (checked by parsing every module's imports with ``ast``),
and every module has a top docstring and at most 400 lines.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "dualflow"
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)
MAX_LINES = 400

_ABOVE_OPS = (
    "dualflow._tensor",
    "dualflow.tensor_methods",
    "dualflow.functions",
    "dualflow.autograd",
    "dualflow.tracer",
    "dualflow.graph_ir",
    "dualflow.passes",
    "dualflow.runtime",
    "dualflow.nn",
    "dualflow.optim",
    "dualflow.vision",
    "dualflow.distributed",
    "dualflow.training",
    "dualflow.data",
    "dualflow.bench",
)
_TENSOR_LAYER = ("dualflow._tensor", "dualflow.tensor_methods", "dualflow.autograd")
_ABOVE_AUTOGRAD = tuple(m for m in _ABOVE_OPS if m not in (*_TENSOR_LAYER, "dualflow.graph_ir"))


class Rule(NamedTuple):
    """Modules under ``where`` must not import ``forbidden`` (module level only, or anywhere)."""

    where: tuple[str, ...]
    forbidden: tuple[str, ...]
    anywhere: bool


RULES = [
    # A saved graph loads and runs without the eager machinery: never, not even in a function.
    Rule(
        ("dualflow.graph_ir", "dualflow.passes", "dualflow.runtime"),
        ("dualflow", "dualflow._tensor", "dualflow.autograd", "dualflow.tracer"),
        anywhere=True,
    ),
    # ops sits below tensor/autograd (it reaches the interpreter through ops.dispatch).
    Rule(("dualflow.ops",), ("dualflow",) + _ABOVE_OPS, anywhere=False),
    # The bottom layer imports nothing of dualflow but itself.
    Rule(
        (
            "dualflow.errors",
            "dualflow._config",
            "dualflow.device",
            "dualflow.disk_trust",
            "dualflow.disk_cache",
            "dualflow.kernels.numba_cache",
        ),
        ("dualflow",) + _ABOVE_OPS + ("dualflow.ops",),
        anywhere=False,
    ),
    # tensor/autograd never reach up into the layers built on them.
    Rule(_TENSOR_LAYER, _ABOVE_AUTOGRAD, anywhere=False),
]

# Known, accepted violations: (importing module, imported module). Keep this empty.
EXCEPTIONS: set[tuple[str, str]] = set()


class Import(NamedTuple):
    module: str
    line: int
    module_level: bool


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class ImportCollector(ast.NodeVisitor):
    """Collects every import with its absolute target; ``if TYPE_CHECKING:`` blocks are skipped."""

    def __init__(self, name: str, is_package: bool) -> None:
        self.package = name if is_package else name.rpartition(".")[0]
        self.depth = 0
        self.imports: list[Import] = []

    def _add(self, module: str, node: ast.stmt) -> None:
        self.imports.append(Import(module, node.lineno, self.depth == 0))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.package.split(".")
            base = base[: len(base) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        for alias in node.names:  # `from dualflow import tensor` imports a submodule
            self._add(source if alias.name == "*" else f"{source}.{alias.name}", node)

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def _visit_function(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _visit_function


def imports_of(path: Path) -> list[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    collector = ImportCollector(module_name(path), path.name == "__init__.py")
    collector.visit(tree)
    return collector.imports


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def violations(path: Path) -> list[str]:
    name = module_name(path)
    found = []
    for rule in RULES:
        if not any(_within(name, w) for w in rule.where):
            continue
        for imp in imports_of(path):
            if not (imp.module_level or rule.anywhere):
                continue
            # The bare package `dualflow` counts only when imported as such (not `dualflow.x`).
            hit = [
                f
                for f in rule.forbidden
                if (imp.module == f if f == "dualflow" else _within(imp.module, f))
            ]
            if hit and (name, imp.module) not in EXCEPTIONS:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{imp.line} imports {imp.module}")
    return found


IDS = [str(p.relative_to(PACKAGE.parent)) for p in MODULES]


def test_modules_were_found() -> None:
    assert len(MODULES) > 10
    assert PACKAGE / "_tensor.py" in MODULES


@pytest.mark.parametrize("path", MODULES, ids=IDS)
def test_imports_only_go_downward(path: Path) -> None:
    bad = violations(path)
    assert not bad, "layering violation (DESIGN §1):\n" + "\n".join(bad)


def test_exceptions_are_still_needed() -> None:
    used = {(module_name(p), i.module) for p in MODULES for i in imports_of(p)}
    assert used >= EXCEPTIONS, f"stale layering exceptions: {EXCEPTIONS - used}"


@pytest.mark.parametrize(
    "source, module, expected",
    [
        ("from dualflow._tensor import Tensor\n", "dualflow.graph_ir.graph", True),
        ("import dualflow.autograd.engine\n", "dualflow.passes.cse", True),
        ("from dualflow import tracer\n", "dualflow.runtime.plan", True),
        ("from ..._tensor import Tensor\n", "dualflow.runtime.cpu.kernels", True),
        ("def f():\n    from dualflow._tensor import Tensor\n", "dualflow.graph_ir.graph", True),
        ("def f():\n    from dualflow._tensor import Tensor\n", "dualflow.ops.conv", False),
        ("from dualflow._tensor import Tensor\n", "dualflow.ops.conv", True),
        ("from .registry import OPS\n", "dualflow.ops.conv", False),
        ("if TYPE_CHECKING:\n    from dualflow._tensor import T\n", "dualflow.ops.conv", False),
        ("import dualflow\n", "dualflow.ops.conv", True),
        ("from dualflow import errors\n", "dualflow.ops.conv", False),
        ("from dualflow import _tensor as t\n", "dualflow.ops.conv", True),
        ("from dualflow.ops import OPS\n", "dualflow.passes.cse", False),
        ("from dualflow.nn import Module\n", "dualflow.autograd.engine", True),
    ],
)
def test_the_checker_catches_violations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, module: str, expected: bool
) -> None:
    # Lay out a fake package so that module names (and relative imports) resolve like the real one.
    fake = tmp_path / "dualflow"
    path = fake.joinpath(*module.split(".")[1:]).with_suffix(".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    assert bool(violations(path)) is expected


@pytest.mark.parametrize("path", MODULES, ids=IDS)
def test_module_has_a_docstring_and_at_most_400_lines(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert ast.get_docstring(ast.parse(text)), f"{path.name} has no module docstring"
    lines = text.count("\n") + (not text.endswith("\n"))
    assert lines <= MAX_LINES, f"{path.name} has {lines} lines (max {MAX_LINES})"
