"""The pass manager: explicit pipelines (O0/O1/O2/exact), the passes they name, ``run_passes``.

A pass named ``p`` is the function ``p`` of the module ``dualflow/passes/p.py``: adding a pass is
that one file plus its name in a pipeline below (or in ``passes=``/``DUALFLOW_PASSES``); a pass
whose decisions depend on the device the plan runs on takes a ``device`` keyword, which
``run_passes`` gives it (``fuse``: its backend's cost model). The
manager verifies after each pass when asked (always in tests), dumps every intermediate graph's
text, keeps per-pass stats and names the failing pass (and the ones before it) in a
``CompileError``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dualflow._config import env_flag, user_path
from dualflow.device import Device
from dualflow.errors import CompileError, ConfigError
from dualflow.graph_ir.ir import Graph, Value
from dualflow.graph_ir.printer import print_graph
from dualflow.graph_ir.verify import verify

Pass = Callable[[Graph], Graph]

O0: tuple[str, ...] = ()
O1: tuple[str, ...] = ("dce", "cse")
O2: tuple[str, ...] = (
    "fold_bn", "fold", "slice_grads", "cse", "dce", "loss_with_grad", "fuse", "bucket_allreduce"
)  # fmt: skip
# Every pass that preserves bits and none that does not (docs/passes.md, "Value-changing rules"):
# O2 without fold_bn, and fusion without float64 sums.
EXACT: tuple[str, ...] = (
    "fold", "slice_grads", "cse", "dce", "loss_with_grad", "fuse_exact", "bucket_allreduce"
)  # fmt: skip
PIPELINES: dict[str, tuple[str, ...]] = {"O0": O0, "O1": O1, "O2": O2, "exact": EXACT}


def load_pass(name: str) -> Pass | None:
    """The pass ``name``: the function of that name in ``dualflow/passes/<name>.py``, or None.

    Example:
        >>> load_pass("dce").__name__, load_pass("manager"), load_pass("no such pass")
        ('dce', None, None)
    """
    if not (name.isascii() and name.isidentifier()):
        return None
    try:
        module = importlib.import_module(f"dualflow.passes.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"dualflow.passes.{name}":
            raise
        return None
    function = getattr(module, name, None)
    return function if callable(function) else None


def _pipeline_passes() -> dict[str, Pass]:
    found: dict[str, Pass] = {}
    for name in (name for pipeline in PIPELINES.values() for name in pipeline):
        function = load_pass(name)
        if function is None:
            raise ImportError(f"pass {name!r}: no dualflow/passes/{name}.py defining {name}()")
        found[name] = function
    return found


# Every known pass by name (the pipelines' ones, loaded now; others on first use by name). A
# pass returns its input object unchanged when it changes nothing.
PASSES: dict[str, Pass] = _pipeline_passes()


@dataclass(frozen=True)
class PassStats:
    """What one pass did: node counts before/after, wall time, bytes of values it removed."""

    name: str
    nodes_before: int
    nodes_after: int
    seconds: float
    bytes_removed: int


def split_entry(entry: str) -> tuple[str, Any]:
    """A pipeline entry's pass name and argument: ``"remat=0.5"`` is ``("remat", 0.5)`` (an int
    or float literal), ``"dce"`` is ``("dce", None)``.

    Example:
        >>> split_entry("remat=0.5"), split_entry("remat=4096"), split_entry("dce")
        (('remat', 0.5), ('remat', 4096), ('dce', None))
    """
    name, equals, text = entry.partition("=")
    if not equals:
        return entry, None
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError):
        value = text
    return name.strip(), value


def _check_entry(entry: str, setting: str) -> None:
    """An argument must be a number its pass accepts (the module's ``check_argument``)."""
    name, value = split_entry(entry)
    if value is None:
        return
    check = getattr(importlib.import_module(f"dualflow.passes.{name}"), "check_argument", None)
    if check is None:
        raise ConfigError(f"{setting}: pass {name!r} takes no argument (got {entry!r})")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{setting}: the argument of {entry!r} must be an int or a float")
    check(value, f"{setting}: {name}")


def resolve_passes(spec: str | tuple[str, ...] | list[str] | None = None) -> tuple[str, ...]:
    """Turn a pipeline spec into a tuple of known pass names.

    ``spec`` is "O0"/"O1"/"O2"/"exact", a comma-separated list ("dce,cse", the ``DUALFLOW_PASSES``
    format, where a pipeline's name stands for its passes), a sequence of names, or None
    (``DUALFLOW_PASSES`` when set, else O2). A pass taking an argument is named with it:
    ``remat=0.5``.

    Raises:
        ConfigError: an unknown pass name or a bad argument; the message names the setting it
            came from.

    Example:
        >>> resolve_passes("O1"), resolve_passes("cse, dce"), resolve_passes(())
        (('dce', 'cse'), ('cse', 'dce'), ())
        >>> resolve_passes("O1,remat=0.5")
        ('dce', 'cse', 'remat=0.5')
    """
    setting = f"passes={spec!r}"
    if spec is None:
        spec = os.environ.get("DUALFLOW_PASSES") or "O2"
        setting = f"DUALFLOW_PASSES={spec!r}"
    if isinstance(spec, str):
        parts = [s.strip() for s in spec.split(",")]
        spec = [p for s in parts if s for p in PIPELINES.get(s, (s,))]
    names = tuple(spec)
    for name in {split_entry(n)[0] for n in names}:
        if name not in PASSES and load_pass(name) is not None:
            PASSES[name] = load_pass(name)  # a pass module no pipeline names
    unknown = [n for n in names if split_entry(n)[0] not in PASSES]
    if unknown:
        raise ConfigError(
            f"{setting}: unknown pass name(s) {unknown}; known passes: {sorted(PASSES)} "
            f"(pipelines: {sorted(PIPELINES)})"
        )
    for name in names:
        _check_entry(name, setting)
    return names


def _defined(graph: Graph) -> set[Value]:
    return {v for n in graph.nodes for v in n.outputs} | set(graph.consts)


def _dump(directory: Path | None, index: int, name: str, graph: Graph, keep: list | None) -> None:
    if keep is not None:
        keep.append((name, graph))
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"{index:02d}-{name}.graph").write_text(print_graph(graph) + "\n")


