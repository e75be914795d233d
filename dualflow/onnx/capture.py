"""Trace a forward for export: its graph as traced (before fusion), state arrays, dynamic dims.

The function runs under ``@dualflow.compile(passes="O0")`` without gradients, and the trace's
``source_graph`` (the graph before any pass, so no ``fused`` nodes) is exported. For dynamic
axes it is traced a second time with those axes one longer: the two graphs must match node for
node, and a dimension that differs between them is a dynamic one. Attributes that differ (a
``reshape`` to ``(batch, -1)``) are reconciled by the converters from both traces.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dualflow._config import no_grad
from dualflow.device import send
from dualflow.errors import ExportError
from dualflow.graph_ir.ir import Graph, Node, Value
from dualflow.tensor.core import Tensor
from dualflow.tracer import compile as compile_fn


@dataclass
class Captured:
    """One traced forward, ready to convert."""

    graph: Graph
    state: dict[Value, np.ndarray]  # state Value -> its array (initializers)
    input_names: list[str]
    outputs: list[Value]
    output_names: list[str]
    dynamic: dict[Value, dict[int, str]] = field(default_factory=dict)  # value -> axis -> name
    twin: dict[int, Node] = field(default_factory=dict)  # node index -> node of the 2nd trace
    twin_values: dict[Value, Value] = field(default_factory=dict)  # value -> 2nd trace's


def capture(
    fn: Callable,
    args: Sequence[Any],
    input_names: Sequence[str] | None,
    output_names: Sequence[str] | None,
    dynamic_axes: Mapping[str, Mapping[int, str]] | None,
) -> Captured:
    """Trace ``fn(*args)`` (and again with the dynamic axes grown when there are any).

    Tensors nested in tuples or lists (an LSTM's ``(h, c)``) become inputs of their own, named
    after the parameter and their position (``hidden_0``, ``hidden_1``)."""
    template, tensors = _flatten(args)
    names = list(input_names or _leaf_names(template, _parameter_names(fn, len(args))))
    if len(names) != len(tensors):
        raise ExportError(f"{len(names)} input names for {len(tensors)} input tensors")
    if any(isinstance(a, tuple | list) for a in args):
        user_fn = fn

        def fn(*flat: Tensor) -> Any:
            return user_fn(*_rebuild(template, flat))

    graph, state, outputs = _trace(fn, tensors)
    if len(graph.inputs) != len(tensors):
        raise ExportError(
            f"the traced forward reads {len(graph.inputs)} of its {len(tensors)} tensor "
            "arguments; every argument must be a tensor the forward uses"
        )
    out_names = list(output_names or _output_names(len(outputs)))
    if len(out_names) != len(outputs):
        raise ExportError(f"{len(out_names)} output names for {len(outputs)} outputs")
    captured = Captured(graph, state, names, outputs, out_names)
    axes = {k: dict(v) for k, v in (dynamic_axes or {}).items()}
    unknown = set(axes) - set(names) - set(out_names)
    if unknown:
        raise ExportError(f"dynamic_axes names {sorted(unknown)}, not an input or output name")
    grown = [_grown(t, axes.get(n, {})) for t, n in zip(tensors, names, strict=True)]
    if any(axes.get(n) for n in names):
        _compare(captured, _trace(fn, grown), axes)
    return captured


class _Leaf(int):
    """The position of a tensor among the flattened arguments (in a template)."""


def _flatten(args: Sequence[Any]) -> tuple[tuple, list[Tensor]]:
    """The arguments with each tensor replaced by its ``_Leaf`` position, and the tensors."""
    tensors: list[Tensor] = []

    def walk(value: Any) -> Any:
        if isinstance(value, tuple | list):
            return type(value)(walk(v) for v in value)
        tensors.append(value if isinstance(value, Tensor) else Tensor(np.asarray(value)))
        return _Leaf(len(tensors) - 1)

    return tuple(walk(a) for a in args), tensors


def _rebuild(template: Any, flat: Sequence[Tensor]) -> Any:
    if isinstance(template, _Leaf):
        return flat[template]
    return type(template)(_rebuild(t, flat) for t in template)


def _leaf_names(template: tuple, names: list[str]) -> list[str]:
    found: list[str] = []

    def walk(value: Any, name: str) -> None:
        if isinstance(value, _Leaf):
            found.append(name)
        else:
            for i, v in enumerate(value):
                walk(v, f"{name}_{i}")

    for value, name in zip(template, names, strict=True):
        walk(value, name)
    return found


def _parameter_names(fn: Callable, count: int) -> list[str]:
    target = getattr(fn, "forward", fn)
    try:
        params = [
            p.name
            for p in inspect.signature(target).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    return params[:count] if len(params) >= count else [f"input_{i}" for i in range(count)]


def _output_names(count: int) -> list[str]:
    return ["output"] if count == 1 else [f"output_{i}" for i in range(count)]


def _trace(fn: Callable, tensors: list[Tensor]) -> tuple[Graph, dict[Value, Any], list[Value]]:
    compiled = compile_fn(fn, passes="O0", fallback="error", cache_dir=False)
    with no_grad():
        compiled(*tensors)
    trace = compiled.history[-1]
    graph = trace.source_graph
    if graph.updates:
        written = ", ".join(str(target.name) for target, _ in graph.updates[:4])
        raise ExportError(
            f"the forward writes state ({written}): BatchNorm in training mode updates its "
            "running statistics (call model.eval() first), random sampling its generator"
        )
    arrays = [ref.read() for ref in trace.checks.refs]
    state = {v: np.asarray(send(a, "cpu")) for v, a in zip(graph.state, arrays, strict=True)}
    outputs = [graph.outputs[i] for i in trace.leaf_index]
    return graph, state, outputs


def _grown(tensor: Tensor, axes: Mapping[int, str]) -> Tensor:
    array = tensor.numpy()
    for axis in axes:
        if not -array.ndim <= axis < array.ndim:
            raise ExportError(f"dynamic axis {axis} of an input with {array.ndim} dimensions")
        n = array.shape[axis]
        array = np.take(array, np.arange(n + 1) % max(n, 1), axis=axis)
    return Tensor(array)


# ops whose size-holding attributes the converters rewrite for a dynamic axis
RECONCILED = ("reshape", "getitem", "broadcast_to")


def _same_constants(node: Node, twin: Node) -> None:
    """Refuse a node whose literals (or attributes the converters cannot rewrite) differ
    between the two traces: a number computed from a dynamic size, e.g. ``1 / batch``."""
    literals = [(a, b) for a, b in zip(node.inputs, twin.inputs) if not isinstance(a, Value)]
    differs = any(a != b and not (a != a and b != b) for a, b in literals)  # NaN equals NaN
    differs |= node.op not in RECONCILED and node.attrs != twin.attrs
    if differs:
        raise ExportError(
            f"cannot export op {node.op!r} at {node.loc or 'an unknown line'}: a number in it "
            f"depends on a dynamic axis ({node.inputs[1:]!r:.80} {node.attrs!r:.80}; e.g. a "
            "mean over the dynamic axis divides by its size); export with static shapes"
        )


def _compare(captured: Captured, second: tuple, axes: dict[str, dict[int, str]]) -> None:
    graph, (other, _, _) = captured.graph, second
    if [n.op for n in graph.nodes] != [n.op for n in other.nodes]:
        where = next(
            (n.loc for n, m in zip(graph.nodes, other.nodes, strict=False) if n.op != m.op), None
        )
        raise ExportError(
            "the forward runs different ops for another size of a dynamic axis (control "
            f"flow on a shape, near {where or 'the end'}); export it with static shapes"
        )
    for node, twin in zip(graph.nodes, other.nodes, strict=True):
        _same_constants(node, twin)
    for (value, array), (_, twin) in zip(graph.consts.items(), other.consts.items(), strict=True):
        if array.shape != twin.shape or not np.array_equal(array, twin, equal_nan=True):
            raise ExportError(
                f"a constant of shape {value.shape} depends on a dynamic axis (it differs for "
                "another size); export with static shapes"
            )
    pairs = list(zip(graph.inputs, other.inputs, strict=True))
    pairs += list(zip(graph.state, other.state, strict=True))
    pairs += [
        (a, b) for n, m in zip(graph.nodes, other.nodes) for a, b in zip(n.outputs, m.outputs)
    ]
    captured.twin_values = dict(pairs)
    captured.twin = dict(enumerate(other.nodes))
    sizes: dict[tuple[int, int], str] = {}  # (size, grown size) -> the input axis name
    for value, name in zip(graph.inputs, captured.input_names, strict=True):
        for axis, label in axes.get(name, {}).items():
            axis %= len(value.shape)
            sizes[value.shape[axis], captured.twin_values[value].shape[axis]] = label
    for value, twin in pairs:
        changed = {i for i, (a, b) in enumerate(zip(value.shape, twin.shape)) if a != b}
        if changed:
            captured.dynamic[value] = {
                i: sizes.get((value.shape[i], twin.shape[i]), f"{value.name or 'v'}_{value.id}_{i}")
                for i in changed
            }
    for value, name in zip(captured.outputs, captured.output_names, strict=True):
        for axis, label in axes.get(name, {}).items():
            found = captured.dynamic.get(value, {})
            if axis % max(len(value.shape), 1) not in found:
                raise ExportError(
                    f"dynamic_axes[{name!r}] names axis {axis}, which does not change with the "
                    f"inputs' dynamic axes (output shape {value.shape})"
                )
            found[axis % len(value.shape)] = label
