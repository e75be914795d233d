"""Errors from plan steps that name the user's op and line, as eager mode does.

Debug plans check every step's outputs for NaN/Inf; a fused step that fails is re-run op by op
from the graph as it was before fusion, on the same inputs, to name the exact op. An error a
step raises (a label out of range) is re-raised naming that step's op and source line instead
of the compiled function's call site. Backward nodes are located at their forward op
(``sqrt (backward) at train.py:27``).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from dualflow.errors import DualflowError, NumericalError
from dualflow.graph_ir.interpret import run_node
from dualflow.graph_ir.ir import Graph, Node
from dualflow.ops.registry import OPS

_BACKWARD = re.compile(r"^(\w+) \(backward\) at (.+)$")
_AT = re.compile(r"\n  at [^\n]*$")


def origin(op: str, loc: str | None) -> tuple[str, str, str]:
    """(what the user wrote, where, "output" or "gradient") for a node's op and location.

    Example:
        >>> origin("multiply", "sqrt (backward) at train.py:27")
        ('sqrt (backward)', 'train.py:27', 'gradient')
    """
    found = _BACKWARD.match(loc or "")
    if found:
        return f"{found.group(1)} (backward)", found.group(2), "gradient"
    return op, loc or "?", "output"


def _bad(array: Any) -> str | None:
    kind = getattr(getattr(array, "dtype", None), "kind", "")
    if kind and kind in "fc" and not bool(np.isfinite(array).all()):
        return "NaN" if bool(np.isnan(array).any()) else "Inf"
    return None


def check_finite(node: Node, inputs: tuple, *outputs: Any, unfused: Graph | None = None) -> None:
    """Debug plans: raise NumericalError naming the op and source line on NaN/Inf."""
    for array in outputs:
        kind = _bad(array)
        if kind is None:
            continue
        if OPS[node.op].region and unfused is not None:
            culprit = _first_bad_in_region(unfused, node, inputs)
            if culprit is not None:
                node, kind = culprit
        name, where, what = origin(node.op, node.loc)
        if OPS[node.op].region:  # no pre-fusion graph: every user line folded into it
            lines = dict.fromkeys(node.attrs.get("locs") or (node.loc,))
            where = "\n  ".join(f"created at {loc}" for loc in lines)
            raise NumericalError(f"{node.op}: output contains {kind}\n  {where}")
        raise NumericalError(f"{name}: {what} contains {kind}\n  created at {where}")


def _first_bad_in_region(unfused: Graph, fused: Node, inputs: tuple) -> tuple[Node, str] | None:
    """Run the ops a fused node stands for one by one; the first whose output is not finite."""
    producers = {v.id: n for n in unfused.nodes for v in n.outputs}
    env: dict[int, Any] = {v.id: a for v, a in zip(fused.inputs, inputs)}
    env.update({v.id: a for v, a in unfused.consts.items()})
    region: dict[int, Node] = {}
    stack = [v.id for v in fused.outputs]
    while stack:
        vid = stack.pop()
        node = producers.get(vid)
        if vid in env or node is None or id(node) in region:
            continue
        region[id(node)] = node
        stack += [v.id for v in node.value_inputs]
    order = {id(n): i for i, n in enumerate(unfused.nodes)}
    with np.errstate(all="ignore"):
        for node in sorted(region.values(), key=lambda n: order[id(n)]):
            args = [env[v.id] if hasattr(v, "id") else v for v in node.inputs]
            for value, array in zip(node.outputs, run_node(node, args)):
                env[value.id] = array
                kind = _bad(array)
                if kind is not None and not any(_bad(a) for a in args):
                    return node, kind
    return None


def step_of(exc: BaseException, filename: str, steps: dict[int, int]) -> int | None:
    """The plan step (node index) whose line of the generated source raised ``exc``."""
    tb = exc.__traceback__
    found = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            found = steps.get(tb.tb_lineno)
        tb = tb.tb_next
    return found


def raising_step(exc: BaseException, filename: str, steps: dict[int, int]) -> int | None:
    """The plan step that raised ``exc``, or raised the error ``exc`` was relocated from.

    Example:
        >>> raising_step(ValueError("not from a plan"), "<dualflow plan f>", {}) is None
        True
    """
    for error in (exc, exc.__cause__):
        found = None if error is None else step_of(error, filename, steps)
        if found is not None:
            return found
    return None


def step_lines(source: str) -> dict[int, int]:
    """Line of the generated plan source -> node index (steps call ``k<index>(...)``)."""
    found = {}
    for number, line in enumerate(source.splitlines(), start=1):
        match = re.search(r"\bk(\d+)\(", line)
        if match:
            found[number] = int(match.group(1))
    return found


def relocated(exc: BaseException, node: Node) -> BaseException | None:
    """A copy of a dualflow error raised by a plan step, located at that step's op and line."""
    if not isinstance(exc, DualflowError) or not node.loc:
        return None
    name, where, _ = origin(node.op, node.loc)
    text = _AT.sub("", str(exc))
    try:
        return type(exc)(f"{text}\n  at {where} (compiled step {name})")
    except TypeError:
        return None
