"""Scalar functions an array module lacks, per backend: ``erf`` (numpy has none).

numpy's is a numba ufunc over libm's ``erf`` (exact to float64 rounding, which the gradient checks
of ``gelu`` need; scipy is not a dependency), its machine code kept in the signed kernels cache;
cupy's is ``cupyx.scipy.special.erf``. Other array modules get theirs from their ``Backend``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

_ERF_UFUNC: list[Any] = []


def numpy_erf(x: Any) -> Any:
    """The error function of a numpy array or scalar (a numba ufunc, built on first use).

    Example:
        >>> round(float(numpy_erf(np.float64(0.5))), 6)
        0.5205
    """
    if not _ERF_UFUNC:
        _ERF_UFUNC.append(_build_erf_ufunc())
    return _ERF_UFUNC[0](x)


def cupy_erf(x: Any) -> Any:
    """The error function of a cupy array (``cupyx.scipy.special.erf``)."""
    import cupyx.scipy.special  # noqa: PLC0415 - only on GPU

    return cupyx.scipy.special.erf(x)


def erf(xp: Any, x: Any) -> Any:
    """The error function for arrays of ``xp`` (numpy, cupy, or a module whose Backend has one).

    Example:
        >>> round(float(erf(np, np.float64(0.5))), 6)
        0.5205
    """
    from dualflow.kernels.backend import backend_of  # noqa: PLC0415 - backend imports this

    function = backend_of(xp).functions.get("erf")
    if function is None:
        raise NotImplementedError(f"erf: no implementation for arrays of {xp.__name__}")
    result = function(x)
    dtype = getattr(x, "dtype", None)
    if dtype is not None and dtype.itemsize == 2 and result.dtype != dtype:  # float16, bfloat16
        return result.astype(dtype)  # the ufunc has float32/64 loops only: round back
    return result


def _build_erf_ufunc() -> Any:
    try:  # heavy imports, only when erf is used
        from dualflow.kernels.numba_cache import cached_ufunc  # noqa: PLC0415
    except ImportError:  # numba is missing
        return np.frompyfunc(math.erf, 1, 1)

    def _erf(v):
        return math.erf(v)

    # machine code cached signed in the kernels cache (numba's cache=True pickles are unverified)
    return cached_ufunc(_erf, ["float32(float32)", "float64(float64)"], "k_erf")
