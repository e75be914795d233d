"""PyTorch's dtype names as numpy dtypes: ``dualflow.float32``, ``dualflow.long``, ``bool``...

So ``x.to(torch.float32)`` ports as ``x.to(dualflow.float32)``; dualflow tensors carry numpy
dtypes, and every name here is one (``bfloat16`` and complex types have no numpy counterpart).
"""

from __future__ import annotations

import builtins

import numpy as np

float32 = float = np.dtype("float32")
float64 = double = np.dtype("float64")
float16 = half = np.dtype("float16")
int64 = long = np.dtype("int64")
int32 = int = np.dtype("int32")
int16 = short = np.dtype("int16")
int8 = np.dtype("int8")
uint8 = np.dtype("uint8")
bool = np.dtype("bool")

NAMES = (
    "float32", "float", "float64", "double", "float16", "half", "int64", "long", "int32", "int",
    "int16", "short", "int8", "uint8", "bool",
)  # fmt: skip


def is_float_dtype(dtype: object) -> builtins.bool:
    """Whether ``dtype`` is a real floating type: numpy's, or ``ml_dtypes.bfloat16`` (which
    numpy files under kind "V"; autocast's CPU bfloat16).

    Example:
        >>> is_float_dtype(np.float16), is_float_dtype(np.int8)
        (True, False)
    """
    if isinstance(dtype, type) and not hasattr(dtype, "dtype"):
        return dtype is builtins.float  # a weak Python scalar type
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or dtype.name == "bfloat16"


def is_floating_point(x: object) -> builtins.bool:
    """Whether ``x`` (a tensor or array) has a floating-point dtype, as ``torch.is_floating_point``.

    Example:
        >>> import dualflow
        >>> is_floating_point(dualflow.tensor([1.0])), is_floating_point(dualflow.tensor([1]))
        (True, False)
    """
    return is_float_dtype(x.dtype)
