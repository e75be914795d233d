"""ONNX converters of the structural ops (convolution, pooling, shapes, reductions, indexing)
and ``CONVERTERS``, the table from a registry op name to its converter.

Attributes that hold sizes (a reshape's target, a slice's stop) were recorded at the traced
sizes; with dynamic axes the converter compares them with the second trace's (``em.twin``) and
writes the ONNX form that holds for every size (``0``: copy the input's dimension, ``-1``: infer
it), or refuses with an ExportError when there is none.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.graph_ir.interpret import run_node
from dualflow.graph_ir.ir import Node, Value
from dualflow.onnx.capture import ExportError
from dualflow.onnx.elementwise import ELEMENTWISE, Converter
from dualflow.onnx.fused import convert_fused
from dualflow.onnx.recurrent import convert_gru_scan, convert_lstm_scan

_BIG = 2**62  # an ONNX slice end meaning "to the end"


def _x(em: Any, node: Node) -> str:
    return em.name(node.inputs[0])


def _pads(pad: Any) -> list[int]:
    return [int(pad[0]), int(pad[1]), int(pad[0]), int(pad[1])]


def _conv(em: Any, node: Node) -> list[str]:
    a = node.attrs
    inputs = [em.name(node.inputs[0]), em.name(node.inputs[1])]
    geometry = {"strides": list(a["stride"]), "pads": _pads(a["pad"])}
    geometry |= {"dilations": list(a["dilation"]), "group": int(a["groups"])}
    if node.op == "conv_transpose2d":
        geometry["output_padding"] = list(a["output_padding"])
        return [em.one("ConvTranspose", inputs, **geometry)]
    return [em.one("Conv", inputs, **geometry)]


def _pool(onnx_op: str, **extra: Any) -> Converter:
    def convert(em: Any, node: Node) -> list[str]:
        a = node.attrs
        shape = {"kernel_shape": list(a["ksize"]), "strides": list(a["stride"])}
        return [em.one(onnx_op, [_x(em, node)], pads=_pads(a["pad"]), **shape, **extra)]

    return convert


def _same_attr(em: Any, node: Node, key: str) -> Any:
    """``node.attrs[key]``, refused when it changes with the dynamic axes."""
    twin = em.twin(node)
    if twin is not None and twin.attrs.get(key) != node.attrs.get(key):
        raise ExportError(
            f"its {key} {node.attrs[key]!r} depends on a dynamic axis ({twin.attrs[key]!r} "
            "for the other size); export with static shapes"
        )
    return node.attrs[key]


def _reshape(em: Any, node: Node) -> list[str]:
    target = (
        list(node.attrs["shape"])
        if isinstance(node.attrs["shape"], tuple | list)
        else [node.attrs["shape"]]
    )
    twin = em.twin(node)
    if twin is not None:
        target = _dynamic_target(em, node, target, list(np.atleast_1d(twin.attrs["shape"])))
    return [em.one("Reshape", [_x(em, node), em.ints(target)])]


def _dynamic_target(em: Any, node: Node, target: list, other: list) -> list:
    x = node.inputs[0]
    varying = em.dynamic(x)
    changed = [i for i, (a, b) in enumerate(zip(target, other, strict=True)) if a != b]
    for i in changed:
        if i in varying and i < len(x.shape) and target[i] == x.shape[i]:
            target[i] = 0  # ONNX: copy the input's dimension i
        elif -1 not in target:
            target[i] = -1
        else:
            raise ExportError(
                f"its target shape {tuple(node.attrs['shape'])} depends on a dynamic axis in "
                "a way ONNX's Reshape cannot express (use -1 for the batch-dependent size)"
            )
    if varying and -1 not in target and not any(t == 0 for t in target):
        raise ExportError(f"its target shape {tuple(target)} fixes a dynamic axis")
    return target


def _transpose(em: Any, node: Node) -> list[str]:
    axes, ndim = node.attrs.get("axes"), len(node.inputs[0].shape)
    perm = [a % ndim for a in axes] if axes is not None else list(range(ndim))[::-1]
    return [em.one("Transpose", [_x(em, node)], perm=perm)]


def _broadcast_to(em: Any, node: Node) -> list[str]:
    shape = list(node.attrs["shape"])
    x, varying = node.inputs[0], em.dynamic(node.outputs[0])
    offset = len(shape) - len(x.shape)
    for i in varying:  # Expand keeps a dimension the target gives as 1
        if i < offset or x.shape[i - offset] != shape[i]:
            raise ExportError(f"it broadcasts a dynamic axis to the traced size {shape[i]}")
        shape[i] = 1
    return [em.one("Expand", [_x(em, node), em.ints(shape)])]


def _axes(node: Node) -> list[int]:
    axis, ndim = node.attrs.get("axis"), len(node.inputs[0].shape)
    if axis is None:
        return list(range(ndim))
    return [a % max(ndim, 1) for a in (axis if isinstance(axis, tuple | list) else [axis])]


def _reduce(onnx_op: str) -> Converter:
    def convert(em: Any, node: Node) -> list[str]:
        keep = int(bool(node.attrs.get("keepdims")))
        if onnx_op == "ReduceSum":  # opset 13+: axes as an input
            return [em.one(onnx_op, [_x(em, node), em.ints(_axes(node))], keepdims=keep)]
        return [em.one(onnx_op, [_x(em, node)], axes=_axes(node), keepdims=keep)]

    return convert


def _arg(onnx_op: str) -> Converter:
    def convert(em: Any, node: Node) -> list[str]:
        x, axis = _x(em, node), node.attrs.get("axis")
        keep = int(bool(node.attrs.get("keepdims")))
        if axis is None:  # numpy: over the flattened array
            x, axis = em.one("Reshape", [x, em.ints([-1])]), 0
            y = em.one(onnx_op, [x], axis=0, keepdims=0)
            shape = [1] * len(node.inputs[0].shape) if keep else []
            return [em.one("Reshape", [y, em.ints(shape)])]
        return [em.one(onnx_op, [x], axis=int(axis), keepdims=keep)]

    return convert


def _softmax(onnx_op: str) -> Converter:
    return lambda em, node: [em.one(onnx_op, [_x(em, node)], axis=int(node.attrs["axis"]))]


def _concat(em: Any, node: Node) -> list[str]:
    inputs = [em.name(v) for v in node.inputs]
    return [em.one("Concat", inputs, axis=int(node.attrs["axis"]))]


def _getitem(em: Any, node: Node) -> list[str]:
    x, shape = node.inputs[0], node.inputs[0].shape
    index, twin = node.attrs["index"], em.twin(node)
    if twin is not None and twin.attrs["index"] != index:
        index = _dynamic_index(em, x, index, twin.attrs["index"])
    starts, ends, axes, steps, squeeze, unsqueeze = [], [], [], [], [], []
    axis = out_axis = 0
    for item in index:
        if item is None:
            unsqueeze.append(out_axis)
            out_axis += 1
            continue
        if isinstance(item, tuple):
            start, stop, step = item
            step = 1 if step is None else step
            default = (0, _BIG) if step > 0 else (-1, -_BIG)
            starts.append(default[0] if start is None else start)
            ends.append(default[1] if stop is None else stop)
            out_axis += 1
        else:
            item = item % shape[axis]
            starts.append(item)
            ends.append(item + 1)
            squeeze.append(axis)
            step = 1
        axes.append(axis)
        steps.append(step)
        axis += 1
    y = em.name(x)
    if axes:
        bounds = [em.ints(starts), em.ints(ends), em.ints(axes), em.ints(steps)]
        y = em.one("Slice", [y, *bounds])
    if squeeze:
        y = em.one("Squeeze", [y, em.ints(squeeze)])
    if unsqueeze:
        y = em.one("Unsqueeze", [y, em.ints(unsqueeze)])
    return [y if y != em.name(x) else em.one("Identity", [y])]


def _dynamic_index(em: Any, x: Value, index: tuple, other: tuple) -> tuple:
    varying, fixed, axis = em.dynamic(x), [], 0
    for item, twin in zip(index, other, strict=True):
        if item != twin:
            ok = isinstance(item, tuple) and axis in varying and item[0] in (0, None)
            ok = ok and item[1] == x.shape[axis] and item[2] in (1, None)
            if not ok:
                raise ExportError(f"its index {index} depends on a dynamic axis")
            item = (item[0], None, item[2])  # the whole dynamic axis
        fixed.append(item)
        axis += item is not None
    return tuple(fixed)


def _getitem_array(em: Any, node: Node) -> list[str]:
    """Integer arrays among slices, with numpy's placement: the array axes moved to the front,
    one ``GatherND``, and the gathered dimensions moved back where the arrays stood when they
    were adjacent. Arrays mixed with ints or ``None`` are refused."""
    index, (x, idx) = node.attrs["index"], node.inputs
    if any(item is None or isinstance(item, int) for item in index):
        raise ExportError(f"advanced indexing {index} mixes arrays with ints or None")
    index = index + ((None, None, None),) * (len(x.shape) - len(index))
    arrays = [i for i, item in enumerate(index) if item == "array"]
    others = [i for i, item in enumerate(index) if item != "array"]
    basic = tuple((None, None, None) if item == "array" else item for item in index)
    front = em.one("Transpose", [_sliced(em, x, basic)], perm=arrays + others)
    rows = em.one("Transpose", [em.name(idx)], perm=[*range(1, len(idx.shape)), 0])
    y = em.one("GatherND", [front, rows])
    first, nb = arrays[0], len(idx.shape) - 1
    if arrays == list(range(first, first + len(arrays))) and first > 0:  # numpy keeps them there
        perm = [nb + i for i in range(first)] + list(range(nb))
        perm += [nb + i for i in range(first, len(others))]
        y = em.one("Transpose", [y], perm=perm)
    return [y]


def _sliced(em: Any, x: Value, index: tuple) -> str:
    starts, ends, axes, steps = [], [], [], []
    for axis, (start, stop, step) in enumerate(index):
        if (start, stop, step) == (None, None, None):
            continue
        step = 1 if step is None else step
        default = (0, _BIG) if step > 0 else (-1, -_BIG)
        starts.append(default[0] if start is None else start)
        ends.append(default[1] if stop is None else stop)
        axes.append(axis)
        steps.append(step)
    if not axes:
        return em.name(x)
    bounds = [em.ints(starts), em.ints(ends), em.ints(axes), em.ints(steps)]
    return em.one("Slice", [em.name(x), *bounds])


def _cross_entropy(em: Any, node: Node) -> list[str]:
    x, labels = node.inputs
    a = node.attrs
    reduction = {"mean": "mean", "sum": "sum", "no": "none"}[a["reduce"]]
    t = em.one("Cast", [em.name(labels)], to=em.helper.np_dtype_to_tensor_dtype(np.dtype(np.int64)))
    inputs = [em.name(x), t]
    loss = em.one(
        "SoftmaxCrossEntropyLoss", inputs, reduction=reduction, ignore_index=int(a["ignore_label"])
    )
    return [loss]


def _argsort(em: Any, node: Node) -> list[str]:
    """``TopK`` over the whole axis: ONNX breaks ties by the lower index, a stable sort."""
    x, axis = node.inputs[0], int(node.attrs["axis"]) % max(len(node.inputs[0].shape), 1)
    k = em.ints([x.shape[axis]])
    largest = int(bool(node.attrs["descending"]))
    _, indices = em.emit("TopK", [em.name(x), k], 2, axis=axis, largest=largest, sorted=1)
    return [indices]


def _embedding(em: Any, node: Node) -> list[str]:
    ids, weight = (em.name(v) for v in node.inputs)
    return [em.one("Gather", [weight, ids], axis=0)]


def _take_along_axis(em: Any, node: Node) -> list[str]:
    x, idx = (em.name(v) for v in node.inputs)
    return [em.one("GatherElements", [x, idx], axis=int(node.attrs["axis"]))]


def _pad(em: Any, node: Node) -> list[str]:
    widths = node.attrs["pad_width"]
    pads = [int(b) for b, _ in widths] + [int(a) for _, a in widths]
    value = em.name(node.attrs["value"], node.outputs[0].dtype)
    return [em.one("Pad", [_x(em, node), em.ints(pads), value], mode="constant")]


def _flip(em: Any, node: Node) -> list[str]:
    axes = [a % len(node.inputs[0].shape) for a in node.attrs["axes"]]
    bounds = [em.ints([-1] * len(axes)), em.ints([-_BIG] * len(axes)), em.ints(axes)]
    return [em.one("Slice", [_x(em, node), *bounds, em.ints([-1] * len(axes))])]


def _constant(em: Any, node: Node) -> list[str]:
    for key in node.attrs:
        _same_attr(em, node, key)
    return [em.one("Identity", [em.const(run_node(node, [])[0], node.op)])]


def _full_like(em: Any, node: Node) -> list[str]:
    dtype = np.dtype(node.outputs[0].dtype)
    value = em.onnx.numpy_helper.from_array(np.asarray([node.attrs["value"]], dtype=dtype))
    return [em.one("ConstantOfShape", [em.one("Shape", [_x(em, node)])], value=value)]


def _one_hot(em: Any, node: Node) -> list[str]:
    a, dtype = node.attrs, node.outputs[0].dtype
    values = em.const(np.asarray([0, 1], dtype=dtype))
    depth = em.const(np.asarray(a["num_classes"], dtype=np.int64))
    return [em.one("OneHot", [_x(em, node), depth, values], axis=int(a["axis"]))]


def _cumsum(em: Any, node: Node) -> list[str]:
    """``CumSum`` along the axis (``reverse`` as its attribute), in the promoted type."""
    x, out = node.inputs[0], node.outputs[0]
    name = em.name(x)
    if np.dtype(x.dtype) != np.dtype(out.dtype):  # bool/int32 inputs sum in int64, as torch
        name = em.one("Cast", [name], to=em.helper.np_dtype_to_tensor_dtype(np.dtype(out.dtype)))
    axis = em.const(np.asarray(int(node.attrs["axis"]), dtype=np.int64))
    return [em.one("CumSum", [name, axis], reverse=int(bool(node.attrs["reverse"])))]


def _layer_norm(em: Any, node: Node) -> list[str]:
    """float32: ``LayerNormalization`` (opset 17) from the first normalized axis, whose Y, Mean
    and InvStdDev are the op's three outputs (the statistics with the normalized axes kept as
    1). Other dtypes: the same written out, since ONNX computes and returns that op's statistics
    in float32 only (a float64 model would lose precision, a float16 one get float32 outputs)."""
    x, gamma, beta = (em.name(v) for v in node.inputs)
    k, dtype = len(node.inputs[1].shape), np.dtype(node.inputs[0].dtype)
    eps = float(node.attrs["eps"])
    if dtype == np.float32:
        return em.emit("LayerNormalization", [x, gamma, beta], 3, axis=-k, epsilon=eps)
    axes = list(range(-k, 0))
    mean = em.one("ReduceMean", [x], axes=axes, keepdims=1)
    centred = em.one("Sub", [x, mean])
    var = em.one("ReduceMean", [em.one("Mul", [centred, centred])], axes=axes, keepdims=1)
    rstd = em.one("Reciprocal", [em.one("Sqrt", [em.one("Add", [var, em.const(dtype.type(eps))])])])
    y = em.one("Add", [em.one("Mul", [em.one("Mul", [centred, rstd]), gamma]), beta])
    return [y, mean, rstd]


CONVERTERS: dict[str, Converter] = {
    **ELEMENTWISE,
    "conv2d": _conv,
    "conv_transpose2d": _conv,
    "max_pool2d": _pool("MaxPool"),
    "avg_pool2d": _pool("AveragePool", count_include_pad=1),
    "matmul": lambda em, node: [em.one("MatMul", [em.name(v) for v in node.inputs])],
    "reshape": _reshape,
    "transpose": _transpose,
    "broadcast_to": _broadcast_to,
    "sum": _reduce("ReduceSum"),
    "max": _reduce("ReduceMax"),
    "min": _reduce("ReduceMin"),
    "prod": _reduce("ReduceProd"),
    "argmax": _arg("ArgMax"),
    "argmin": _arg("ArgMin"),
    "softmax": _softmax("Softmax"),
    "log_softmax": _softmax("LogSoftmax"),
    "concat": _concat,
    "getitem": _getitem,
    "getitem_array": _getitem_array,
    "embedding": _embedding,
    "take_along_axis": _take_along_axis,
    "pad": _pad,
    "flip": _flip,
    "full": _constant,
    "arange": _constant,
    "full_like": _full_like,
    "one_hot": _one_hot,
    "fused": convert_fused,
    "softmax_cross_entropy": _cross_entropy,
    "layer_norm": _layer_norm,
    "argsort": _argsort,
    "cumsum": _cumsum,
    "lstm_scan": convert_lstm_scan,
    "gru_scan": convert_gru_scan,
}
