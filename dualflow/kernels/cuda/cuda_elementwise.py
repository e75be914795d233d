"""Eager elementwise ops on cupy arrays: one cached ``cupy.ElementwiseKernel`` per (op, input
types, constant attributes), rendered from the op's expression, so each call is one kernel launch
typed exactly as numpy types the same call.

Python scalars (inputs or numeric attributes such as ``slope``) are kernel parameters typed as
numpy types weak scalars, so ``x * 0.5`` and ``x * 0.25`` share a kernel and float32 stays float32.
Cases without a CUDA C rendering (float16, complex, host arrays) run the op's plain ``xp`` forward.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dualflow.kernels.cuda.cuda_render import CudaSource, elementwise_kernel, render_cuda
from dualflow.kernels.expr.expression import Expr
from dualflow.kernels.expr.typed_program import WEAK_DTYPES, lower_expr

_WEAK = tuple(WEAK_DTYPES)
_TABLES: list[dict] = []  # every op's kernel table, so clear() can empty them all


@dataclass
class CacheStats:
    """Counts over all ops: kernels built (misses), found built (hits), calls run by ``xp``."""

    hits: int = 0
    misses: int = 0
    fallbacks: int = 0


STATS = CacheStats()


def cache_info() -> tuple[int, int, int, int]:
    """``(hits, misses, fallbacks, kernels cached)`` of the eager CUDA kernel cache.

    Example:
        >>> cache_info()[3] >= 0
        True
    """
    size = sum(1 for table in _TABLES for entry in table.values() if entry is not None)
    return STATS.hits, STATS.misses, STATS.fallbacks, size


def clear() -> None:
    """Forget every built kernel and zero the counters (tests; kernels rebuild on next use).

    Example:
        >>> clear(); cache_info()
        (0, 0, 0, 0)
    """
    for table in _TABLES:
        table.clear()
    STATS.hits = STATS.misses = STATS.fallbacks = 0


def _kind(value: Any) -> Any:
    """A weak scalar's Python type, else the dtype character of a device array or numpy scalar;
    None for a host array (cupy rejects it; the ``xp`` path reports the device mismatch).

    Characters, not dtypes, because numpy dtypes compare equal to Python types and even to
    None (``dtype('float64') == float``), which would mix weak and strong keys."""
    kind = type(value)
    if kind in _WEAK:
        return kind
    if isinstance(value, np.ndarray):
        return None
    dtype = getattr(value, "dtype", None)
    return None if dtype is None else dtype.char


def bind_attrs(expr: Expr, params: tuple[str, ...], consts: dict[str, Any]) -> Expr:
    """Turn ``attr`` leaves into inputs (``params``, passed at call time) or constants.

    Example:
        >>> bind_attrs(("call", "add", ("var", "x"), ("attr", "k")), ("k",), {})
        ('call', 'add', ('var', 'x'), ('var', 'k'))
    """
    if expr[0] == "attr":
        name = expr[1]
        return ("var", name) if name in params else ("const", consts[name])
    if expr[0] == "call":
        return ("call", expr[1], *(bind_attrs(e, params, consts) for e in expr[2:]))
    return expr


def eager_source(
    name: str, expr: Expr, args: tuple[str, ...], kinds: tuple[Any, ...], attrs: dict[str, Any]
) -> tuple[CudaSource, tuple[str, ...]]:
    """The CUDA source of op ``name`` for inputs of ``kinds`` and attribute values ``attrs``.

    ``kinds`` are dtypes (or their names or characters), or ``bool``/``int``/``float`` for weak
    scalars. Numeric attributes become trailing kernel parameters (their names are returned
    with the source); string attributes are compiled in.

    Raises:
        NotImplementedError: no CUDA rendering (float16, complex, unknown attribute type).
        TypeError, ValueError: numpy rejects these input types (e.g. ``negative`` of bool).

    Example:
        >>> from dualflow.ops import OPS
        >>> op = OPS["leaky_relu"]
        >>> src, params = eager_source(op.name, op.expr, op.args, ("float32",), {"slope": 0.2})
        >>> src.in_params, src.out_params, params
        ('float32 a0, float64 a1', 'float32 out', ('slope',))
    """
    params = tuple(a for a, v in attrs.items() if type(v) in _WEAK or isinstance(v, np.generic))
    consts = {a: v for a, v in attrs.items() if a not in params}
    if any(not isinstance(v, str) for v in consts.values()):
        raise NotImplementedError(f"{name}: attributes {consts} are not numbers or strings")
    attr_kinds = tuple(_kind(attrs[a]) for a in params)
    dtypes = tuple(np.dtype(k) if isinstance(k, str) else k for k in kinds + attr_kinds)
    program = lower_expr(bind_attrs(expr, params, consts), args + params, dtypes)
    source = render_cuda(program)
    digest = source.name.rsplit("_", 1)[1]
    return source._replace(name=f"dualflow_{name}_{digest}"), params


def _build(name: str, expr: Expr, args: tuple, kinds: tuple, attrs: dict) -> Callable | None:
    try:
        source, params = eager_source(name, expr, args, kinds, attrs)
    except (NotImplementedError, TypeError, ValueError, ArithmeticError):
        return None  # numpy rejects these types, or CUDA C has none: the xp path decides
    return launcher(source, params)


def launcher(source: CudaSource, params: tuple[str, ...]) -> Callable:
    """``launch(arrays, attrs)``: the ElementwiseKernel of ``source`` called with the arrays,
    then the attribute values named by ``params``. cupy is imported (and the kernel object made)
    at the first launch; cupy compiles per argument layout and caches the binaries.

    Example:
        >>> callable(launcher(CudaSource("float32 a0", "float32 out", "out = a0;", "k"), ()))
        True
    """
    kernel: Any = None

    def launch(arrays: tuple, attr_values: dict) -> Any:
        nonlocal kernel
        if kernel is None:
            kernel = elementwise_kernel(source)
        return kernel(*arrays, *[attr_values[a] for a in params])

    return launch


def device_forward(name: str, expr: Expr, args: tuple[str, ...], fallback: Callable) -> Callable:
    """``run(xp, arrays, attrs)``: op ``name`` on device arrays through its cached kernels,
    or through ``fallback(xp, *arrays, **attrs)`` (the plain ``xp`` forward) when none applies.

    Example:
        >>> run = device_forward("exp", ("call", "exp", ("var", "x")), ("x",), None)
        >>> callable(run)
        True
    """
    table: dict[tuple, Callable | None] = {}
    _TABLES.append(table)

    def run(xp: Any, arrays: tuple, attrs: dict) -> Any:
        kinds = tuple(_kind(a) for a in arrays)
        key = (kinds, tuple(v if isinstance(v, str) else type(v) for v in attrs.values()))
        launch = table.get(key, False)
        if launch is False:
            STATS.misses += 1
            unknown = any(k is None for k in kinds)
            launch = None if unknown else _build(name, expr, args, kinds, attrs)
            table[key] = launch
        else:
            STATS.hits += 1
        if launch is None:
            STATS.fallbacks += 1
            return fallback(xp, *arrays, **attrs)
        return launch(arrays, attrs)

    return run
