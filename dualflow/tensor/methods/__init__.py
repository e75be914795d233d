"""Tensor methods with PyTorch's names, argument names and meanings, mixed into ``Tensor``.

``x.view``, ``x.sum(dim=1, keepdim=True)``, ``x.max(1)`` -> ``(values, indices)``,
``x.transpose(0, 1)``, ``x.add_(y, alpha=2)``, ``x.data``... Each dispatches to ``dualflow.ops``
(the numpy-like primitive layer), so every computation is one op defined once; in-place methods
are ``ops.assign`` writes, which compiled functions record as state updates.
"""

from __future__ import annotations

from typing import Any

from dualflow.tensor.methods.compare import CompareMethods
from dualflow.tensor.methods.convert import ConvertMethods
from dualflow.tensor.methods.cumulative import CumulativeMethods
from dualflow.tensor.methods.division import DivisionMethods
from dualflow.tensor.methods.hints import TENSOR_HINTS, missing
from dualflow.tensor.methods.index import IndexMethods
from dualflow.tensor.methods.inplace_methods import InplaceMethods
from dualflow.tensor.methods.layout import LayoutMethods
from dualflow.tensor.methods.math import MathMethods
from dualflow.tensor.methods.numpy_protocol import NumpyProtocol
from dualflow.tensor.methods.ported import PortedMethods
from dualflow.tensor.methods.rearrange import RearrangeMethods
from dualflow.tensor.methods.reduce import ReduceMethods, ValuesIndices
from dualflow.tensor.methods.scatter import ScatterMethods
from dualflow.tensor.methods.shape import ShapeMethods
from dualflow.tensor.methods.size import Size
from dualflow.tensor.methods.unique import UniqueMethods


class TensorMethods(
    ShapeMethods,
    RearrangeMethods,
    ReduceMethods,
    CumulativeMethods,
    MathMethods,
    DivisionMethods,
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
