"""Render a graph's schedule as one straight-line Python function (the plan's executor).

Each step becomes one direct call of the op's forward with its attrs as literals, every value a
local variable, and ``del`` right after a value's last use, so the executor adds almost nothing
to the kernels' own cost and frees every intermediate as early as possible.
"""

from __future__ import annotations

import keyword
import math
import re
from typing import Any

import numpy as np

from dualflow.errors import CompileError
from dualflow.graph_ir.ir import Graph, Node, Value
from dualflow.ops.registry import OPS
from dualflow.runtime.out_forward import writes_outs

# Text written into the executor comes from a graph that may have been read from a file: names
# must be plain ASCII identifiers, values plain data shown with ``repr`` (else passed as objects).
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def identifier(name: Any) -> str:
    """``name`` if it is a plain ASCII identifier (not a keyword), else CompileError.

    Example:
        >>> identifier("axis")
        'axis'
        >>> identifier("x=__import__('os')")
        Traceback (most recent call last):
        ...
        dualflow.errors.CompileError: "x=__import__('os')" is not a plain identifier; a plan never writes it into code
    """  # noqa: E501
    if type(name) is str and _IDENTIFIER.fullmatch(name) and not keyword.iskeyword(name):
        return name
    raise CompileError(f"{name!r} is not a plain identifier; a plan never writes it into code")


def literal(value: Any) -> str | None:
    """Python source for plain data (bool, int, finite float, str, None, and tuples/lists of
    them; numpy scalars as their Python value), or None for anything else.

    Example:
        >>> literal((1, "a", None)), literal(float("inf")), literal(slice(2))
        ("(1, 'a', None)", None, None)
    """
    if isinstance(value, np.generic):
        value = value.item()
    kind = type(value)  # exact types: a subclass could override __repr__
    if kind in (bool, int, str, type(None)) or (kind is float and math.isfinite(value)):
        return repr(value)
    if kind not in (tuple, list):
        return None
    parts = [literal(v) for v in value]
    if None in parts:
        return None
    text = ", ".join(parts) + ("," if kind is tuple and len(parts) == 1 else "")  # type: ignore[arg-type]
    return f"[{text}]" if kind is list else f"({text})"


def _name(value: Value) -> str:
    if type(value.id) is not int or value.id < 0:
        raise CompileError(f"value id {value.id!r} is not a non-negative int")
    return f"v{value.id}"


def _operand(value: Value | Any, namespace: dict[str, Any]) -> str:
    if isinstance(value, Value):
        return _name(value)
    text = literal(value)
    if text is None:  # inf/nan, arrays, slices: not Python source, pass the object itself
        text = f"c{len(namespace)}"
        namespace[text] = value
    return text


def _attr(key: str, value: Any, namespace: dict[str, Any]) -> str:
    text = literal(value)
    if text is None:
        text = f"a{len(namespace)}"
        namespace[text] = value
    return f"{identifier(key)}={text}"


def _kernel(
    node: Node, index: int, namespace: dict[str, Any], kernels: dict[str, Any], planned: bool
) -> str:
    name = f"k{index}"
    if planned:
        namespace[name] = kernels["out"](node)
    elif OPS[node.op].node_kernel is not None:  # built per node (a fused region's kernel)
        namespace[name] = kernels["node"](node)
    else:
        namespace[name] = OPS[node.op].forward
    return name


def _call_lines(
    node: Node,
    i: int,
    namespace: dict,
    kernels: dict,
    into: str | None,
    profile: bool,
    kernel: str | None = None,
) -> list[str]:
    """The source lines of one kernel step (``into``: the array variable it writes ``out=``;
    ``kernel``: its kernel's name when already built)."""
    args = ", ".join(_operand(v, namespace) for v in node.inputs)
    kernel = kernel or _kernel(node, i, namespace, kernels, into is not None)
    # a per-node kernel (a fused region's) was built from its attributes: passing them again
    # would build a keyword dict at every call (~0.3 us of a ~2 us small call)
    per_node = OPS.get(node.op) is not None and OPS[node.op].node_kernel is not None
    attrs = (
        "" if per_node else "".join(", " + _attr(k, v, namespace) for k, v in node.attrs.items())
    )
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
        if node.op == "matmul":  # its operands' layouts: the profile's numpy-alone reference
            lines.append(f"    seen[{i}] = _layouts(({args},), {into})")
    if kernels.get("check") is not None:  # debug mode: every step's outputs
        namespace[f"n{i}"] = node
        lines.append(f"    _check(n{i}, ({args}{',' if args else ''}), {outs.rstrip(',')})")
    return lines


def _into(node: Node, planned: set[Value], donated: dict[Value, Value]) -> str | None:
    """The variable a step writes ``out=``: its planned buffer, its donated state, or none; for
    a step writing a tuple of ``out=`` (``writes_outs``), the tuple of its donated states
    (None for a result it allocates), or none when no result is donated."""
    if writes_outs(node):
        if not any(v in donated for v in node.outputs):
            return None
        names = [_name(donated[v]) if v in donated else "None" for v in node.outputs]
        return f"({', '.join(names)})"
    out = node.outputs[0] if node.outputs else None
    if out in planned:
        return "o" + _name(out)[1:]
    if out in donated:
        return _name(donated[out])
    return None


def _unpack(graph: Graph, planned: tuple[Value, ...]) -> list[str]:
    """The executor's first lines: inputs, state, constants and planned buffers to locals."""
    sources = ((graph.inputs, "inputs"), (graph.state, "state"), (tuple(graph.consts), "consts"))
    lines = [f"    {', '.join(map(_name, vs))}, = {src}" for vs, src in sources if vs]
    if planned:
        lines.append(f"    {', '.join('o' + _name(v)[1:] for v in planned)}, = bufs")
    return lines


