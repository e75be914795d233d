"""``roll`` and ``tensor_split`` with PyTorch's meanings, as slices and concatenations.

Both are composites of the ``getitem`` and ``concat`` ops, so they differentiate, trace and take
symbolic sizes (``compile(dynamic=True)``) as those ops do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dualflow import ops
from dualflow.errors import ShapeError, with_location
from dualflow.ops.dispatch import apply
from dualflow.ops.slicing import GetItem, axis_slice
from dualflow.tensor.methods.size import dim_index


def _slice(x: Any, dim: int, start: Any, stop: Any) -> Any:
    return apply(GetItem, x, index=axis_slice(x.ndim, dim, start, stop))


def _ints(value: Any, what: str) -> tuple[int, ...]:
    """An int, a sequence of ints or a tensor of them, as a tuple (a 0-d tensor: one int)."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, Sequence):
        return tuple(int(v) for v in value)
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    raise TypeError(with_location(f"{what} must be an int or a sequence of ints, got {value!r}"))


def _roll_one(x: Any, shift: int, dim: int) -> Any:
    d = dim_index(dim, x.ndim, "roll")
    n = x.shape[d]
    if n == 0 or shift == 0:
        return x
    # within one turn the cut is the int ``-shift`` counted from the end (a comparison with a
    # symbolic size, never its value: the trace keeps serving every size the comparison holds
    # for); beyond it, ``shift % n`` pins the size
    cut = -shift if -n < shift < n else -(shift % n)
    if cut == 0:
        return x
    return ops.concat([_slice(x, d, cut, None), _slice(x, d, None, cut)], axis=d)


def _section_bounds(n: Any, sections: int) -> list[tuple[Any, Any]]:
    """PyTorch's ``sections`` pieces: the first ``n % sections`` one element longer (bounds from
    the size: a symbolic size is pinned, as by ``split``)."""
    if sections < 1:
        raise ShapeError(
            with_location(f"tensor_split: number of sections must be at least 1, got {sections}")
        )
    size, extra = n // sections, n % sections
    bounds, start = [], 0
    for i in range(sections):
        stop = start + size + (1 if i < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def _index_bounds(indices: tuple[int, ...]) -> list[tuple[Any, Any]]:
    """Python slices between consecutive indices, which is PyTorch's meaning (negative ones count
    from the end, out-of-range ones clamp, a start past its stop is empty); the ints are the
    slices' own, so a symbolic size is compared, never pinned."""
    return list(zip([None, *indices], [*indices, None]))


class RearrangeMethods:
    """``roll`` and ``tensor_split``."""

    __slots__ = ()

    def roll(self, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None) -> Any:
        """Shift elements cyclically by ``shifts`` along ``dims`` (all of them flattened when
        ``dims`` is None, then the shape restored).

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([[0, 1, 2], [3, 4, 5]])
            >>> x.roll(1).tolist(), x.roll((1, -1), (0, 1)).tolist()
            ([[5, 0, 1], [2, 3, 4]], [[4, 5, 3], [1, 2, 0]])
        """
        steps = _ints(shifts, "roll: shifts")
        if dims is None:
            if len(steps) != 1:
                raise ShapeError(
                    with_location(f"roll: without dims, shifts must be one int, got {shifts!r}")
                )
            return _roll_one(ops.reshape(self, (-1,)), steps[0], 0).reshape(self.shape)
        axes = _ints(dims, "roll: dims")
        if len(axes) != len(steps):
            raise ShapeError(
                with_location(
                    f"roll: shifts and dims must align, got {len(steps)} shifts and "
                    f"{len(axes)} dims"
                )
            )
        result = self
        for shift, dim in zip(steps, axes):
            result = _roll_one(result, shift, dim)
        return result

    def tensor_split(
        self,
        indices_or_sections: Any = None,
        dim: int = 0,
        *,
        indices: Any = None,
        sections: Any = None,
    ) -> tuple[Any, ...]:
        """Pieces along ``dim``: ``sections`` of near-equal size (the first ``n % sections``
        one longer) for an int, else the slices between consecutive ``indices``.

        Example:
            >>> import dualflow
            >>> x = dualflow.arange(5)
            >>> [p.tolist() for p in x.tensor_split(3)]
            [[0, 1], [2, 3], [4]]
            >>> [p.tolist() for p in x.tensor_split([1, 3])]
            [[0], [1, 2], [3, 4]]
        """
        given = [v for v in (indices_or_sections, indices, sections) if v is not None]
        if len(given) != 1:
            raise TypeError(
                with_location(
                    "tensor_split: give exactly one of indices_or_sections, indices, sections"
                )
            )
        d = dim_index(dim, self.ndim, "tensor_split")
        n = self.shape[d]
        value = given[0]
        scalar = hasattr(value, "ndim") and value.ndim == 0
        if indices is None and (scalar or isinstance(value, int)):
            bounds = _section_bounds(n, _ints(value, "tensor_split: sections")[0])
        else:
            bounds = _index_bounds(_ints(value, "tensor_split: indices"))
        return tuple(_slice(self, d, start, stop) for start, stop in bounds)
