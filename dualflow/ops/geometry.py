"""Argument checks of the sliding-window ops (conv, pooling): pairs, ranks, dtypes, geometry.

The kernels themselves (output sizes, im2col/col2im) are in ``dualflow/kernels/base/windows.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.dtypes import is_float_dtype
from dualflow.errors import DTypeError, ShapeError
from dualflow.kernels.base.windows import Pair
from dualflow.ops.registry import Meta


def pair(op: str, name: str, value: Any, minimum: int) -> Pair:
    """Normalize an int or a pair of ints (each at least ``minimum``) to a tuple of two ints.

    Example:
        >>> pair("conv2d", "stride", 2, 1)
        (2, 2)
        >>> pair("conv2d", "pad", (0, 1), 0)
        (0, 1)
    """
    items = (value, value) if isinstance(value, int | np.integer) else tuple(value)
    if len(items) != 2 or not all(isinstance(v, int | np.integer) for v in items):
        raise ShapeError(f"{op}: {name} must be an int or a pair of ints, got {value!r}")
    if min(items) < minimum:
        raise ShapeError(f"{op}: {name} must be at least {minimum}, got {value!r}")
    return int(items[0]), int(items[1])


def check_4d(op: str, name: str, meta: Meta) -> None:
    """Require a rank-4 floating-point operand; ShapeError/DTypeError naming op and operand.

    Example:
        >>> check_4d("conv2d", "x", Meta((1, 1, 2, 2), np.dtype("float32")))
    """
    if len(meta.shape) != 4:
        raise ShapeError(
            f"{op}: {name} must be 4-D (N, C, H, W layout), got shape {tuple(meta.shape)}"
        )
    dtype = meta.dtype
    if isinstance(dtype, type) or not is_float_dtype(dtype):
        name_of = getattr(dtype, "__name__", str(dtype))
        raise DTypeError(
            f"{op}: {name} must be a floating-point array, got dtype {name_of}; "
            "cast it with .astype('float32')"
        )


def check_geometry(op: str, stride: Pair, pad: Pair, dilation: Pair = (1, 1)) -> None:
    """Check attrs that reach infer directly (e.g. from a loaded graph): stride, dilation ≥ 1.

    Example:
        >>> check_geometry("conv2d", (1, 1), (0, 0))
    """
    if min(stride) < 1 or min(dilation) < 1 or min(pad) < 0:
        raise ShapeError(
            f"{op}: need stride ≥ 1, dilation ≥ 1 and pad ≥ 0, got stride={stride}, "
            f"dilation={dilation}, pad={pad}"
        )
