"""``verify(graph)``: SSA, topological order, ``infer`` agreement, attr types, update rules and
effect ordering (every non-blocking all-reduce started is waited on exactly once, after it).

Every failure raises ``GraphVerifyError`` saying which node is wrong and how to fix it. The pass
manager runs it after every pass under tests, so a pass that breaks the IR is caught at once.
"""

from __future__ import annotations

import keyword
import re
from typing import Any

import numpy as np

from dualflow.errors import CompileError, DualflowError
from dualflow.graph_ir.ir import Graph, Node, Value
from dualflow.graph_ir.printer import format_node
from dualflow.ops.registry import OPS, Meta, NodeFormError

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class GraphVerifyError(CompileError):
    """The graph breaks an IR invariant."""


def plain_identifier(name: Any) -> bool:
    """Whether ``name`` is an ASCII identifier and no keyword: what code generators may write.

    Example:
        >>> plain_identifier("axis"), plain_identifier("a=1"), plain_identifier("lambda")
        (True, False, False)
    """
    return type(name) is str and bool(_IDENTIFIER.fullmatch(name)) and not keyword.iskeyword(name)


def plain_data(value: Any) -> bool:
    """Whether an attribute value is plain data: exact bool/int/float/str/None/Ellipsis, slices,
    tuples and lists of them, numeric numpy scalars and arrays (no subclass, object or text).

    Example:
        >>> plain_data((1, slice(None, 2), np.float32(1))), plain_data(print), plain_data({})
        (True, False, False)
    """
    kind = type(value)
    if kind in (bool, int, float, str, type(None)) or value is Ellipsis:
        return True
    if kind in (tuple, list):
        return all(plain_data(v) for v in value)
    if kind is slice:
        return all(plain_data(p) for p in (value.start, value.stop, value.step))
    if kind is np.ndarray or isinstance(value, np.generic):
        return value.dtype.kind in "biufc"
    return False


def _check_value(value: Value, node: Node | None) -> None:
    shape_ok = type(value.shape) is tuple and all(type(d) is int and d >= 0 for d in value.shape)
    try:
        dtype_ok = type(value.dtype) is str and np.dtype(value.dtype).kind in "biufc"
    except TypeError:
        dtype_ok = False
    if type(value.id) is not int or value.id < 0 or not shape_ok or not dtype_ok:
        raise _fail(
            node,
            f"value {value.id!r} has id/shape/dtype {value.id!r}/{value.shape!r}/{value.dtype!r}",
            "ids are ints, shapes tuples of ints, dtypes numeric numpy dtype names",
        )


def _fail(node: Node | None, problem: str, fix: str) -> GraphVerifyError:
    where = f"\n  node: {format_node(node)}" if node is not None else ""
    return GraphVerifyError(f"{problem}{where}\n  fix: {fix}")


def verify(graph: Graph) -> Graph:
    """Check every invariant of ``graph``; returns it unchanged so calls can be chained.

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((2,), "float32")
        >>> b.output(*b.node("exp", [x])); verify(b.build()).name
        'f'
    """
    defined: set[Value] = set()
    ids: set[int] = set()

    def define(value: Value, node: Node | None) -> None:
        _check_value(value, node)
        if value in defined or value.id in ids:
            raise _fail(
                node,
                f"%{value.id} is defined twice (SSA violated)",
                "give every new value a fresh id (use GraphBuilder.value)",
            )
        defined.add(value)
        ids.add(value.id)

    for value in (*graph.inputs, *graph.state, *graph.consts):
        define(value, None)
    for node in graph.nodes:
        for value in node.value_inputs:
            if value not in defined:
                raise _fail(
                    node,
                    f"%{value.id} is used before it is defined",
                    "schedule producers before their users",
                )
        _check_node(node)
        for value in node.outputs:
            define(value, node)
    _check_outputs_and_updates(graph, defined)
    _check_collectives(graph)
    return graph