def _takes_device(function: Pass) -> bool:
    try:
        return "device" in inspect.signature(function).parameters
    except (TypeError, ValueError):  # a callable without a signature: a plain pass
        return False


def _run_one(
    name: str, graph: Graph, done: list[str], check: bool, device: Device | str
) -> tuple[Graph, float]:
    where = f"pass {name!r} (after passes {done or 'none'})"
    start = time.perf_counter()
    try:
        entry, argument = split_entry(name)
        function = PASSES[entry]
        kw = {"device": device} if _takes_device(function) else {}
        result = function(graph, **kw) if argument is None else function(graph, argument, **kw)
    except CompileError as exc:
        raise CompileError(f"{where} failed: {exc}") from exc
    except Exception as exc:
        raise CompileError(f"{where} raised {type(exc).__name__}: {exc}") from exc
    seconds = time.perf_counter() - start  # the pass alone, not its verification
    if not isinstance(result, Graph):
        raise CompileError(f"{where} returned {type(result).__name__}, not a Graph")
    if check:
        try:
            verify(result)
        except CompileError as exc:
            raise CompileError(f"{where} produced an invalid graph: {exc}") from exc
    return result, seconds


def run_passes(
    graph: Graph,
    passes: str | tuple[str, ...] | list[str] | None = None,
    verify_each: bool = False,
    dump_dir: str | os.PathLike | None = None,
    keep: list[tuple[str, Graph]] | None = None,
    device: Device | str = "cpu",
) -> tuple[Graph, list[PassStats]]:
    """Run a pipeline of passes over ``graph`` for a plan on ``device``; returns the result and
    one PassStats per pass.

    Verification after each pass happens when ``verify_each`` or ``DUALFLOW_VERIFY_PASSES=1``;
    graphs are dumped as ``00-input.graph``, ``01-<pass>.graph``... into ``dump_dir`` or
    ``DUALFLOW_DUMP_IR`` when either is set (``dump_dir=""``: no dump). ``keep`` collects the
    same graphs in process: ``("input", graph)``, then ``(pass name, graph after it)`` (the same
    object as before when the pass changed nothing).

    Example:
        >>> from dualflow.graph_ir import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((2,), "float32")
        >>> _ = b.node("exp", [x]); b.output(x)
        >>> g, stats = run_passes(b.build(), "O1", verify_each=True)
        >>> len(g.nodes), [(s.name, s.nodes_before, s.nodes_after) for s in stats]
        (0, [('dce', 1, 0), ('cse', 0, 0)])
    """
    names = resolve_passes(passes)
    check = verify_each or env_flag("DUALFLOW_VERIFY_PASSES")
    dump = dump_dir if dump_dir is not None else os.environ.get("DUALFLOW_DUMP_IR") or None
    directory = user_path(dump) if dump else None
    _dump(directory, 0, "input", graph, keep)
    stats: list[PassStats] = []
    for index, name in enumerate(names, start=1):
        result, seconds = _run_one(name, graph, list(names[: index - 1]), check, device)
        removed = _defined(graph) - _defined(result) if result is not graph else set()
        stats.append(
            PassStats(name, len(graph), len(result), seconds, sum(v.nbytes for v in removed))
        )
        _dump(directory, index, name, result, keep)
        graph = result
    return graph, stats
