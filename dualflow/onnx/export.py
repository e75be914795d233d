"""The public entry points: ``export`` (trace, convert, check, write) and ``export_graph``."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dualflow.onnx.builder import convert
from dualflow.onnx.capture import Captured, ExportError, capture


def export(
    fn: Callable,
    example_args: Sequence[Any] | Any,
    path: str | os.PathLike | None = None,
    *,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    dynamic_axes: Mapping[str, Mapping[int, str]] | None = None,
    fold_constants: bool = True,
) -> Any:
    """Export ``fn``'s forward (a Module in eval mode, or a function of tensors) to ONNX.

    The forward is traced once on ``example_args`` (twice with ``dynamic_axes``), so Python
    control flow is fixed at the traced path. Parameters and buffers become initializers.

    Args:
        fn: a ``dualflow.nn.Module`` (call ``.eval()`` first) or a function of tensors.
        example_args: the forward's tensor arguments (a tuple, or a single tensor).
        path: where to write the ``.onnx`` file; None writes nothing.
        input_names: names of the graph inputs (default: the forward's parameter names).
        output_names: names of the graph outputs (default ``output`` / ``output_0``...).
        dynamic_axes: as in ``torch.onnx.export``: ``{"x": {0: "batch"}, "output": {0:
            "batch"}}``; those dimensions become named, size-free dimensions.
        fold_constants: evaluate what depends only on parameters now (BatchNorm in eval mode
            becomes one scale and shift per channel); False keeps those ops in the model.

    Returns:
        The ``onnx.ModelProto`` (checked by ``onnx.checker.check_model``).

    Raises:
        ExportError: an op without an ONNX equivalent, control flow on tensor values, a
            training-mode forward, a shape that cannot vary with a dynamic axis; the message
            names the op and the user's source line.
        ImportError: the ``onnx`` package is not installed.

    Example:
        >>> import dualflow
        >>> from dualflow import nn
        >>> model = nn.Sequential(nn.Linear(4, 3), nn.ReLU()).eval()
        >>> proto = dualflow.onnx.export(model, (dualflow.randn(2, 4),))
        >>> [n.op_type for n in proto.graph.node]
        ['MatMul', 'Add', 'Relu', 'Identity']
    """
    args = tuple(example_args) if isinstance(example_args, tuple | list) else (example_args,)
    if getattr(fn, "training", False):
        raise ExportError(
            f"{type(fn).__name__} is in training mode; call .eval() before exporting (dropout "
            "and BatchNorm behave differently in training)"
        )
    captured = capture(fn, args, input_names, output_names, dynamic_axes)
    return _checked(convert(captured, fold_constants), path)


def export_graph(
    graph: Any,
    state: Sequence[Any] | None = None,
    path: str | os.PathLike | None = None,
    *,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    fold_constants: bool = True,
) -> Any:
    """Export a graph that is already built: a compiled trace's optimized ``graph`` (with
    ``fused`` nodes, expanded back into their ops) or one read by ``dualflow.graph_ir.load``.

    Shapes are the graph's own (no dynamic axes: a graph holds one trace). ``state`` gives the
    arrays of ``graph.state`` in order (what ``graph_ir.load`` returns beside the graph).

    Raises:
        ExportError: the graph writes state (a training step), lacks state arrays, or holds an
            op without a converter (named with its source line).

    Example:
        >>> import dualflow, numpy as np
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((2,), "float32", "x")
        >>> b.output(*b.node("exp", [x]))
        >>> [n.op_type for n in export_graph(b.build()).graph.node]
        ['Exp', 'Identity']
    """
    if graph.updates:
        raise ExportError("the graph writes state (a training step); export a forward graph")
    arrays = list(state or [])
    if len(arrays) != len(graph.state):
        raise ExportError(f"the graph reads {len(graph.state)} state arrays, {len(arrays)} given")
    names = list(input_names or [v.name or f"input_{i}" for i, v in enumerate(graph.inputs)])
    outputs = list(graph.outputs)
    out_names = list(output_names or _default_outputs(len(outputs)))
    captured = Captured(graph, dict(zip(graph.state, arrays)), names, outputs, out_names)
    return _checked(convert(captured, fold_constants), path)


def _checked(model: Any, path: str | os.PathLike | None) -> Any:
    """Run ONNX's checker (with shape inference) over ``model``, then write it to ``path``."""
    import onnx  # noqa: PLC0415 - the optional extra

    onnx.checker.check_model(model, full_check=True)
    if path is not None:
        onnx.save(model, os.fspath(path))
    return model


def _default_outputs(count: int) -> list[str]:
    return ["output"] if count == 1 else [f"output_{i}" for i in range(count)]
