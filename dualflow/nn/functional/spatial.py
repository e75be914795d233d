"""``nn.functional`` convolution, pooling, padding and resampling with PyTorch's signatures.

They adapt PyTorch's arguments to the primitive ops (``ops.conv2d``'s ``pad``, ``ops.pad``'s
numpy-style ``pad_width``...); the 1-D forms run the 2-D ops on a height-1 image.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow import ops
from dualflow.errors import ShapeError, with_location
from dualflow.nn.functional.ported import check_pad
from dualflow.ops.autocast import float32_inputs
from dualflow.symbolic_containers import as_size
from dualflow.tensor.core import Tensor, as_tensor

# (mode, padded dims) PyTorch's CPU autocast runs in float32: reflection_pad1d/2d and
# replication_pad1d/2d/3d (reflection_pad3d is on no list)
_FLOAT32_PADS = {
    ("reflect", 1), ("reflect", 2), ("replicate", 1), ("replicate", 2), ("replicate", 3)
}  # fmt: skip

_PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge"}


def _pair(value: Any, name: str) -> tuple[int, int]:
    items = (value, value) if isinstance(value, int | np.integer) else tuple(value)
    if len(items) != 2:
        raise ValueError(with_location(f"{name} must be an int or a pair of ints, got {value!r}"))
    return int(items[0]), int(items[1])


def _same_padding(weight: Any, dilation: tuple[int, int]) -> tuple[tuple[int, int], ...]:
    totals = [d * (k - 1) for d, k in zip(dilation, weight.shape[2:])]
    return tuple((t // 2, t - t // 2) for t in totals)


def conv2d(
    input: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """2-D convolution of (N, C, H, W) with weight (O, C/groups, kh, kw); ``padding`` is an
    int, a pair, ``"valid"`` or ``"same"``. Input and weight must share one float dtype.

    Example:
        >>> x = as_tensor(np.ones((1, 1, 3, 3), np.float32))
        >>> conv2d(x, as_tensor(np.ones((1, 1, 2, 2), np.float32)), padding="same").shape
        (1, 1, 3, 3)
    """
    dilation = _pair(dilation, "dilation")
    if padding == "valid":
        padding = 0
    elif padding == "same":
        if _pair(stride, "stride") != (1, 1):
            raise ValueError("padding='same' is not supported for strided convolutions")
        pairs = _same_padding(weight, dilation)
        if any(a != b for a, b in pairs):
            input = ops.pad(input, ((0, 0), (0, 0), *pairs))
            padding = 0
        else:
            padding = (pairs[0][0], pairs[1][0])
    return ops.conv2d(input, weight, bias, stride, padding, dilation, groups)


def conv_transpose2d(
    input: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """Transposed convolution with weight (C_in, C_out/groups, kh, kw).

    Example:
        >>> x = as_tensor(np.ones((1, 1, 2, 2), np.float32))
        >>> conv_transpose2d(x, as_tensor(np.ones((1, 1, 2, 2), np.float32)), stride=2).shape
        (1, 1, 4, 4)
    """
    return ops.conv_transpose2d(
        input, weight, bias, stride, padding, output_padding, groups, dilation
    )


def conv1d(
    input: Any,
    weight: Any,
    bias: Any = None,
    stride: int = 1,
    padding: Any = 0,
    dilation: int = 1,
    groups: int = 1,
) -> Tensor:
    """1-D convolution of (N, C, L) with weight (O, C/groups, k) (a height-1 ``conv2d``).

    Example:
        >>> x = as_tensor(np.ones((1, 1, 5), np.float32))
        >>> conv1d(x, as_tensor(np.ones((1, 1, 3), np.float32))).tolist()
        [[[3.0, 3.0, 3.0]]]
    """
    x, w = as_tensor(input), as_tensor(weight)
    if x.ndim != 3 or w.ndim != 3:
        raise ShapeError(
            with_location(
                f"conv1d: expected input (N, C, L) and weight (O, C/groups, k), got shapes "
                f"{tuple(x.shape)} and {tuple(w.shape)}"
            )
        )
    if isinstance(padding, str):
        pad2: Any = padding
    else:
        pad2 = (0, int(padding if isinstance(padding, int) else padding[0]))
    y = conv2d(x.unsqueeze(2), w.unsqueeze(2), bias, (1, stride), pad2, (1, dilation), groups)
    return y.squeeze(2)


def _pool_args(op: str, kernel_size: Any, stride: Any, padding: Any) -> tuple:
    ksize = _pair(kernel_size, "kernel_size")
    stride = ksize if stride is None or stride == [] else _pair(stride, "stride")
    return ksize, stride, _pair(padding, "padding")


def _unsupported(op: str, what: str) -> NotImplementedError:
    return NotImplementedError(with_location(f"{op}: {what} is not supported by dualflow"))


def max_pool2d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor:
    """Max pooling of (N, C, H, W); ``stride`` defaults to ``kernel_size``.

    Example:
        >>> max_pool2d(as_tensor(np.arange(16.0).reshape(1, 1, 4, 4)), 2).tolist()
        [[[[5.0, 7.0], [13.0, 15.0]]]]
    """
    if _pair(dilation, "dilation") != (1, 1):
        raise _unsupported("max_pool2d", "dilation != 1")
    if ceil_mode or return_indices:
        raise _unsupported("max_pool2d", "ceil_mode=True / return_indices=True")
    return ops.max_pool2d(input, *_pool_args("max_pool2d", kernel_size, stride, padding))


def avg_pool2d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """Average pooling of (N, C, H, W); padded zeros count unless ``count_include_pad=False``.

    Example:
        >>> x = as_tensor(np.ones((1, 1, 2, 2), np.float32))
        >>> avg_pool2d(x, 2, 1, 1).numpy()[0, 0, 0], avg_pool2d(x, 2, 1, 1, False, False)[0, 0, 0]
        (array([0.25, 0.5 , 0.25], dtype=float32), tensor([1., 1., 1.], dtype=float32))
    """
    if ceil_mode:
        raise _unsupported("avg_pool2d", "ceil_mode=True")
    ksize, stride, pad = _pool_args("avg_pool2d", kernel_size, stride, padding)
    y = ops.avg_pool2d(input, ksize, stride, pad)
    if divisor_override is not None:
        return y * (ksize[0] * ksize[1] / divisor_override)
    if count_include_pad or pad == (0, 0):
        return y
    x = as_tensor(input)
    ones = ops.ones((1, 1) + tuple(x.shape[2:]), x.dtype)  # the fraction of real pixels
    return y / ops.avg_pool2d(ones, ksize, stride, pad)


def _as_1d(op: str, x: Any) -> Tensor:
    x = as_tensor(x)
    if x.ndim != 3:
        raise ShapeError(with_location(f"{op}: expected input (N, C, L), got {tuple(x.shape)}"))
    return x.unsqueeze(2)


def max_pool1d(input: Any, kernel_size: int, stride: Any = None, padding: int = 0) -> Tensor:
    """Max pooling of (N, C, L).

    Example:
        >>> max_pool1d(as_tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2).tolist()
        [[[3.0, 2.0]]]
    """
    stride = kernel_size if stride is None else stride
    y = ops.max_pool2d(_as_1d("max_pool1d", input), (1, kernel_size), (1, stride), (0, padding))
    return y.squeeze(2)


def avg_pool1d(input: Any, kernel_size: int, stride: Any = None, padding: int = 0) -> Tensor:
    """Average pooling of (N, C, L) (padded zeros count).

    Example:
        >>> avg_pool1d(as_tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2).tolist()
        [[[2.0, 1.0]]]
    """
    stride = kernel_size if stride is None else stride
    y = ops.avg_pool2d(_as_1d("avg_pool1d", input), (1, kernel_size), (1, stride), (0, padding))
    return y.squeeze(2)


def bin_matrix(n_in: int, n_out: int, dtype: Any) -> np.ndarray:
    """(n_out, n_in) averaging weights of PyTorch's adaptive bins: output i averages the inputs
    ``floor(i * n_in / n_out)`` to ``ceil((i + 1) * n_in / n_out)`` (exclusive).

    Example:
        >>> bin_matrix(3, 2, np.float64).tolist()
        [[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]]
    """
    out = np.zeros((n_out, n_in), dtype)
    for i in range(n_out):
        start, stop = (i * n_in) // n_out, -(-((i + 1) * n_in) // n_out)
        out[i, start:stop] = 1.0 / (stop - start)
    return out


def adaptive_avg_pool2d(input: Any, output_size: Any) -> Tensor:
    """Average (N, C, H, W) into ``output_size`` bins as PyTorch does (any sizes; ``None``
    keeps that input size).

    Example:
        >>> adaptive_avg_pool2d(as_tensor(np.arange(9.0).reshape(1, 1, 3, 3)), 2).tolist()
        [[[[2.0, 3.0], [5.0, 6.0]]]]
    """
    x = as_tensor(input)
    if x.ndim != 4:
        raise ShapeError(
            with_location(f"adaptive_avg_pool2d: input must be (N, C, H, W), got {x.shape}")
        )
    h, w = x.shape[2:]
    sizes = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    oh, ow = (h if sizes[0] is None else sizes[0]), (w if sizes[1] is None else sizes[1])
    if (oh, ow) == (1, 1):
        return x.mean((2, 3), keepdim=True)
    if h % oh == 0 and w % ow == 0:
        return ops.avg_pool2d(x, (h // oh, w // ow))
    xp = x.device.xp  # bins of unequal sizes: two small matmuls with the bin weights
    rows = xp.asarray(bin_matrix(h, oh, x.dtype))
    cols = xp.asarray(bin_matrix(w, ow, x.dtype).T)
    return ops.matmul(ops.matmul(rows, x), cols)


def adaptive_avg_pool1d(input: Any, output_size: int) -> Tensor:
    """Average (N, C, L) or (C, L) into ``output_size`` bins as PyTorch does (any sizes).

    Example:
        >>> adaptive_avg_pool1d(as_tensor([[[0.0, 1.0, 2.0]]]), 2).tolist()
        [[[0.5, 1.5]]]
    """
    x = as_tensor(input)
    if x.ndim not in (2, 3):
        raise ShapeError(
            with_location(f"adaptive_avg_pool1d: input must be (N, C, L) or (C, L), got {x.shape}")
        )
    size = output_size[0] if isinstance(output_size, tuple | list) else output_size
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(
            with_location(f"adaptive_avg_pool1d: output_size must be a positive int, got {size!r}")
        )
    batched = x if x.ndim == 3 else x.unsqueeze(0)
    y = adaptive_avg_pool2d(batched.unsqueeze(2), (1, size)).squeeze(2)
    return y if x.ndim == 3 else y.squeeze(0)


def pad(input: Any, pad: Any, mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad the last ``len(pad) // 2`` dims: ``pad = (left, right, top, bottom, ...)`` from the
    last dim backwards; ``mode`` is ``"constant"``, ``"reflect"``, ``"replicate"`` or
    ``"circular"``.

    Example:
        >>> pad(as_tensor([[1.0, 2.0]]), (1, 2), value=9.0).tolist()
        [[9.0, 1.0, 2.0, 9.0, 9.0]]
        >>> pad(as_tensor([[[1.0, 2.0, 3.0]]]), (2, 1), mode="circular").tolist()
        [[[2.0, 3.0, 1.0, 2.0, 3.0, 1.0]]]
    """
    x = as_tensor(input)
    widths = [as_size(p) for p in pad]  # a size stays an expression (``(0, L - x.shape[1])``)
    if (mode, len(widths) // 2) in _FLOAT32_PADS:  # PyTorch's CPU autocast float32 list
        (x,) = float32_inputs(x)
    if len(widths) % 2 or len(widths) // 2 > x.ndim:
        raise ShapeError(
            with_location(f"pad: {len(widths)} pad values do not fit a {x.ndim}-D input")
        )
    pairs = [(0, 0)] * x.ndim
    for i in range(len(widths) // 2):
        pairs[x.ndim - 1 - i] = (widths[2 * i], widths[2 * i + 1])
    if min(widths, default=0) < 0:
        raise _unsupported("pad", "negative padding (cropping)")
    check_pad(tuple(x.shape), widths, mode)
    if mode == "circular":
        for axis, (before, after) in enumerate(pairs):
            if before or after:
                n = x.shape[axis]
                rows = np.arange(-before, n + after) % n
                x = ops.getitem(x, (slice(None),) * axis + (rows,))
        return x
    if mode not in _PAD_MODES:
        raise ValueError(with_location(f"pad: unknown mode {mode!r}; use {sorted(_PAD_MODES)}"))
    fill = 0.0 if value is None else value
    return ops.pad(x, tuple(pairs), mode=_PAD_MODES[mode], constant_values=fill)
