"""PyTorch's ``torch.index_add``, ``torch.scatter_reduce``, ``torch.repeat_interleave`` and
``torch.unique`` (with ``torch.scatter``/``scatter_add`` in ``functions.py``): each is the Tensor
method of the same name on its first argument, except ``torch.repeat_interleave(repeats)``,
which repeats ``arange(len(repeats))``.

Example:
    >>> import dualflow
    >>> dualflow.repeat_interleave(dualflow.tensor([2, 0, 1])).tolist()
    [0, 0, 2]
    >>> dualflow.unique(dualflow.tensor([2, 1, 2])).tolist()
    [1, 2]
"""

from __future__ import annotations

from typing import Any

from dualflow import ops
from dualflow.function_names import INDEX_METHOD_FORMS
from dualflow.functions import _method_form
from dualflow.tensor.core import as_tensor

globals().update({name: _method_form(name) for name in INDEX_METHOD_FORMS})


def repeat_interleave(input: Any, repeats: Any = None, dim: int | None = None, **kw: Any) -> Any:
    """``input.repeat_interleave(repeats, dim)``; with ``repeats`` omitted, ``input`` holds the
    repeats of ``0, 1, ..., len(input) - 1``.

    Example:
        >>> import dualflow
        >>> repeat_interleave(dualflow.tensor([1.0, 2.0]), 2).tolist()
        [1.0, 1.0, 2.0, 2.0]
    """
    input = as_tensor(input)
    if repeats is None:
        positions = ops.arange(int(input.numel()), dtype="int64", device=input.device)
        return positions.repeat_interleave(input, **kw)
    return input.repeat_interleave(repeats, dim, **kw)
