"""Tensor methods with PyTorch's names, argument names and meanings, mixed into ``Tensor``.

``x.view``, ``x.sum(dim=1, keepdim=True)``, ``x.max(1)`` -> ``(values, indices)``,
``x.transpose(0, 1)``, ``x.add_(y, alpha=2)``, ``x.data``... Each dispatches to ``dualflow.ops``
(the numpy-like primitive layer), so every computation is one op defined once; in-place methods
are ``ops.assign`` writes, which compiled functions record as state updates.
"""

from __future__ import annotations

from typing import Any

from dualflow.tensor_methods.compare import CompareMethods
from dualflow.tensor_methods.convert import ConvertMethods
from dualflow.tensor_methods.cumulative import CumulativeMethods
from dualflow.tensor_methods.hints import TENSOR_HINTS, missing
from dualflow.tensor_methods.index import IndexMethods
from dualflow.tensor_methods.inplace_methods import InplaceMethods
from dualflow.tensor_methods.layout import LayoutMethods
from dualflow.tensor_methods.math import MathMethods
from dualflow.tensor_methods.numpy_protocol import NumpyProtocol
from dualflow.tensor_methods.ported import PortedMethods
from dualflow.tensor_methods.reduce import ReduceMethods, ValuesIndices
from dualflow.tensor_methods.scatter import ScatterMethods
from dualflow.tensor_methods.shape import ShapeMethods
from dualflow.tensor_methods.size import Size
from dualflow.tensor_methods.unique import UniqueMethods


class TensorMethods(
    ShapeMethods,
    ReduceMethods,
    CumulativeMethods,
    MathMethods,
    CompareMethods,
    IndexMethods,
    ScatterMethods,
    UniqueMethods,
    LayoutMethods,
    ConvertMethods,
    InplaceMethods,
    NumpyProtocol,
    PortedMethods,
):
    """The PyTorch-style method forms of ``Tensor`` (see the modules of this package).

    Example:
        >>> import dualflow
        >>> x = dualflow.tensor([[1.0, 5.0], [3.0, 2.0]])
        >>> x.size(), x.max(dim=1).indices.tolist(), x.transpose(0, 1).tolist()
        (dualflow.Size([2, 2]), [1, 0], [[1.0, 3.0], [5.0, 2.0]])
    """

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: say what to use for PyTorch names we lack.
        if name.startswith("__"):
            raise AttributeError(name)
        kind = type(self).__name__
        raise missing(
            f"'{kind}' object", f"Tensor.{name}", name, TENSOR_HINTS, lambda: dir(type(self))
        )


__all__ = ["Size", "TensorMethods", "ValuesIndices"]
