"""Tensor factories with PyTorch's signatures: ``zeros``, ``ones``, ``full``, ``empty``,
``arange``, ``linspace`` and their ``*_like`` forms (``dualflow.zeros(2, 3)``).

Sizes are ints or one tuple/list; ``dtype=``, ``device=`` and ``requires_grad=`` as PyTorch,
with PyTorch's defaults (float32, and int64 for ``arange`` of integers). The arrays are made by
creation ops, so inside a compiled function they are graph nodes, not baked constants.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow import ops
from dualflow.errors import DTypeError
from dualflow.symbolic_containers import as_shape
from dualflow.symbolic_shapes import SymInt
from dualflow.tensor.core import Tensor


def size_of(size: tuple, keyword: Any = None) -> tuple[int, ...]:
    """PyTorch's ``*size``: ints, or one tuple/list of ints, or the ``size=`` keyword.

    Example:
        >>> size_of((2, 3)), size_of(((2, 3),)), size_of(()), size_of((), keyword=(4,))
        ((2, 3), (2, 3), (), (4,))
    """
    if keyword is not None:
        if size:
            raise TypeError(f"size given both positionally {size!r} and as size={keyword!r}")
        size = (keyword,) if isinstance(keyword, int | np.integer) else (tuple(keyword),)
    if len(size) == 1 and isinstance(size[0], tuple | list):
        size = tuple(size[0])
    for d in size:
        if isinstance(d, bool) or not isinstance(d, int | np.integer | SymInt) or d < 0:
            raise ValueError(f"size must be non-negative integers, got {size!r}")
    return as_shape(size)


def finish(t: Any, requires_grad: bool) -> Tensor:
    """``t`` marked as requiring grad when asked (floating point only, as PyTorch)."""
    if requires_grad:
        if np.dtype(t.dtype).kind != "f":
            raise DTypeError(f"only floating-point tensors can require grad, got {t.dtype}")
        t.requires_grad_(True)
    return t


def _dtype(dtype: Any, default: Any = np.float32) -> np.dtype:
    return np.dtype(default if dtype is None else dtype)


def full(
    size: Any,
    fill_value: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """A tensor of ``size`` filled with ``fill_value`` (dtype inferred from it, as PyTorch).

    Example:
        >>> full((2,), 7).dtype, full((2,), 0.5).tolist()
        (dtype('int64'), [0.5, 0.5])
    """
    if dtype is None:
        kind = np.asarray(fill_value).dtype.kind
        dtype = {"b": np.bool_, "i": np.int64, "u": np.int64}.get(kind, np.float32)
    shape = size_of((size,)) if isinstance(size, int) else size_of(tuple(size))
    return finish(ops.full(shape, fill_value, np.dtype(dtype), device), requires_grad)


def zeros(
    *sizes: Any,
    size: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """A tensor of zeros (float32 unless ``dtype``).

    Example:
        >>> zeros(2, 3).shape, zeros((1,)).tolist(), zeros(size=(2, 1)).shape
        ((2, 3), [0.0], (2, 1))
    """
    return finish(ops.full(size_of(sizes, size), 0, _dtype(dtype), device), requires_grad)


def ones(
    *sizes: Any,
    size: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """A tensor of ones (float32 unless ``dtype``).

    Example:
        >>> ones(2, dtype="int64").tolist()
        [1, 1]
    """
    return finish(ops.full(size_of(sizes, size), 1, _dtype(dtype), device), requires_grad)


def empty(
    *sizes: Any,
    size: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """An "uninitialized" tensor; dualflow fills it with zeros (deterministic).

    Example:
        >>> empty(2).shape
        (2,)
    """
    return zeros(*sizes, size=size, dtype=dtype, device=device, requires_grad=requires_grad)


def _like(x: Any, value: Any, dtype: Any, device: Any, requires_grad: bool) -> Tensor:
    dtype = np.dtype(dtype) if dtype is not None else None
    return finish(ops.full_like(x, value, dtype, device), requires_grad)


def zeros_like(
    input: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    """Zeros shaped like ``input`` (its dtype and device unless given).

    Example:
        >>> zeros_like(ones(2, 2)).tolist()
        [[0.0, 0.0], [0.0, 0.0]]
    """
    return _like(input, 0, dtype, device, requires_grad)


def ones_like(
    input: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    """Ones shaped like ``input``.

    Example:
        >>> ones_like(zeros(2, dtype="int64")).tolist()
        [1, 1]
    """
    return _like(input, 1, dtype, device, requires_grad)


def full_like(
    input: Any,
    fill_value: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """``fill_value`` shaped like ``input``.

    Example:
        >>> full_like(zeros(2), 3.0).tolist()
        [3.0, 3.0]
    """
    return _like(input, fill_value, dtype, device, requires_grad)


def empty_like(
    input: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    """An "uninitialized" tensor like ``input``; dualflow fills it with zeros.

    Example:
        >>> empty_like(ones(3)).shape
        (3,)
    """
    return _like(input, 0, dtype, device, requires_grad)


def arange(
    start: Any = 0,
    end: Any = None,
    step: Any = 1,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """Values from ``start`` to ``end`` (excluded) by ``step``; int64 for integer arguments,
    float32 when any is a float (PyTorch's rule, not numpy's float64).

    Example:
        >>> arange(3).tolist(), arange(0, 1, 0.5).tolist(), arange(1, 4).dtype
        ([0, 1, 2], [0.0, 0.5], dtype('int64'))
    """
    if end is None:
        start, end = 0, start
    if dtype is None:
        floats = any(isinstance(v, float) for v in (start, end, step))
        dtype = np.float32 if floats else np.int64
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    return finish(ops.arange(start, end, step, np.dtype(dtype), device), requires_grad)


def linspace(
    start: float,
    end: float,
    steps: int,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` (both included).

    Example:
        >>> linspace(0, 1, 5).tolist()
        [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"linspace: steps must be a non-negative integer, got {steps!r}")
    index = ops.arange(0, steps, 1, np.dtype(np.float64), device)
    delta = (float(end) - float(start)) / (steps - 1) if steps > 1 else 0.0
    # start + i*delta, with PyTorch's symmetric form for the upper half (exact endpoints)
    upper = float(end) - (steps - 1 - index) * delta
    result = ops.where(index < steps // 2, float(start) + index * delta, upper)
    return finish(ops.cast(result, _dtype(dtype)), requires_grad)
