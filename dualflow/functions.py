"""PyTorch's ``torch.*`` tensor functions: ``dualflow.cat``, ``dualflow.sum(x, dim=1)``,
``dualflow.max(x, 1)``, ``dualflow.where(c, x, y)``, ``dualflow.from_numpy``...

Each is the Tensor method of the same name called on its first argument (``torch.sum(x, 1)`` is
``x.sum(1)``), so the function and method forms cannot drift apart; the rest are written here.

Example:
    >>> import dualflow
    >>> x = dualflow.tensor([[1.0, 5.0], [3.0, 2.0]])
    >>> dualflow.sum(x, dim=1).tolist(), dualflow.max(x, 1).indices.tolist()
    ([6.0, 5.0], [1, 0])
    >>> dualflow.cat([x, x], dim=1).shape, dualflow.stack([x, x]).shape
    ((2, 4), (2, 2, 2))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dualflow import ops
from dualflow.errors import DTypeError, with_location
from dualflow.function_names import METHOD_FORMS
from dualflow.tensor.core import Tensor, as_tensor
from dualflow.tensor.einsum import einsum  # noqa: F401 - torch.einsum (OTHERS)

# torch.NAME(input, *args, **kwargs) is input.NAME(*args, **kwargs) for the METHOD_FORMS; the
# OTHERS are written out below (both lists live in function_names.py, which __init__ reads too)


def _method_form(name: str) -> Callable[..., Any]:
    def function(input: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(as_tensor(input), name)(*args, **kwargs)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"``torch.{name}(input, ...)``: the same as ``input.{name}(...)``."
    return function


globals().update({name: _method_form(name) for name in METHOD_FORMS})


def cat(tensors: Sequence[Any], dim: int = 0) -> Tensor:
    """Join tensors along an existing ``dim``.

    Example:
        >>> cat([as_tensor([1.0]), as_tensor([2.0, 3.0])]).tolist()
        [1.0, 2.0, 3.0]
    """
    tensors = [as_tensor(t) for t in tensors]
    return ops.concat(tensors, axis=dim)


concat = concatenate = cat


def stack(tensors: Sequence[Any], dim: int = 0) -> Tensor:
    """Join same-shaped tensors along a new ``dim``.

    Example:
        >>> stack([as_tensor([1.0]), as_tensor([2.0])], dim=1).tolist()
        [[1.0, 2.0]]
    """
    return ops.stack([as_tensor(t) for t in tensors], axis=dim)


def where(condition: Any, input: Any = None, other: Any = None) -> Tensor:
    """``input`` where ``condition`` holds, else ``other`` (scalars allowed).

    Example:
        >>> where(as_tensor([True, False]), as_tensor([1.0, 2.0]), 0.0).tolist()
        [1.0, 0.0]
    """
    if input is None or other is None:
        raise NotImplementedError(
            with_location(
                "where(condition) (the indices of non-zero elements) is not supported: its "
                "shape depends on the data; use a mask with where(condition, x, y)"
            )
        )
    return ops.where(condition, input, other)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with a numpy array (writes to either show in both).

    Example:
        >>> a = np.zeros(2, np.float32); t = from_numpy(a); a[0] = 5.0
        >>> t.tolist()
        [5.0, 0.0]
    """
    if not isinstance(array, np.ndarray):
        raise DTypeError(with_location(f"from_numpy expects a numpy array, got {type(array)}"))
    return Tensor(array)


def is_tensor(obj: Any) -> bool:
    """Whether ``obj`` is a dualflow Tensor.

    Example:
        >>> is_tensor(as_tensor([1.0])), is_tensor([1.0])
        (True, False)
    """
    return isinstance(obj, Tensor)
