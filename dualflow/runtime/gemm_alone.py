"""numpy's time for a plan's matmul step run alone: the same operand shapes, strides and dtypes
(and an ``out=`` array when the step wrote one), the same call (``kernels.linalg.gemm.matmul``,
which routes a stack of rows as one GEMM), in a warm loop with nothing else between calls.

A profiled plan run records each matmul step's operand layouts (``Plan.profile_layouts``); the
profile (``explain(profile=True)``) and the bench divide this reference time by the step's time
inside the plan, so what a plan loses around its GEMMs (layout copies its operands need, cache
traffic of the step before, thread hand-offs) shows as a share below 100%. Each layout is
measured once a process (cached per layout and thread count).
"""

from __future__ import annotations

import functools
import time
from typing import Any

import numpy as np

from dualflow.kernels.base.cpu_threads import threads
from dualflow.kernels.linalg.gemm import matmul

Spec = tuple  # ((shape, strides, dtype str) per operand, the out array's or None)
MIN_SECONDS = 0.05  # a reference keeps repeating until it has run this long (and MIN_REPEATS)
MIN_REPEATS, MAX_REPEATS = 10, 400


def _layout(array: Any) -> tuple:
    return (tuple(array.shape), tuple(array.strides), array.dtype.str)


def layouts(operands: tuple, out: Any = None) -> Spec:
    """What a profiled plan records of one matmul step: each operand's shape, strides and
    dtype, and its ``out=`` array's (None when the step allocated its result).

    Example:
        >>> a = np.zeros((4, 3), np.float32)
        >>> layouts((a, a.T))
        ((((4, 3), (12, 4), '<f4'), ((3, 4), (4, 12), '<f4')), None)
    """
    return tuple(_layout(a) for a in operands), None if out is None else _layout(out)


def _array(layout: tuple, rng: np.random.Generator) -> np.ndarray:
    """A fresh array with ``layout``'s shape, strides and dtype (C-ordered when its strides
    cannot be rebuilt over one buffer: negative ones)."""
    shape, strides, dtype = layout
    dtype = np.dtype(dtype)
    if any(s < 0 for s in strides) or 0 in shape:
        return _values(rng, int(np.prod(shape, dtype=np.int64)), dtype).reshape(shape)
    span = sum((n - 1) * s for n, s in zip(shape, strides)) // dtype.itemsize + 1
    base = _values(rng, span, dtype)
    return np.lib.stride_tricks.as_strided(base, shape, strides)


def _values(rng: np.random.Generator, count: int, dtype: np.dtype) -> np.ndarray:
    if dtype.kind in "fc":
        return rng.standard_normal(count).astype(dtype)
    return np.ones(count, dtype)


@functools.lru_cache(maxsize=1024)
def _seconds(spec: Spec, count: int) -> float:
    rng = np.random.default_rng(0)
    operands = [_array(layout, rng) for layout in spec[0]]
    out = None if spec[1] is None else _array(spec[1], rng)
    if out is not None and not out.flags.writeable:  # overlapping strides: a fresh result
        out = None
    call = functools.partial(matmul, np, *operands, out=out)
    call()  # warm: operands in cache, BLAS threads awake, as in a plan's steady state
    best, spent, runs = float("inf"), 0.0, 0
    while runs < MIN_REPEATS or (spent < MIN_SECONDS and runs < MAX_REPEATS):
        start = time.perf_counter()
        call()
        took = time.perf_counter() - start
        best, spent, runs = min(best, took), spent + took, runs + 1
    return best


def alone_seconds(spec: Spec) -> float:
    """The fastest of repeated ``matmul`` calls on fresh operands of ``spec``'s layouts
    (measured at the first ask for that layout and the process's kernel thread count).

    Example:
        >>> a = np.ones((64, 32), np.float32)
        >>> alone_seconds(layouts((a, a.T))) > 0
        True
    """
    return _seconds(spec, threads())


def clear() -> None:
    """Forget every measured reference (``set_num_threads``, a test's other BLAS setting).

    Example:
        >>> clear()
    """
    _seconds.cache_clear()