def render(
    graph: Graph,
    kernels: dict[str, Any],
    profile: bool = False,
    planned: tuple[Value, ...] = (),
    donated: dict[Value, Value] | None = None,
) -> tuple[str, dict]:
    """Python source of ``run(xp, inputs, state, consts, bufs)`` and its namespace.

    The function returns ``(outputs, update_values, None)`` or, when a guard fails,
    ``(None, guard_operands, guard_index)`` before any later step ran. Steps call their op's
    forward, or
    ``kernels["node"](node)`` for ops with per-node kernels; the steps defining ``planned``
    values write into ``bufs`` (one preallocated array per planned value, same order) with
    ``kernels["out"](node)``; those defining ``donated`` update values write into their state's
    own array (the update value returned is then that array).
    """
    donated = donated or {}
    namespace: dict[str, Any] = {"_check": kernels.get("check")}
    head = "def run(xp, inputs, state, consts, bufs=(), times=None, seen=None):"
    lines = [head, *_unpack(graph, planned)]
    planned_set = set(planned)
    chain = _Chain(namespace, kernels.get("chain", False) and not profile)
    kept = set(donated.values())  # a donated state's array: its name stays bound (``_dels``)
    for i, node in enumerate(graph.nodes):
        if OPS[node.op].guard:  # a failing guard ends the run before any update is committed
            lines += chain.flush()
            args = ", ".join(_operand(v, namespace) for v in node.inputs)
            attrs = "".join(", " + _attr(k, v, namespace) for k, v in node.attrs.items())
            namespace[f"k{i}"] = OPS[node.op].forward  # a failed guard returns what it saw
            lines.append(f"    if not k{i}(xp, {args}{attrs}): return None, ({args},), {i}")
            lines += _dels(graph, node, i, kept)
            continue
        into = _into(node, planned_set, donated)
        kernel = chain.take(node, i, kernels, into)
        if kernel is None or not chain.steps or chain.steps[-1][0] is not node:
            lines += chain.flush()
            lines += _call_lines(node, i, namespace, kernels, into, profile, kernel)
            lines += _dels(graph, node, i, kept)
        else:
            chain.dels += _dels(graph, node, i, kept)
    lines += chain.flush()
    outputs = ", ".join(map(_name, graph.outputs))
    updates = ", ".join(_name(new) for _, new in graph.updates)
    lines.append(
        f"    return ({outputs}{',' if graph.outputs else ''}), "
        f"({updates}{',' if graph.updates else ''}), None"
    )
    if profile:
        namespace.update(_profile_names())
    return "\n".join(lines) + "\n", namespace


def _dels(graph: Graph, node: Node, i: int, kept: set[Value]) -> list[str]:
    """The ``del`` after step ``i``: the values it read last (but the donated states in
    ``kept``: their arrays are written after their last read), and its unread outputs."""
    last_use = graph.last_use
    dead = [v for v in node.value_inputs if last_use.get(v) == i and v not in kept]
    dead += [v for v in node.outputs if v not in last_use]
    return [f"    del {', '.join(sorted({_name(v) for v in dead}))}"] if dead else []


class _Chain:
    """Consecutive small fused steps gathered into one ``kernel_chain.KernelChain`` call:
    ``take`` builds a step's kernel and keeps the step when it can join; ``flush`` writes the
    chain's lines (a lone step: its plain call)."""

    def __init__(self, namespace: dict, enabled: bool) -> None:
        self.namespace, self.enabled = namespace, enabled
        self.steps: list[tuple[Node, int, str, str]] = []  # (node, index, kernel, into)
        self.dels: list[str] = []

    def take(self, node: Node, i: int, kernels: dict, into: str | None) -> str | None:
        """The step's kernel name when built here (None: ``_call_lines`` builds it)."""
        if not self.enabled or into is None or into.startswith("("):
            return None
        if not all(isinstance(v, Value) for v in node.inputs) or len(node.outputs) != 1:
            return None
        name = _kernel(node, i, self.namespace, kernels, True)
        runner = self.namespace[name]
        if getattr(runner, "chain_link", None) is None and not hasattr(runner, "resolved"):
            return name
        self.steps.append((node, i, name, into))
        return name

    def flush(self) -> list[str]:
        steps, dels, self.steps, self.dels = self.steps, self.dels, [], []
        if len(steps) == 1:  # one step gains nothing from a chain
            node, i, name, into = steps[0]
            return _call_lines(node, i, self.namespace, {}, into, False, name) + dels
        if not steps:
            return []
        from dualflow.kernels.numba.kernel_chain import KernelChain  # noqa: PLC0415 - numba

        names: list[str] = []
        made: dict[Value, str] = {}  # a value an earlier step of the chain wrote: its array
        rows = []
        for node, _, name, into in steps:
            ins = [made.get(v, _name(v)) for v in node.inputs]
            for text in (*ins, into):
                if text not in names:
                    names.append(text)
            rows.append((self.namespace[name], tuple(map(names.index, ins)), names.index(into)))
            made[node.outputs[0]] = into
        chain = f"_chain{steps[0][1]}"
        self.namespace[chain] = KernelChain(tuple(rows))
        lines = [f"    {chain}(({', '.join(names)},))"]
        lines += [f"    {_name(node.outputs[0])} = {into}" for node, _, _, into in steps]
        return lines + dels


def _profile_names() -> dict[str, Any]:
    # a profiled run's clock, and the matmul layouts its numpy-alone reference times
    import time  # noqa: PLC0415

    from dualflow.runtime.gemm_alone import layouts  # noqa: PLC0415

    return {"_clock": time.perf_counter, "_layouts": layouts}
