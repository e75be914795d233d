"""numpy functions called on Tensors (``np.sum(t)``, ``np.allclose(t, a)``): NEP 18's protocol.

numpy hands every ``np.<function>`` whose arguments include a Tensor to ``__array_function__``.
Without it numpy calls the method of the same name with numpy's arguments (``t.sum(axis=None,
dtype=None, out=None)``), which PyTorch-style methods do not take. Here the function runs on the
tensors' values as numpy arrays and returns numpy results, as ``np.asarray(t)`` then the function
would: a value, not a differentiable Tensor (use the Tensor method or ``dualflow.ops`` for that).
Inside a compiled function it is a raw read and fails closed (TracingError naming the function).
Ufuncs (``np.exp(t)``) already convert through ``__array__``, with the same result.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dualflow import ops
from dualflow.device import send
from dualflow.ops.dispatch import reading, tracing

# shape queries read no values: they answer from the tensor's shape (no raw read when traced)
_SHAPE_QUERIES = {np.shape: lambda t: t.shape, np.ndim: lambda t: len(t.shape)}


def _size(t: Any, axis: Any = None) -> int:
    return math.prod(t.shape) if axis is None else t.shape[axis]


class NumpyProtocol:
    """``__array_function__`` of Tensor (see the module docstring).

    Example:
        >>> import numpy as np, dualflow
        >>> t = dualflow.tensor([1.0, 2.0])
        >>> float(np.sum(t)), np.allclose(t, [1.0, 2.0]), np.shape(t)
        (3.0, True, (2,))
    """

    __slots__ = ()

    def __array_function__(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        if func in _SHAPE_QUERIES and len(args) == 1 and not kwargs:
            return _SHAPE_QUERIES[func](args[0])
        if func is np.size and args and args[0] is self:
            return _size(*args, **kwargs)
        out = kwargs.get("out")
        if out is not None and any(_is_tensor(o) for o in _flat(out)):
            raise TypeError(
                f"np.{func.__name__}(..., out=<Tensor>): numpy cannot write into a dualflow "
                "Tensor; compute with the Tensor method or dualflow.ops, or write the result "
                "with dualflow.ops.assign(t, value)"
            )
        name = func.__name__
        hint = f" (dualflow.ops.{name} would stay in the graph)" if hasattr(ops, name) else ""
        where = f"np.{name}(){hint}"
        values = _to_numpy(args, where), {k: _to_numpy(v, where) for k, v in kwargs.items()}
        return func(*values[0], **values[1])


def _is_tensor(value: Any) -> bool:
    return isinstance(value, NumpyProtocol)


def _flat(value: Any) -> tuple:
    return tuple(value) if isinstance(value, tuple | list) else (value,)


def _to_numpy(value: Any, where: str) -> Any:
    """``value`` with every Tensor (also inside tuples, lists and dicts) as a numpy array."""
    if _is_tensor(value):
        tracer = tracing()
        if tracer is not None:  # a value read inside a compiled function: fail closed
            tracer.on_raw_access(value, where)
        else:  # lazy re-execution runs what is pending first (a write recorded, not yet done)
            reading(value.raw_array, True)
        return np.asarray(send(value.raw_array, "cpu"))
    if type(value) in (tuple, list):
        return type(value)(_to_numpy(v, where) for v in value)
    if type(value) is dict:
        return {k: _to_numpy(v, where) for k, v in value.items()}
    return value
