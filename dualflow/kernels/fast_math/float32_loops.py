"""A scalar float32 numba function made the float32 loop of a numpy ufunc (fast_tanh, fast_exp).

The compiled loops over contiguous arrays (machine code cached signed), and the call with the
ufunc's meaning: its result dtype, ``out=`` (casting, broadcasting), memory layout (order K),
aliasing, and the kernel threads for big arrays, from the size where a fused kernel of the same
work would split (``part_min``). Dtypes whose numpy loop is not float32 run the ufunc itself.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from dualflow.kernels.base import numba_cache
from dualflow.kernels.base.cpu_threads import parts_for, run_parts, split
from dualflow.kernels.base.machine_constants import machine_constants
from dualflow.kernels.fast_math.work_weights import work_weights

# numpy's float32 loop of a unary float ufunc also takes int16 and uint16 (bool, int8, uint8:
# its float16 loop; wider ints: float64)
FLOAT32_LOOP = frozenset(np.dtype(d) for d in ("float32", "int16", "uint16"))
# Elements per thread below which one thread runs the whole call: None takes the machine's for
# the loop's work (``part_min``; was a fixed 2^18, one machine's); an int here (tests) overrides it
MIN_PART: int | None = None


class Loops(NamedTuple):
    """A scalar function's compiled loops and the elements per part from which a call of them
    is split over the threads (the machine's, ``part_min``)."""

    loop: Any
    inplace: Any
    part_min: int


def part_min(work: tuple[str, ...]) -> int:
    """Elements per part from which a loop calling the scalar functions named ``work`` (the
    scalar table's names, ``work_weights``) is split: as a fused kernel of those steps would be,
    ``part_min_for`` their weights summed (``kernel_work.work_ratio``'s rule).

    Example:
        >>> part_min(("tanh",)) == machine_constants().part_min_for(work_weights().tanh)
        True
    """
    weights = work_weights()
    return machine_constants().part_min_for(sum(weights.of(name) for name in work))


def lazy_loops(scalar: Any, stem: str, work: tuple[str, ...]) -> Callable[[], Loops]:
    """``get()`` returning ``loops(scalar, stem)`` and the part size of ``work`` (the functions
    ``scalar`` calls, ``part_min``), compiled (or loaded) and resolved at the first call and then
    read from a list (``loops``' cache hashed its arguments at every call, ~0.3 us).

    Example:
        >>> get = lazy_loops(None, "k_doc", ("tanh",))  # nothing compiled until get() is called
        >>> callable(get)
        True
    """
    built: list[Loops] = []

    def get() -> Loops:
        if not built:
            built.append(Loops(*loops(scalar, stem), part_min(work)))
        return built[0]

    return get


@functools.cache
def loops(scalar: Any, stem: str) -> tuple[Any, Any]:
    """``(loop(x, out), inplace(out))`` over 1-D contiguous float32 arrays calling the inlined
    ``scalar`` per element, compiled on first use, machine code cached signed as ``stem``."""

    def loop(x: Any, out: Any) -> bool:
        # exactly one array: in place; overlapping otherwise: nothing done, False (the caller
        # copies first) -- the pointer test costs nothing here, ~1 us a call in Python
        n, a, b = out.shape[0], x.ctypes.data, out.ctypes.data
        if a == b:
            for i in range(n):
                out[i] = scalar(out[i])
            return True
        if a < b + 4 * n and b < a + 4 * n:
            return False
        for i in range(n):
            out[i] = scalar(x[i])
        return True

    def inplace(out: Any) -> None:  # one pointer: LLVM vectorizes without an alias check
        for i in range(out.shape[0]):
            out[i] = scalar(out[i])

    compiled = []
    for fn, signature in ((loop, "b1(f4[::1], f4[::1])"), (inplace, "void(f4[::1])")):
        kernel = numba_cache.cached_njit(fn, f"{stem}_{fn.__name__}")
        kernel.compile(signature)
        kernel.disable_compile()
        compiled.append(kernel)
    return compiled[0], compiled[1]


def apply(ufunc: Callable, compiled: Callable[[], Loops], x: Any, out: Any = None) -> Any:
    """``ufunc(x, out=out)`` whose float32 loop is ``compiled()``'s (on both cores for big
    arrays); other dtypes run ``ufunc`` itself.

    Example:
        >>> apply(np.negative, lambda: None, np.array([1.0, 2.0])).tolist()  # not float32
        [-1.0, -2.0]
    """
    if out is None and type(x) is np.ndarray and x.dtype == np.float32 and x.flags.c_contiguous:
        return fresh(compiled, x)  # the common case, kept short
    if out is not None and _same_c_float32(x, out):  # a plan's planned buffer (~1-3 us less)
        kernels, flat_out = compiled(), out.ravel()
        if flat_out.size < 2 * (MIN_PART or kernels.part_min):
            if kernels.loop(x.ravel(), flat_out):  # False: overlapping arrays, nothing written
                return out
        elif not np.may_share_memory(x, out) or _address(x) == _address(out):
            _run(kernels, x.ravel(), flat_out)
            return out
    array = np.asarray(x)
    if array.dtype not in FLOAT32_LOOP:
        return ufunc(x) if out is None else ufunc(x, out=out)
    if out is None:
        result = np.empty_like(array, dtype=np.float32)  # numpy's layout for it (order K)
        _into(compiled(), array, result)
        return result if result.ndim else result[()]
    if not (isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == array.shape):
        np.copyto(out, apply(ufunc, compiled, array), casting="same_kind")  # numpy's out= rule
        return out
    _into(compiled(), array, out)
    return out


def fresh(compiled: Callable[[], Loops], x: np.ndarray) -> Any:
    """``compiled()``'s loop over a C-ordered float32 array into a new one (a scalar for a 0-d
    ``x``, as numpy's ufuncs return). A small array calls the loop itself: the numba call is
    ~0.3 us, and each Python step around it (``_run``, ``ravel``) ~0.1.

    Example:
        >>> from dualflow.kernels.fast_math.fast_tanh import _kernels
        >>> fresh(_kernels, np.array([0.0, 30.0], np.float32)).tolist()
        [0.0, 1.0]
    """
    result, kernels = np.empty(x.shape, np.float32), compiled()
    if x.size < 2 * (MIN_PART or kernels.part_min):  # one part (``parts_for``); no overlap
        kernels.loop(x.ravel(), result.ravel())  # views of C-ordered arrays (~60 ns less)
    else:
        _run(kernels, x.ravel(), result.ravel())
    return result if result.ndim else result[()]  # a 0-d operand: a scalar, as numpy


def _same_c_float32(x: Any, out: Any) -> bool:
    """Both C-ordered float32 numpy arrays of one shape."""
    return (
        type(x) is np.ndarray
        and type(out) is np.ndarray
        and x.dtype == np.float32
        and out.dtype == np.float32
        and x.shape == out.shape
        and x.flags.c_contiguous
        and out.flags.c_contiguous
    )


def _flat(a: np.ndarray) -> bool:
    return a.flags.c_contiguous or a.flags.f_contiguous


def _into(kernels: Loops, x: np.ndarray, out: np.ndarray) -> None:
    """``out[...] = f(x)``: a float32 array of x's shape; both walked in memory order."""
    target = out if _flat(out) else np.empty(out.shape, np.float32)
    same = x.dtype == np.float32 and _flat(x) and x.strides == target.strides
    overlap = np.may_share_memory(x, target)  # bounds only: cheap, exact test only then
    alias = same and overlap and _address(x) == _address(target)
    if not same or (overlap and not alias):
        source = np.empty_like(target)
        np.copyto(source, x, casting="unsafe")  # int16/uint16 -> float32 is exact
        x, alias = source, False
    flat_out = target.ravel(order="K")
    _run(kernels, flat_out if alias else x.ravel(order="K"), flat_out)
    if target is not out:
        np.copyto(out, target)


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _run(kernels: Loops, flat_in: np.ndarray, flat_out: np.ndarray) -> None:
    """The loop over 1-D arrays (the in-place one when they are one array), split in parts on
    both cores when big; each part writes only its own range."""
    loop, inplace, part = kernels
    parts = parts_for(flat_out.size, MIN_PART or part)
    alias = flat_in is flat_out
    if parts == 1:  # small: no hand-off (a call costs ~1 us, like numpy's)
        inplace(flat_out) if alias else loop(flat_in, flat_out)
        return
    bounds = split(flat_out.size, parts)
    if alias:
        run_parts([functools.partial(inplace, flat_out[a:b]) for a, b in bounds])
    else:
        run_parts([functools.partial(loop, flat_in[a:b], flat_out[a:b]) for a, b in bounds])
