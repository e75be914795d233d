"""Creation ops: ``full``/``arange`` (no inputs), ``full_like`` (shape, dtype and device of x) and
``copy`` (a new C-ordered array with x's values; differentiable).

Creating arrays through ops (rather than numpy calls on the side) keeps them visible to a trace:
the engine's seed gradient, for instance, is ``ones_like(loss)``, a graph node, not a constant.
The public functions take ``device=``, which places the result without being an op attribute.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.device import Device
from dualflow.errors import ShapeError
from dualflow.ops.dispatch import apply
from dualflow.ops.registry import Meta, primitive
from dualflow.symbolic_containers import as_shape, hint_of
from dualflow.symbolic_shapes import SymInt


def _dtype_name(dtype: Any, value: Any) -> str:
    if dtype is not None:
        return np.dtype(dtype).name
    return "float32" if isinstance(value, float) else np.asarray(value).dtype.name


@primitive("full", check_eager=False, layout="C", aliasing="fresh")
class Full:
    """A new array of ``shape`` filled with ``value`` (on the CPU; ``full_like`` follows x)."""

    def infer(*, shape: tuple, value: Any, dtype: str) -> tuple[Meta]:
        if any(d < 0 for d in shape):
            raise ShapeError(f"full: negative dimension in shape {shape}")
        return (Meta(tuple(shape), np.dtype(dtype)),)

    def forward(xp, *, shape, value, dtype):
        return xp.full(shape, value, dtype=dtype)


@primitive("full_like", check_eager=False, layout="C", aliasing="fresh")
class FullLike:
    """An array shaped like ``x`` (same device) filled with ``value``; no gradient."""

    def infer(x: Meta, *, value: Any, dtype: str | None) -> tuple[Meta]:
        return (Meta(tuple(x.shape), np.dtype(dtype or x.dtype)),)

    def forward(xp, x, *, value, dtype):
        return xp.full_like(x, value, dtype=dtype)


@primitive("copy", check_eager=False, aliasing="fresh")
class Copy:
    """A new C-ordered array with ``x``'s values (``Tensor.clone``); its gradient is ``gy``.

    Never an identity to the passes: a clone must not alias state that is written afterwards.
    """

    def infer(x: Meta) -> tuple[Meta]:
        return (Meta(tuple(x.shape), x.dtype),)

    def forward(xp, x):
        return xp.array(x, copy=True, order="C")

    def backward(ctx, gy):
        return gy


@primitive("arange", check_eager=False, layout="C", aliasing="fresh")
class Arange:
    """Evenly spaced values in ``[start, stop)`` (numpy's ``arange``)."""

    def infer(*, start: Any, stop: Any, step: Any, dtype: str) -> tuple[Meta]:
        if step == 0:
            raise ShapeError("arange: step must not be zero")
        if all(isinstance(v, int | SymInt) for v in (start, stop, step)):
            count = -((start - stop) // step)  # integer ceiling: sizes may be expressions
            return (Meta((count if count > 0 else 0,), np.dtype(dtype)),)
        return (Meta((len(range(0, int(np.ceil((stop - start) / step)))),), np.dtype(dtype)),)

    def forward(xp, *, start, stop, step, dtype):
        return xp.arange(start, stop, step, dtype=dtype)


def _place(tensor: Any, device: Device | None) -> Any:
    """``tensor`` moved to ``device`` (None: left where the op created it).

    The device is deliberately not an op attribute, so ``full`` is the same IR node in eager
    mode, in traces and in saved graphs: a compiled plan runs on one device and creates its
    arrays there. An eager op with no array input creates on the host, so a device request costs
    one copy; inside a compiled function the move fails closed (``TracingError``), as every
    ``to_device`` does.
    """
    return tensor if device is None else tensor.to_device(device)


def _device(device: Device | str | None) -> Device | None:
    return None if device is None else Device(device)  # a bad spec fails before any work


def full(
    shape: int | tuple[int, ...],
    value: Any,
    dtype: Any = None,
    device: Device | str | None = None,
) -> Any:
    """A tensor of ``shape`` filled with ``value`` (Python floats give float32) on ``device``
    (default: the host).

    Example:
        >>> from dualflow import ops
        >>> ops.full((2,), 1.5).tolist()
        [1.5, 1.5]
        >>> ops.full(1, 0, device="cpu").device
        Device('cpu')
    """
    target = _device(device)
    shape = as_shape(shape)
    return _place(apply(Full, shape=shape, value=value, dtype=_dtype_name(dtype, value)), target)


def zeros(
    shape: int | tuple[int, ...], dtype: Any = "float32", device: Device | str | None = None
) -> Any:
    """A tensor of zeros.

    Example:
        >>> from dualflow import ops
        >>> ops.zeros((1, 2)).tolist()
        [[0.0, 0.0]]
    """
    return full(shape, 0, dtype, device)


def ones(
    shape: int | tuple[int, ...], dtype: Any = "float32", device: Device | str | None = None
) -> Any:
    """A tensor of ones.

    Example:
        >>> from dualflow import ops
        >>> ops.ones(2, "int64").tolist()
        [1, 1]
    """
    return full(shape, 1, dtype, device)


def full_like(x: Any, value: Any, dtype: Any = None, device: Device | str | None = None) -> Any:
    """A tensor like ``x`` (shape; dtype and device unless given) filled with ``value``.

    Example:
        >>> from dualflow import ops
        >>> ops.full_like([1.0, 2.0], 7.0).tolist()
        [7.0, 7.0]
    """
    target = _device(device)
    name = None if dtype is None else np.dtype(dtype).name
    return _place(apply(FullLike, x, value=value, dtype=name), target)


def zeros_like(x: Any, dtype: Any = None, device: Device | str | None = None) -> Any:
    """Zeros shaped like ``x``.

    Example:
        >>> from dualflow import ops
        >>> ops.zeros_like([[1.0], [2.0]]).shape
        (2, 1)
    """
    return full_like(x, 0, dtype, device)


def ones_like(x: Any, dtype: Any = None, device: Device | str | None = None) -> Any:
    """Ones shaped like ``x``.

    Example:
        >>> from dualflow import ops
        >>> ops.ones_like([3.0]).tolist()
        [1.0]
    """
    return full_like(x, 1, dtype, device)


class ZeroGradient:
    """A gradient known to be zero, of ``shape``, in the dtype and on the device of ``like``:
    what a backward returns for an input its result does not vary with (``relu_grad``'s
    ``y``), so the engine runs nothing for it (JAX's symbolic zeros) and makes zeros only where
    a gradient is handed out (``grad``, ``.grad``, a backward that needs a tensor).

    Example:
        >>> from dualflow import ops
        >>> ZeroGradient(ops.ones_like([1.0, 2.0]), (3,)).materialize().tolist()
        [0.0, 0.0, 0.0]
    """

    __slots__ = ("like", "shape")

    def __init__(self, like: Any, shape: tuple | None = None) -> None:
        self.like, self.shape = like, tuple(like.shape) if shape is None else tuple(shape)

    def materialize(self) -> Any:
        """These zeros as a tensor."""
        if tuple(self.like.shape) == self.shape:
            return zeros_like(self.like)
        return zeros(self.shape, self.like.dtype, self.like.device)


def copy(x: Any) -> Any:
    """A copy of ``x`` with its own (C-ordered) memory; gradients flow back to ``x``.

    Example:
        >>> from dualflow import ops
        >>> ops.copy([1.0, 2.0]).tolist()
        [1.0, 2.0]
    """
    return apply(Copy, x)


def arange(
    start: Any,
    stop: Any = None,
    step: Any = 1,
    dtype: Any = None,
    device: Device | str | None = None,
) -> Any:
    """Evenly spaced values, like ``numpy.arange``, on ``device`` (default: the host).

    Example:
        >>> from dualflow import ops
        >>> ops.arange(3).tolist()
        [0, 1, 2]
    """
    target = _device(device)
    if stop is None:
        start, stop = 0, start
    if dtype is None:  # numpy's choice from the arguments' types (a size's hint: an int)
        dtype = np.arange(*hint_of((start, stop, step))).dtype
    name = np.dtype(dtype).name
    return _place(apply(Arange, start=start, stop=stop, step=step, dtype=name), target)
