"""dualflow's own scalar functions per array module: ones it lacks, ones it runs better.

``erf`` (numpy has none): numpy's is a numba ufunc over libm's ``erf`` (exact to float64
rounding, which the gradient checks of ``gelu`` need; scipy is not a dependency), its machine
code kept in the signed kernels cache; cupy's is ``cupyx.scipy.special.erf``. numpy's ``tanh``
and ``exp`` are ``numpy.tanh``/``numpy.exp`` with dualflow's vectorized float32 loops
(``fast_math``; each takes ``out=`` as the ufunc does). Other array modules get theirs from their
``Backend`` (``register_backend`` records its ``functions`` here), so the scalar table's rows
find each module's without importing the backends, which are built on the kernels above this
table.
"""

from __future__ import annotations

import functools
import importlib
import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
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


def _fast_math(module: str, name: str) -> Callable:
    """``f(x, out=None)``: ``name`` of ``kernels.fast_math.<module>``, imported at the first call
    (it imports numba); ``direct`` gives the imported function itself."""

    @functools.cache
    def load() -> Callable:
        return getattr(importlib.import_module(f"{_FAST_MATH}.{module}"), name)

    def function(x: Any, out: Any = None) -> Any:
        return load()(x, out)

    function.__name__ = function.__qualname__ = name
    function.load = load  # type: ignore[attr-defined]
    return function


def direct(function: Callable) -> Callable:
    """The callable to call straight for one of these functions: the imported target of a
    lazily imported one (one Python call less per use), else the function itself.

    Example:
        >>> direct(numpy_tanh).__module__, direct(numpy_erf) is numpy_erf
        ('dualflow.kernels.fast_math.fast_tanh', True)
    """
    load = getattr(function, "load", None)
    return function if load is None else load()


_FAST_MATH = "dualflow.kernels.fast_math"
numpy_tanh = _fast_math("fast_tanh", "numpy_tanh")
numpy_exp = _fast_math("fast_exp", "numpy_exp")


def functions_of(xp: Any) -> Mapping[str, Callable]:
    """dualflow's scalar functions for array module ``xp``: its registered backend's, else the
    built-in ones of numpy and cupy, else none.

    Example:
        >>> sorted(functions_of(np))
        ['erf', 'exp', 'tanh']
    """
    functions = _REGISTERED.get(xp)
    if functions is None:
        functions = BUILT_IN.get(getattr(xp, "__name__", type(xp).__name__), _NONE)
    return functions


def register_functions(xp: Any, functions: Mapping[str, Callable]) -> None:
    """Make ``functions`` those of array module ``xp`` (``register_backend`` calls it).

    Example:
        >>> import types
        >>> module = types.ModuleType("mine")
        >>> register_functions(module, {"erf": numpy_erf})
        >>> round(float(erf(module, np.float64(0.5))), 6)
        0.5205
    """
    _REGISTERED[xp] = functions


def erf(xp: Any, x: Any) -> Any:
    """The error function for arrays of ``xp`` (numpy, cupy, or a module whose Backend has one).

    Example:
        >>> round(float(erf(np, np.float64(0.5))), 6)
        0.5205
    """
    function = functions_of(xp).get("erf")
    if function is None:
        raise NotImplementedError(f"erf: no implementation for arrays of {xp.__name__}")
    result = function(x)
    dtype = getattr(x, "dtype", None)
    if dtype is not None and dtype.itemsize == 2 and result.dtype != dtype:  # float16, bfloat16
        return result.astype(dtype)  # the ufunc has float32/64 loops only: round back
    return result


_NONE: Mapping[str, Callable] = MappingProxyType({})
# array module name -> the functions dualflow gives it (the built-in Backends' ``functions``)
BUILT_IN: Mapping[str, Mapping[str, Callable]] = MappingProxyType(
    {
        "numpy": MappingProxyType({"erf": numpy_erf, "tanh": numpy_tanh, "exp": numpy_exp}),
        "cupy": MappingProxyType({"erf": cupy_erf}),
    }
)
_REGISTERED: dict[Any, Mapping[str, Callable]] = {}  # array module -> its registered backend's


def _build_erf_ufunc() -> Any:
    try:  # heavy imports, only when erf is used
        from dualflow.kernels.base.numba_cache import cached_ufunc  # noqa: PLC0415
    except ImportError:  # numba is missing
        return np.frompyfunc(math.erf, 1, 1)

    def _erf(v):
        return math.erf(v)

    # machine code cached signed in the kernels cache (numba's cache=True pickles are unverified)
    return cached_ufunc(_erf, ["float32(float32)", "float64(float64)"], "k_erf")