def _check_collectives(graph: Graph) -> None:
    # Ranks must post and finish the same all-reduces: a start nobody waits for leaves a
    # request in flight (the next step deadlocks or reads a stale buffer), a second wait fails.
    started: dict[Value, Node] = {}
    waited: set[Value] = set()
    for node in graph.nodes:
        role = OPS[node.op].async_role
        if role == "start":
            started[node.outputs[0]] = node
        elif role == "wait":
            handle, x = node.inputs[0], node.inputs[1]
            start = started.get(handle)
            if start is None:
                raise _fail(
                    node,
                    "allreduce_wait's handle is not the output of an earlier allreduce_start",
                    "wait on the handle allreduce_start returned",
                )
            if handle in waited:
                raise _fail(node, f"all-reduce %{handle.id} is waited twice", "wait once")
            if x is not start.inputs[0] or node.attrs.get("comm") != start.attrs.get("comm"):
                raise _fail(
                    node,
                    "allreduce_wait must name the same array and communicator as its start",
                    f"pass %{start.inputs[0].id} and comm={start.attrs.get('comm')}",
                )
            waited.add(handle)
    for handle, start in started.items():
        if handle not in waited:
            raise _fail(start, f"all-reduce %{handle.id} is started but never waited", "wait it")


def _check_attrs(node: Node) -> None:
    # Attribute names and values end up in generated code: before anything reads them
    # (format_node included), names must be identifiers and values plain data.
    for key, value in node.attrs.items():
        if not plain_identifier(key) or not plain_data(value):
            raise _fail(
                None,
                f"{node.op!r} (at {node.loc!r}): attribute {key!r} = {value!r} is not plain data",
                "attribute names are identifiers, values bool/int/float/str/None/slices/tuples/"
                "lists/numeric arrays",
            )


def _check_node(node: Node) -> None:
    if type(node.op) is not str or not (node.loc is None or type(node.loc) is str):
        raise _fail(None, f"node op {node.op!r} / loc {node.loc!r}", "op and loc are strings")
    _check_attrs(node)
    op = OPS.get(node.op)
    if op is None:
        raise _fail(node, f"unknown op {node.op!r}", "register the op in dualflow.ops")
    if op.check_node is not None:  # synthetic ops (guard, fused): their form, not infer
        try:
            op.check_node(node)
        except NodeFormError as exc:
            raise _fail(node, str(exc), exc.fix) from None
        return
    metas = [
        Meta(v.shape, np.dtype(v.dtype)) if isinstance(v, Value) else Meta((), type(v))
        for v in node.inputs
    ]
    try:
        inferred = op.infer(*metas, **node.attrs)
    except (DualflowError, TypeError, ValueError) as exc:
        raise _fail(node, f"infer rejects the inputs: {exc}", "fix the inputs or attrs") from None
    if len(inferred) != len(node.outputs):
        raise _fail(
            node,
            f"{node.op} has {len(inferred)} outputs, the node {len(node.outputs)}",
            "declare one output value per op output",
        )
    for meta, value in zip(inferred, node.outputs):
        if tuple(meta.shape) != value.shape or np.dtype(meta.dtype).name != value.dtype:
            raise _fail(
                node,
                f"output %{value.id} is declared {value.dtype}{list(value.shape)} "
                f"but infer gives {np.dtype(meta.dtype).name}{list(meta.shape)}",
                "recompute output types with the op's infer",
            )


def _check_outputs_and_updates(graph: Graph, defined: set[Value]) -> None:
    for value in graph.outputs:
        if value not in defined:
            raise _fail(
                None, f"output %{value.id} is never defined", "return only values the graph defines"
            )
    seen: set[Value] = set()
    for target, new in graph.updates:
        if target not in graph.state:
            raise _fail(
                None,
                f"update target %{target.id} is not a state value",
                "updates may only write captured state",
            )
        if target in seen:
            raise _fail(
                None,
                f"state %{target.id} is updated twice",
                "keep only the last write of each state value",
            )
        seen.add(target)
        if new not in defined:
            raise _fail(None, f"update source %{new.id} is never defined", "define it first")
        if (new.shape, new.dtype) != (target.shape, target.dtype):
            raise _fail(
                None,
                f"update %{target.id} <- %{new.id} changes type "
                f"{target.dtype}{list(target.shape)} -> {new.dtype}{list(new.shape)}",
                "cast/reshape the new value to the state's type",
            )
