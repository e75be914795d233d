"""Padding layers with PyTorch's names: ``ReflectionPad``, ``ReplicationPad``, ``ZeroPad``,
``ConstantPad`` and ``CircularPad`` in 1-, 2- and 3-D forms, each ``F.pad`` with its mode.

``padding`` is an int (the same on every side) or ``2 * dims`` ints ``(left, right, top,
bottom, front, back)`` from the last dim backwards, as PyTorch.
"""

from __future__ import annotations

from typing import Any

from dualflow.nn.functional.spatial import pad
from dualflow.nn.module import Module
from dualflow.tensor.core import Tensor, as_tensor


class _PadNd(Module):
    """Pad the last ``dims`` dims of a batched or unbatched input with ``mode``."""

    dims = 1
    mode = "constant"

    def __init__(self, padding: Any, value: float = 0.0) -> None:
        super().__init__()
        name, count = type(self).__name__, 2 * self.dims
        if isinstance(padding, int):
            padding = (padding,) * count
        padding = tuple(int(p) for p in padding)
        if len(padding) != count:
            raise ValueError(f"{name}: padding must be an int or {count} ints, got {padding}")
        self.padding, self.value = padding, float(value)

    def forward(self, input: Any) -> Tensor:
        """``input`` padded by ``self.padding`` in ``self.mode`` (``F.pad`` checks the input's
        rank and the widths for the non-constant modes, as PyTorch)."""
        value = self.value if self.mode == "constant" else None
        return pad(as_tensor(input), self.padding, self.mode, value)

    def extra_repr(self) -> str:
        if self.mode == "constant" and not type(self).__name__.startswith("Zero"):
            return f"padding={self.padding}, value={self.value}"
        return f"{self.padding}"  # PyTorch's repr: ReflectionPad1d((2, 2))


class ReflectionPad1d(_PadNd):
    """Pad the last dim with its reflection (the edge not repeated).

    Example:
        >>> ReflectionPad1d(2)(as_tensor([[[1.0, 2.0, 3.0]]])).tolist()
        [[[3.0, 2.0, 1.0, 2.0, 3.0, 2.0, 1.0]]]
    """

    dims, mode = 1, "reflect"


class ReflectionPad2d(ReflectionPad1d):
    """Reflection padding of the last two dims: (left, right, top, bottom).

    Example:
        >>> ReflectionPad2d((1, 0, 0, 1))(as_tensor([[[1.0, 2.0], [3.0, 4.0]]])).tolist()
        [[[2.0, 1.0, 2.0], [4.0, 3.0, 4.0], [2.0, 1.0, 2.0]]]
    """

    dims = 2


class ReflectionPad3d(ReflectionPad1d):
    """Reflection padding of the last three dims.

    Example:
        >>> ReflectionPad3d(1)(as_tensor([[[[[1.0, 2.0], [3.0, 4.0]]] * 2]])).shape
        (1, 1, 4, 4, 4)
    """

    dims = 3


class ReplicationPad1d(_PadNd):
    """Pad the last dim by repeating its edge values.

    Example:
        >>> ReplicationPad1d((1, 2))(as_tensor([[[1.0, 2.0]]])).tolist()
        [[[1.0, 1.0, 2.0, 2.0, 2.0]]]
    """

    dims, mode = 1, "replicate"


class ReplicationPad2d(ReplicationPad1d):
    """Edge padding of the last two dims.

    Example:
        >>> ReplicationPad2d(1)(as_tensor([[[1.0]]])).tolist()
        [[[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]]
    """

    dims = 2


class ReplicationPad3d(ReplicationPad1d):
    """Edge padding of the last three dims.

    Example:
        >>> ReplicationPad3d(1)(as_tensor([[[[[1.0]]]]])).shape
        (1, 1, 3, 3, 3)
    """

    dims = 3


class CircularPad1d(_PadNd):
    """Pad the last dim by wrapping around (periodic).

    Example:
        >>> CircularPad1d(1)(as_tensor([[[1.0, 2.0, 3.0]]])).tolist()
        [[[3.0, 1.0, 2.0, 3.0, 1.0]]]
    """

    dims, mode = 1, "circular"


class CircularPad2d(CircularPad1d):
    """Circular padding of the last two dims.

    Example:
        >>> CircularPad2d((1, 0, 1, 0))(as_tensor([[[1.0, 2.0], [3.0, 4.0]]])).tolist()
        [[[4.0, 3.0, 4.0], [2.0, 1.0, 2.0], [4.0, 3.0, 4.0]]]
    """

    dims = 2


class CircularPad3d(CircularPad1d):
    """Circular padding of the last three dims.

    Example:
        >>> CircularPad3d(1)(as_tensor([[[[[1.0]]]]])).shape
        (1, 1, 3, 3, 3)
    """

    dims = 3


class ConstantPad1d(_PadNd):
    """Pad the last dim with ``value``.

    Example:
        >>> ConstantPad1d((0, 1), 9.0)(as_tensor([[1.0]])).tolist()
        [[1.0, 9.0]]
    """

    dims = 1


class ConstantPad2d(ConstantPad1d):
    """Pad the last two dims with ``value``.

    Example:
        >>> ConstantPad2d(1, 0.5)(as_tensor([[[1.0]]])).tolist()[0][0]
        [0.5, 0.5, 0.5]
    """

    dims = 2


class ConstantPad3d(ConstantPad1d):
    """Pad the last three dims with ``value``.

    Example:
        >>> ConstantPad3d(1, 3.5)
        ConstantPad3d(padding=(1, 1, 1, 1, 1, 1), value=3.5)
    """

    dims = 3


class ZeroPad1d(ConstantPad1d):
    """Pad the last dim with zeros.

    Example:
        >>> ZeroPad1d(1)(as_tensor([[1.0]])).tolist()
        [[0.0, 1.0, 0.0]]
    """

    def __init__(self, padding: Any) -> None:
        super().__init__(padding, 0.0)


class ZeroPad2d(ZeroPad1d):
    """Pad the last two dims with zeros.

    Example:
        >>> ZeroPad2d((1, 1, 2, 0))
        ZeroPad2d((1, 1, 2, 0))
    """

    dims = 2


class ZeroPad3d(ZeroPad1d):
    """Pad the last three dims with zeros.

    Example:
        >>> ZeroPad3d(1)(as_tensor([[[[1.0]]]])).shape
        (1, 3, 3, 3)
    """

    dims = 3


PADDING_LAYERS = (ReflectionPad1d, ReflectionPad2d, ReflectionPad3d, ReplicationPad1d)
PADDING_LAYERS += (ReplicationPad2d, ReplicationPad3d, CircularPad1d, CircularPad2d)
PADDING_LAYERS += (CircularPad3d, ConstantPad1d, ConstantPad2d, ConstantPad3d, ZeroPad1d)
PADDING_LAYERS += (ZeroPad2d, ZeroPad3d)
