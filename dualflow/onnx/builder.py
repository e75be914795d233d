"""The graph walk: a captured forward's nodes into an ONNX ``ModelProto`` (opset 17).

Each graph node is handed to its op's converter (``converters``), which emits ONNX nodes through
an ``Emitter``: value names, literals and arrays as initializers, fresh names for intermediates.
With ``fold`` the nodes that read only state and constants (BatchNorm's scale and shift, a
transposed weight) are evaluated now and stored as initializers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.graph_ir.interpret import run_node
from dualflow.graph_ir.ir import Node, Value
from dualflow.onnx.capture import Captured, ExportError
from dualflow.ops.registry import OPS

OPSET = 17


class Emitter:
    """What a converter writes with: ONNX nodes, initializers, names for values."""

    def __init__(self, captured: Captured) -> None:
        try:
            import onnx  # noqa: PLC0415 - the optional extra, needed only to export
        except ImportError as exc:
            raise ImportError(
                "ONNX export needs the onnx package: pip install 'dualflow[onnx]'"
            ) from exc

        self.onnx, self.helper = onnx, onnx.helper
        self.captured = captured
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.names: dict[Value, str] = {}
        self.known: dict[Value, np.ndarray] = {}  # folded values (state, consts, computed)
        self._count = 0
        self.node_index = 0

    def fresh(self, hint: str = "t") -> str:
        """A new unique tensor name."""
        self._count += 1
        return f"{hint}_{self._count}"

    def const(self, array: Any, hint: str = "const") -> str:
        """An initializer holding ``array``; returns its name."""
        name = self.fresh(hint)
        self.initializers.append(self.onnx.numpy_helper.from_array(np.asarray(array), name))
        return name

    def ints(self, values: Any) -> str:
        """An int64 1-D initializer (shapes, axes, slice bounds)."""
        return self.const(np.asarray(list(values), dtype=np.int64), "ints")

    def name(self, item: Value | int | float | bool, dtype: Any = None) -> str:
        """The ONNX name of a Value (materialized if folded), or a literal as a 0-d constant."""
        if not isinstance(item, Value):
            return self.const(np.asarray(item, dtype=dtype), "literal")
        if item not in self.names:
            if item not in self.known:
                raise ExportError(f"internal: value %{item.id} used before it is defined")
            self.names[item] = self.const(self.known[item], _safe(item.name) or "init")
        return self.names[item]

    def emit(self, op_type: str, inputs: list[str], n_out: int = 1, **attrs: Any) -> list[str]:
        """Add one ONNX node; returns its output names."""
        outputs = [self.fresh(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(self.helper.make_node(op_type, inputs, outputs, **attrs))
        return outputs

    def one(self, op_type: str, inputs: list[str], **attrs: Any) -> str:
        """Add a one-output ONNX node; returns its output name."""
        return self.emit(op_type, inputs, **attrs)[0]

    def bind(self, value: Value, name: str) -> None:
        """Give graph value ``value`` the ONNX name ``name``."""
        self.names[value] = name

    def twin(self, node: Node) -> Node | None:
        """The same node in the second trace (dynamic axes), or None when traced once."""
        return self.captured.twin.get(self.node_index)

    def dynamic(self, value: Value) -> dict[int, str]:
        """Axis -> name of the value's dimensions that vary with the dynamic axes."""
        return self.captured.dynamic.get(value, {})


def _safe(name: str | None) -> str:
    return "".join(c if c.isalnum() or c in "._" else "_" for c in name) if name else ""


def convert(captured: Captured, fold: bool) -> Any:
    """The ModelProto of a captured forward."""
    from dualflow.onnx.converters import CONVERTERS  # noqa: PLC0415 - they import this module

    em = Emitter(captured)
    graph = captured.graph
    em.known.update(graph.consts)
    em.known.update(captured.state)
    for value, name in zip(graph.inputs, captured.input_names, strict=True):
        em.bind(value, name)
    for index, node in enumerate(graph.nodes):
        em.node_index = index
        if fold and _foldable(node, em.known):
            args = [em.known[v] if isinstance(v, Value) else v for v in node.inputs]
            with np.errstate(all="ignore"):  # eager computed (and warned about) the same
                em.known.update(zip(node.outputs, run_node(node, args)))
            continue
        converter = CONVERTERS.get(node.op)
        if converter is None:
            raise ExportError(_unsupported(node))
        try:
            outputs = converter(em, node)
        except ExportError as exc:
            where = node.loc or "an unknown line"
            raise ExportError(f"cannot export op {node.op!r} at {where}: {exc}") from exc
        for value, name in zip(node.outputs, outputs, strict=True):
            em.bind(value, name)
    return _model(em)


def _foldable(node: Node, known: dict[Value, Any]) -> bool:
    op = OPS[node.op]
    return not (op.impure or op.guard) and all(v in known for v in node.value_inputs)


def _unsupported(node: Node) -> str:
    why = {
        "guard": "Python control flow on a tensor's value (an `if` or `.item()`)",
        "dropout_mask": "dropout in training mode: call model.eval() first",
        "random_normal": "random sampling inside the forward",
        "random_uniform": "random sampling inside the forward",
        "assign": "an in-place write to state",
        "adam_update": "an optimizer's update (export the model, not its training step)",
        "batch_norm": "BatchNorm in training mode: call model.eval() first",
    }.get(node.op, "no ONNX converter for this op")
    return (
        f"cannot export op {node.op!r} at {node.loc or 'an unknown line'}: {why}; "
        "see docs/interop.md for the ops dualflow exports"
    )


def _model(em: Emitter) -> Any:
    helper, captured = em.helper, em.captured
    inputs = [_info(em, v, n) for v, n in zip(captured.graph.inputs, captured.input_names)]
    outputs = []
    for value, name in zip(captured.outputs, captured.output_names, strict=True):
        em.nodes.append(helper.make_node("Identity", [em.name(value)], [name]))
        outputs.append(_info(em, value, name))
    body = helper.make_graph(em.nodes, captured.graph.name, inputs, outputs, em.initializers)
    model = helper.make_model(
        body, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="dualflow"
    )
    model.ir_version = 8  # the onnx IR version of opset 17, which ONNX Runtime 1.18+ reads
    return model


def _info(em: Emitter, value: Value, name: str) -> Any:
    dims = em.dynamic(value)
    shape = [dims.get(i, d) for i, d in enumerate(value.shape)]
    elem = em.helper.np_dtype_to_tensor_dtype(np.dtype(value.dtype))
    return em.helper.make_tensor_value_info(name, elem, shape)
