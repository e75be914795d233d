"""Usage-weighted PyTorch API coverage: which PyTorch names do programs use, and how many of those
uses name something dualflow has.

Scans Python files for ``torch.x``, ``nn.X``, ``F.x``, ``init.x``, ``optim.X``,
``lr_scheduler.X``, ``torch.utils.data.X`` (through whatever names the file imports them as, from
``torch`` or from ``dualflow`` in a port) and Tensor methods and attributes (``.view(...)``,
``.shape``: the names ``torch.Tensor`` has, listed in ``pytorch_tensor_names.txt``, called or
read on anything that is not a module), then looks each up in the matching dualflow namespace.

    python scripts/pytorch_coverage.py [PATH ...] [--json] [--strict]

Default paths: ``examples/`` (ports included) and ``tests/compat/programs/``. ``--strict`` exits
1 when a use names something dualflow lacks. Run under a Python with torch,
``--write-tensor-names`` regenerates the Tensor name list.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TENSOR_NAMES = Path(__file__).with_name("pytorch_tensor_names.txt")
DEFAULT_PATHS = (ROOT / "examples", ROOT / "tests" / "compat" / "programs")
# PyTorch namespace -> the dualflow module with the same meaning (longest prefix wins)
NAMESPACES = {
    "torch": "dualflow",
    "torch.nn": "dualflow.nn",
    "torch.nn.functional": "dualflow.nn.functional",
    "torch.nn.init": "dualflow.nn.init",
    "torch.nn.utils": "dualflow.nn.utils",
    "torch.nn.parallel": "dualflow.nn.parallel",
    "torch.optim": "dualflow.optim",
    "torch.optim.lr_scheduler": "dualflow.optim.lr_scheduler",
    "torch.utils.data": "dualflow.utils.data",
    "torch.cuda": "dualflow.cuda",
}
SHORT = {"torch": "torch", "torch.nn": "nn", "torch.nn.functional": "F", "torch.nn.init": "init"}
SHORT |= {"torch.nn.utils": "nn.utils", "torch.optim": "optim", "torch.cuda": "cuda"}
SHORT |= {"torch.nn.parallel": "nn.parallel"}
SHORT |= {"torch.optim.lr_scheduler": "lr_scheduler", "torch.utils.data": "data"}
# dualflow modules with no PyTorch counterpart: uses of them are not PyTorch names
DUALFLOW_ONLY = {"ops", "data", "vision", "random", "training", "tracer", "graph_ir", "debug"}
DUALFLOW_ONLY |= {"errors", "bench", "kernels", "passes", "runtime", "gradcheck", "distributed"}
# Tensor names that programs mostly use on other objects (dict.values, str.split, set.add,
# PIL's resize, argparse's args.grad_dtype...)
NOT_TENSOR = {"values", "add", "split", "sort", "index", "copy", "name", "type", "apply"}
NOT_TENSOR |= {"resize", "grad_dtype"}


def load_tensor_names(path: Path = TENSOR_NAMES) -> tuple[set[str], set[str]]:
    """(method names, attribute names) of ``torch.Tensor`` from the committed list."""
    methods, attributes = set(), set()
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            kind, name = line.split()
            (methods if kind == "method" else attributes).add(name)
    return methods - NOT_TENSOR, attributes - NOT_TENSOR


def _torch_path(module: str) -> str | None:
    """``dualflow.nn`` -> ``torch.nn`` (a port's import); None for dualflow-only modules."""
    if module == "torch" or module.startswith("torch."):
        return module
    if module == "dualflow" or module.startswith("dualflow."):
        parts = module.split(".")
        if len(parts) > 1 and parts[1] in DUALFLOW_ONLY:
            return None
        return ".".join(["torch", *parts[1:]])
    return None


def aliases(tree: ast.AST) -> tuple[dict[str, str], set[str]]:
    """Local name -> the PyTorch dotted path it is bound to by the file's imports, and the local
    names of other imports (``np.round`` is not a Tensor method)."""
    bound: dict[str, str] = {}
    foreign: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                path = _torch_path(a.name)
                if path is None:
                    foreign.add(a.asname or a.name.split(".")[0])
                else:
                    # ``import torch.nn`` binds ``torch``; ``import dualflow as torch`` too
                    bound[a.asname or a.name.split(".")[0]] = path if a.asname else "torch"
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            base = _torch_path(node.module)
            for a in node.names:
                if base is None:
                    foreign.add(a.asname or a.name)
                else:
                    bound[a.asname or a.name] = f"{base}.{a.name}"
    return bound, foreign - set(bound)


def split_name(path: str) -> tuple[str, str] | None:
    """``torch.nn.functional.relu`` -> (``torch.nn.functional``, ``relu``): the longest known
    namespace and the first name under it; None for a bare namespace."""
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        namespace = ".".join(parts[:cut])
        if namespace in NAMESPACES:
            name = parts[cut]
            return None if f"{namespace}.{name}" in NAMESPACES else (namespace, name)
    return None


def _chain(node: ast.AST) -> list[str] | None:
    """``a.b.c`` -> ["a", "b", "c"]; None when the chain does not start at a plain name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


class Scanner(ast.NodeVisitor):
    """Counts the PyTorch names one file uses: ``uses[(namespace, name)]``."""

    def __init__(
        self, imports: tuple[dict[str, str], set[str]], methods: set[str], attributes: set[str]
    ) -> None:
        (self.bound, self.foreign), self.methods = imports, methods
        self.attributes = attributes
        self.uses: Counter = Counter()
        self._called: set[int] = set()

    def visit_Call(self, node: ast.Call) -> None:
        self._called.add(id(node.func))
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        chain = _chain(node)
        if chain is not None and chain[0] in self.bound:
            self._module_use(node, chain)
            return  # the inner attributes are part of this one path
        if chain is not None and chain[0] in self.foreign:
            return  # np.round, statistics.median: another module's names
        if isinstance(node.ctx, ast.Load):
            called = id(node) in self._called
            if (called and node.attr in self.methods) or (
                not called and node.attr in self.attributes
            ):
                self.uses[("Tensor", node.attr)] += 1
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        path = self.bound.get(node.id)
        if path is not None and isinstance(node.ctx, ast.Load):
            found = split_name(path)
            if found is not None:
                self.uses[found] += 1

    def _module_use(self, node: ast.Attribute, chain: list[str]) -> None:
        found = split_name(".".join([self.bound[chain[0]], *chain[1:]]))
        if found is not None:
            self.uses[found] += 1


def scan_file(path: Path, methods: set[str], attributes: set[str]) -> Counter:
    """The uses of PyTorch names in one file."""
    tree = ast.parse(path.read_text(), str(path))
    scanner = Scanner(aliases(tree), methods, attributes)
    scanner.visit(tree)
    return scanner.uses


def python_files(paths: list[Path]) -> list[Path]:
    found = []
    for path in paths:
        found.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return found


def exists(namespace: str, name: str) -> bool:
    """Whether dualflow has ``name`` where PyTorch has it (a Tensor name on a tensor)."""
    if namespace == "Tensor":
        import dualflow  # noqa: PLC0415 - the scan itself needs no dualflow

        # the class first: reading a property on a sample tensor can raise (x.mT of a 1-d one)
        return hasattr(dualflow.Tensor, name) or hasattr(dualflow.ones(1), name)
    module = importlib.import_module(NAMESPACES[namespace])
    return hasattr(module, name)


def report(uses: Counter) -> dict[str, Any]:
    """Usage-weighted and distinct-name shares, per namespace and overall, and what is missing."""
    present = {key: exists(*key) for key in uses}
    groups: dict[str, dict[str, Any]] = {}
    for (namespace, name), count in uses.items():
        label = SHORT.get(namespace, namespace)
        group = groups.setdefault(label, {"uses": 0, "found": 0, "names": 0, "names_found": 0})
        group["uses"] += count
        group["names"] += 1
        if present[(namespace, name)]:
            group["found"] += count
            group["names_found"] += 1
    total = sum(uses.values())
    found = sum(c for key, c in uses.items() if present[key])
    missing = sorted(
        (
            (f"{SHORT.get(ns, ns)}.{name}", c)
            for (ns, name), c in uses.items()
            if not present[(ns, name)]
        ),
        key=lambda item: (-item[1], item[0]),
    )
    return {
        "uses": total,
        "share": found / total if total else 1.0,
        "names": len(uses),
        "name_share": sum(present.values()) / len(uses) if uses else 1.0,
        "namespaces": groups,
        "missing": missing,
    }


def write_tensor_names() -> None:
    """Regenerate ``pytorch_tensor_names.txt`` (needs torch)."""
    import inspect  # noqa: PLC0415

    import torch  # noqa: PLC0415

    lines = [
        f"# public names of torch.Tensor (torch {torch.__version__}): 'method NAME' or "
        "'attribute NAME'",
        "# regenerate: /work/torchvenv/bin/python scripts/pytorch_coverage.py --write-tensor-names",
    ]
    kinds = {"property", "getset_descriptor", "member_descriptor"}
    names = sorted(n for n in dir(torch.Tensor) if not n.startswith("_"))
    static = {n: type(inspect.getattr_static(torch.Tensor, n)).__name__ for n in names}
    lines += [f"method {n}" for n in names if static[n] not in kinds]
    lines += [f"attribute {n}" for n in names if static[n] in kinds]
    TENSOR_NAMES.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--strict", action="store_true", help="exit 1 if a name is missing")
    parser.add_argument("--write-tensor-names", action="store_true")
    args = parser.parse_args(argv)
    if args.write_tensor_names:
        write_tensor_names()
        return 0
    methods, attributes = load_tensor_names()
    uses: Counter = Counter()
    for path in python_files(args.paths or list(DEFAULT_PATHS)):
        uses += scan_file(path, methods, attributes)
    result = report(uses)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(
            f"{result['uses']} uses of {result['names']} PyTorch names: "
            f"{result['share']:.1%} of uses and {result['name_share']:.1%} of names exist"
        )
        for label, g in sorted(result["namespaces"].items()):
            print(
                f"  {label:13} {g['found']:5}/{g['uses']:<5} uses  "
                f"{g['names_found']:4}/{g['names']:<4} names"
            )
        for name, count in result["missing"]:
            print(f"  missing: {name} ({count})")
    return 1 if args.strict and result["missing"] else 0


if __name__ == "__main__":
    sys.exit(main())
