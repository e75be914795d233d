"""The input casts ``dispatch.apply`` makes when ``config.autocast`` is on, by each op's
``autocast`` fact (PyTorch's autocast op lists, stated on the op definitions).

PyTorch's lists name its own ops; the dualflow ops that carry them (composites follow from their
parts, checked against PyTorch in tests/compat/test_autocast_dtypes.py):

- lower precision, CPU and CUDA: ``matmul``, ``conv2d``, ``conv_transpose2d`` (so ``linear``,
  ``conv1d``, ``mm``, ``bmm``... too; their composites cast the bias as well, so the output stays
  low), and the composites ``prelu`` and ``scaled_dot_product_attention`` (``lower_inputs``);
  ``dot`` and ``mv``, on no list, run ``matmul`` with autocast off;
- float32, CPU and CUDA: ``softmax_cross_entropy`` and ``prod``; the losses of
  ``nn.functional``, ``polar`` and reflect/replicate ``pad`` cast their inputs themselves
  (``float32_inputs``);
- float32 on CUDA only: ``exp``, ``expm1``, ``log``, ``log1p``, ``rsqrt``, ``power``,
  ``softplus``, ``softmax``, ``log_softmax``, ``sum`` (CPU autocast runs them in the input's
  type, as PyTorch's CPU list does);
- every other op runs in its inputs' types; mixed inputs promote as numpy does (float32 wins).

float64 inputs are never cast (PyTorch's rule). The low types are numpy's ``float16`` and
``ml_dtypes.bfloat16`` (optional; ``low_dtype`` says how to get it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow._config import config
from dualflow.errors import DTypeError
from dualflow.ops.arithmetic import cast

_FLOAT32 = np.dtype(np.float32)
_LOW_NAMES = ("float16", "bfloat16")


def low_dtype(name: Any) -> np.dtype:
    """The numpy dtype of a low-precision type name (``float16`` or ``bfloat16``).

    Raises:
        DTypeError: not a 16-bit float, or bfloat16 without the ``ml_dtypes`` package.

    Example:
        >>> low_dtype("float16")
        dtype('float16')
    """
    text = getattr(name, "name", None) or str(name)
    text = text.replace("torch.", "")
    if text in ("float16", "half"):
        return np.dtype(np.float16)
    if text == "bfloat16":
        try:
            import ml_dtypes  # noqa: PLC0415 - optional, imported only when asked for
        except ImportError:
            raise DTypeError(
                "autocast: bfloat16 needs the ml_dtypes package (pip install ml_dtypes); "
                "float16 works without it"
            ) from None
        return np.dtype(ml_dtypes.bfloat16)
    raise DTypeError(f"autocast: dtype must be float16 or bfloat16, got {name!r}")


def is_low(dtype: Any) -> bool:
    """Whether ``dtype`` is one of the 16-bit float types.

    Example:
        >>> is_low(np.float16), is_low(np.float32)
        (True, False)
    """
    return np.dtype(dtype).name in _LOW_NAMES


def _device_type(args: tuple) -> str:
    for a in args:
        array = getattr(a, "raw_array", a)
        if type(array).__module__.startswith("cupy"):  # (a lazily recorded array is host)
            return "cuda"
    return "cpu"


def _low_for(setting: tuple, args: tuple) -> np.dtype | None:
    device = _device_type(args)
    for kind, name in setting:
        if kind == device:
            return low_dtype(name)
    return None


def _cast_all(args: tuple, target: np.dtype, eligible: Any) -> tuple:
    out = []
    for a in args:
        dtype = getattr(a, "dtype", None)
        if dtype is not None and hasattr(a, "shape") and eligible(np.dtype(dtype)):
            a = a if np.dtype(dtype) == target else cast(a, target)
        out.append(a)
    return tuple(out)


def _lowerable(dtype: np.dtype) -> bool:
    return (dtype.kind == "f" and dtype != np.float64) or dtype.name == "bfloat16"


def cast_for(op: Any, args: tuple, setting: tuple) -> tuple:
    """``args`` of ``op`` cast by the autocast ``setting`` (``config.autocast``), as the op's
    ``autocast`` fact says.

    Example:
        >>> import dualflow
        >>> from dualflow.ops import OPS
        >>> a = dualflow.ones(2, 2)
        >>> [str(x.dtype) for x in cast_for(OPS["matmul"], (a, a), (("cpu", "float16"),))]
        ['float16', 'float16']
    """
    policy = op.autocast
    if policy is None:
        return args
    low = _low_for(setting, args)
    if low is None:
        return args
    if policy == "lower":
        return _cast_all(args, low, _lowerable)
    if policy == "float32_cuda" and _device_type(args) != "cuda":
        return args  # PyTorch's CPU list runs these in the input's type
    return _cast_all(args, _FLOAT32, lambda d: d.name in _LOW_NAMES)


def lower_inputs(*args: Any) -> tuple:
    """Composites of a lower-precision op (``linear``, ``conv2d``): all their float inputs (the
    bias too) in the low type when autocast is on, else ``args`` as given.

    Example:
        >>> lower_inputs(1.0, None)
        (1.0, None)
    """
    setting = config.autocast
    if setting is None:
        return args
    low = _low_for(setting, args)
    return args if low is None else _cast_all(args, low, _lowerable)


def lowers(*args: Any) -> bool:
    """Whether autocast is on for ``args``' device and would take every float one of them to
    the low type (float64 is never cast): a lower-precision op then accepts mixed float32 and
    16-bit operands, as PyTorch's does.

    Example:
        >>> import dualflow
        >>> a = dualflow.ones(2)
        >>> lowers(a, a), dualflow.autocast("cpu", dtype="float16")(lambda: lowers(a, a))()
        (False, True)
    """
    setting = config.autocast
    if setting is None or _low_for(setting, args) is None:
        return False
    dtypes = [np.dtype(a.dtype) for a in args if hasattr(a, "dtype") and hasattr(a, "shape")]
    return all(_lowerable(d) for d in dtypes)


def float32_inputs(*args: Any) -> tuple:
    """Composites on PyTorch's float32 list (the losses): low-precision float inputs back in
    float32 when autocast is on.

    Example:
        >>> float32_inputs(2.0)
        (2.0,)
    """
    setting = config.autocast
    if setting is None or _low_for(setting, args) is None:
        return args
    return _cast_all(args, _FLOAT32, lambda d: d.name in _LOW_NAMES)
