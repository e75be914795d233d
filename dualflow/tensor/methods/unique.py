"""``repeat_interleave`` and ``unique`` with PyTorch's meanings: the Tensor methods whose output
shape can depend on a tensor's values.

``repeat_interleave`` with an int (or a Python list of ints) is a composite of ops
(``expand``/``reshape`` or an integer-array ``getitem``), differentiable and compiled as is.
With a *tensor* of repeats, and for ``unique`` always, the output shape is the data's: these
read the values, and inside a compiled function that fails closed (the call runs eagerly, with
the tracer's warning naming the op) rather than baking one call's shape into the plan.
``unique`` has no gradient, as in PyTorch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow import ops
from dualflow.device import send
from dualflow.errors import DTypeError, ShapeError, with_location
from dualflow.ops.dispatch import tracing
from dualflow.tensor.methods.size import dim_index


def values_of(x: Any, op: str) -> np.ndarray:
    """``x``'s values on the host; fails closed inside a compiled function (data-dependent)."""
    hooks = tracing()
    if hooks is not None:
        hooks.on_raw_access(x, f"{op} (its output shape depends on the values): reading the values")
    return np.asarray(send(x.raw_array, "cpu"))


def _counts(repeats: Any, n: int) -> np.ndarray:
    """The repeat count of each of ``n`` entries, from a tensor or a list of ints."""
    if hasattr(repeats, "shape"):
        if getattr(repeats.dtype, "kind", "") not in "iu":
            raise DTypeError(
                with_location(f"repeat_interleave: repeats must be integers, got {repeats.dtype}")
            )
        counts = values_of(repeats, "repeat_interleave with tensor repeats").reshape(-1)
    else:
        counts = np.asarray(repeats, np.int64).reshape(-1)
    if counts.size == 1:
        counts = np.full(n, int(counts[0]), np.int64)
    if counts.size != n:
        raise ShapeError(
            with_location(
                f"repeat_interleave: repeats must have the same size as input along dim, but got "
                f"repeats.size(0) = {counts.size} and input.size(dim) = {n}"
            )
        )
    if (counts < 0).any():
        raise ValueError(with_location("repeat_interleave: repeats can not be negative"))
    return counts


class UniqueMethods:
    """``repeat_interleave`` and ``unique``."""

    __slots__ = ()

    def repeat_interleave(
        self, repeats: Any, dim: int | None = None, *, output_size: Any = None
    ) -> Any:
        """Repeat each entry along ``dim`` (the flattened tensor when None) ``repeats`` times:
        an int, or one count per entry (a tensor or a list).

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([[1.0, 2.0], [3.0, 4.0]])
            >>> x.repeat_interleave(2, dim=0).tolist()
            [[1.0, 2.0], [1.0, 2.0], [3.0, 4.0], [3.0, 4.0]]
            >>> x.repeat_interleave(dualflow.tensor([1, 2]), dim=1).tolist()
            [[1.0, 2.0, 2.0], [3.0, 4.0, 4.0]]
        """
        x = self if dim is not None else ops.reshape(self, (-1,))
        d = dim_index(0 if dim is None else dim, x.ndim, "repeat_interleave")
        if x.ndim == 0:
            x = ops.reshape(x, (1,))
        n = x.shape[d]
        if isinstance(repeats, int | np.integer):
            if repeats < 0:
                raise ValueError(with_location("repeat_interleave: repeats can not be negative"))
            shape = tuple(x.shape)
            spread = ops.broadcast_to(
                ops.expand_dims(x, d + 1), shape[: d + 1] + (int(repeats),) + shape[d + 1 :]
            )
            out = ops.reshape(spread, shape[:d] + (n * int(repeats),) + shape[d + 1 :])
        else:
            counts = _counts(repeats, n)
            index = np.repeat(np.arange(n, dtype=np.int64), counts)
            out = ops.getitem(x, (slice(None),) * d + (index,))
        if output_size is not None and out.shape[d] != int(output_size):
            raise ShapeError(
                with_location(
                    f"repeat_interleave: output_size={output_size} but the repeats give "
                    f"{out.shape[d]}"
                )
            )
        return out

    def unique(
        self,
        sorted: bool = True,
        return_inverse: bool = False,
        return_counts: bool = False,
        dim: int | None = None,
    ) -> Any:
        """The distinct values (sorted), and optionally ``inverse`` (where each input entry went)
        and ``counts``; with ``dim``, the distinct slices along it. No gradient; inside a
        compiled function it fails closed (its output shape depends on the values).

        Example:
            >>> import dualflow
            >>> values, inverse, counts = dualflow.tensor([3, 1, 3, 2]).unique(
            ...     return_inverse=True, return_counts=True)
            >>> values.tolist(), inverse.tolist(), counts.tolist()
            ([1, 2, 3], [2, 0, 2, 1], [1, 1, 2])
        """
        array = values_of(self, "unique")
        if dim is None:
            values, where, many = np.unique(array, return_inverse=True, return_counts=True)
            where = where.reshape(array.shape)
        else:
            d = dim_index(dim, self.ndim, "unique")
            found = np.unique(array, return_inverse=True, return_counts=True, axis=d)
            values, where, many = found[0], found[1].reshape(-1), found[2]
        device, make = self.device, type(self)
        out = [make(send(values.astype(array.dtype), device))]
        if return_inverse:
            out.append(make(send(where.astype(np.int64), device)))
        if return_counts:
            out.append(make(send(many.astype(np.int64), device)))
        return out[0] if len(out) == 1 else tuple(out)
