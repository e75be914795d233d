"""Render a graph's schedule as one straight-line Python function (the plan's executor).

Each step becomes one direct call of the op's forward with its attrs as literals, every value a
local variable, and ``del`` right after a value's last use, so the executor adds almost nothing
to the kernels' own cost and frees every intermediate as early as possible.
"""

from __future__ import annotations

import math
from typing import Any

from dualflow.graph_ir.ir import Graph, Node, Value
from dualflow.graph_ir.printer import format_literal
from dualflow.ops.registry import OPS


def _name(value: Value) -> str:
    return f"v{value.id}"


def _operand(value: Value | Any, namespace: dict[str, Any]) -> str:
    if isinstance(value, Value):
        return _name(value)
    if isinstance(value, float) and not math.isfinite(value):  # inf/nan are not Python source
        name = f"c{len(namespace)}"
        namespace[name] = value
        return name
    return format_literal(value)


def _attr(key: str, value: Any, namespace: dict[str, Any]) -> str:
    try:
        text = format_literal(value)
        if "array(" in text or "inf" in text or "nan" in text or "slice(" in text:
            raise TypeError  # not valid Python source as text: pass the object itself
    except TypeError:
        name = f"a{len(namespace)}"
        namespace[name] = value
        return f"{key}={name}"
    return f"{key}={text}"


def _kernel(
    node: Node, index: int, namespace: dict[str, Any], kernels: dict[str, Any], planned: bool
) -> str:
    name = f"k{index}"
    if planned:
        namespace[name] = kernels["out"](node)
    elif node.op == "fused":
        namespace[name] = kernels["fused"](node)
    else:
        namespace[name] = OPS[node.op].forward
    return name


def _call_lines(
    node: Node, i: int, namespace: dict, kernels: dict, into: str | None, profile: bool
) -> list[str]:
    """The source lines of one kernel step (``into``: the array variable it writes ``out=``)."""
    args = ", ".join(_operand(v, namespace) for v in node.inputs)
    kernel = _kernel(node, i, namespace, kernels, into is not None)
    attrs = "".join(", " + _attr(k, v, namespace) for k, v in node.attrs.items())
    attrs += f", out={into}" if into is not None else ""
    # a multi-output op returns a tuple to unpack; a single output is bound directly
    outs = ", ".join(map(_name, node.outputs)) + (
        ","
        if OPS.get(node.op) is not None and OPS[node.op].nout > 1 and len(node.outputs) == 1
        else ""
    )
    lines = ["    t0 = _clock()"] if profile else []
    lines.append(f"    {outs} = {kernel}(xp{', ' if args else ''}{args}{attrs})")
    if profile:
        lines.append(f"    times[{i}] += _clock() - t0")
    if kernels.get("check") is not None:  # debug mode: every step's outputs
        namespace[f"n{i}"] = node
        lines.append(f"    _check(n{i}, ({args}{',' if args else ''}), {outs.rstrip(',')})")
    return lines


def _into(node: Node, planned: set[Value], donated: dict[Value, Value]) -> str | None:
    """The variable a step writes ``out=``: its planned buffer, its donated state, or none."""
    out = node.outputs[0] if node.outputs else None
    if out in planned:
        return f"o{out.id}"
    if out in donated:
        return _name(donated[out])
    return None


def render(
    graph: Graph,
    kernels: dict[str, Any],
    profile: bool = False,
    planned: tuple[Value, ...] = (),
    donated: dict[Value, Value] | None = None,
) -> tuple[str, dict]:
    """Python source of ``run(xp, inputs, state, consts, bufs)`` and its namespace.

    The function returns ``(outputs, update_values, None)`` or, when a guard fails,
    ``(None, None, guard_index)`` before any later step ran. The steps defining ``planned``
    values write into ``bufs`` (one preallocated array per planned value, same order) with
    ``kernels["out"](node)``; those defining ``donated`` update values write into their state's
    own array (the update value returned is then that array).
    """
    donated = donated or {}
    namespace: dict[str, Any] = {"_guard": kernels["guard"], "_check": kernels.get("check")}
    lines = ["def run(xp, inputs, state, consts, bufs=(), times=None):"]
    lines += [
        f"    {', '.join(map(_name, vs))}, = {src}"
        for vs, src in (
            (graph.inputs, "inputs"),
            (graph.state, "state"),
            (tuple(graph.consts), "consts"),
        )
        if vs
    ]
    if planned:
        lines.append(f"    {', '.join(f'o{v.id}' for v in planned)}, = bufs")
    planned_set = set(planned)
    kept = set(donated.values())
    last_use = graph.last_use
    for i, node in enumerate(graph.nodes):
        if node.op == "guard":
            args = ", ".join(_operand(v, namespace) for v in node.inputs)
            namespace[f"g{i}"] = node
            lines.append(f"    if not _guard(g{i}, {args}): return None, None, {i}")
        else:
            lines += _call_lines(
                node, i, namespace, kernels, _into(node, planned_set, donated), profile
            )
        # a donated state's array is written after its last read: keep its name bound
        dead = [v for v in node.value_inputs if last_use.get(v) == i and v not in kept]
        dead += [v for v in node.outputs if v not in last_use]
        if dead:
            lines.append(f"    del {', '.join(sorted({_name(v) for v in dead}))}")
    outputs = ", ".join(map(_name, graph.outputs))
    updates = ", ".join(_name(new) for _, new in graph.updates)
    lines.append(
        f"    return ({outputs}{',' if graph.outputs else ''}), "
        f"({updates}{',' if graph.updates else ''}), None"
    )
    if profile:
        import time  # noqa: PLC0415

        namespace["_clock"] = time.perf_counter
    return "\n".join(lines) + "\n", namespace
