"""Adam's update of one parameter in one numba pass: the new parameter and both new moments from
the parameter, its gradient and the old moments (``ops.adam_update``'s host kernel).

Written with ops, the update is three elementwise kernels in a plan (the first moment, the
second, the parameter reading both new moments) and about fourteen numpy calls eagerly, each
reading and writing whole arrays. Here each element's four inputs are read once and its three
results written once, into the parameter's and the moments' own arrays where a plan donates them
(each element is read before it is written, so a result may overwrite its own input).

Every operation is the composite's, in its order, rounded in the parameter's dtype (no fused
multiply-add, no reassociation): ``m' = m + c1 * (g - m)``, ``v' = v * b2 + (c2 * g) * g``,
``p' = p d - (s * m') / (sqrt(v') / r + eps)`` (``d``: AdamW's decoupled decay, 1 for Adam:
``p * 1`` is ``p``). Elements are split over the native crew in ranges (``crew_ranges``, where
a split pays: ``native_split.splits``); each element is one range's alone, so the bits never
depend on the split.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numba
import numpy as np

from dualflow.kernels.base import crew_ranges, numba_cache
from dualflow.kernels.base.crew_ranges import HI, LO
from dualflow.kernels.base.machine_constants import machine_constants
from dualflow.kernels.base.native_calls import as_voidptr
from dualflow.kernels.numba import native_split
from dualflow.kernels.numba.numba_elementwise import _model_module as _model

DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
MOVED = 3.5
"""Copies' worth of memory traffic an element costs (four reads and three writes, a copy's
two): the split threshold's work (``part_min_for``)."""
_DIGEST = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
_KERNELS: dict[np.dtype, Any] = {}
_ENTRIES: dict[np.dtype, Any] = {}
SIZE, ARRAYS = 2, 3
"""A crew block's words after ``LO``/``HI``: the element count, then the addresses of p, g, m, v,
the three results and the seven scalars."""


def covers(p: Any, g: Any, m: Any, v: Any) -> bool:
    """Whether the kernel takes these arrays: numpy arrays of one shape, all float32 or all
    float64, each C-ordered.

    Example:
        >>> a = np.zeros((2, 3), np.float32)
        >>> covers(a, a, a, a), covers(a, a.T.copy().T, a, a), covers(a, a.astype(np.float16), a, a)
        (True, False, False)
    """
    arrays = (p, g, m, v)
    if not all(type(a) is np.ndarray for a in arrays) or p.dtype not in DTYPES:
        return False
    return all(a.dtype == p.dtype and a.shape == p.shape and a.flags.c_contiguous for a in arrays)


BLOCK = 512
"""Elements computed into a scratch block before they are written out: the results' own arrays
may be the inputs, and a loop writing where it reads may alias, so LLVM would keep it scalar
(a square root and a division an element, ~2.6 ns); the block's loops vectorize."""


def _step(p, g, m, v, p_out, m_out, v_out, scalars, lo, hi):  # pragma: no cover - compiled
    # elements lo..hi; scalars: (decay, c1, b2, c2, step size, bias correction's root, eps)
    decay, c1, b2, c2, step = scalars[0], scalars[1], scalars[2], scalars[3], scalars[4]
    root, eps = scalars[5], scalars[6]
    block = np.empty((3, BLOCK), p.dtype)
    new_p, new_m, new_v = block[0], block[1], block[2]
    for start in range(lo, hi, BLOCK):
        end = min(start + BLOCK, hi)
        # views indexed from 0: numba then needs no negative-index check, which keeps LLVM
        # from vectorizing
        ps, gs, ms, vs = p[start:end], g[start:end], m[start:end], v[start:end]
        for j in range(end - start):  # reads the inputs, writes the scratch block only
            gj, mj = gs[j], ms[j]
            m1 = mj + c1 * (gj - mj)
            v1 = vs[j] * b2 + (c2 * gj) * gj
            new_p[j] = ps[j] * decay - (step * m1) / (np.sqrt(v1) / root + eps)
            new_m[j] = m1
            new_v[j] = v1
        p_out[start:end] = new_p[: end - start]
        m_out[start:end] = new_m[: end - start]
        v_out[start:end] = new_v[: end - start]


def _kernel(dtype: np.dtype) -> Any:
    def build() -> tuple[Any, str]:
        kernel = numba.njit(nogil=True, cache=False, error_model="numpy")(_step)
        return kernel, f"k_adam{dtype.name}x{_DIGEST}"

    return numba_cache.built_once(_KERNELS, dtype, build)


def _entry(dtype: np.dtype) -> int:
    """The address of the crew's entry point for ``dtype``: ``_step`` over the share
    ``[block[LO], block[HI])`` of the arrays whose addresses follow (``crew_ranges``)."""

    # built first: ``built_once``'s lock is not reentrant, so no build may build another
    step, scalar = _kernel(dtype), dtype.type

    def build() -> tuple[Any, str]:

        def entry(block):  # pragma: no cover - runs compiled, on a crew's worker
            n, at = block[SIZE], ARRAYS
            p = numba.carray(as_voidptr(block[at]), (n,), scalar)
            g = numba.carray(as_voidptr(block[at + 1]), (n,), scalar)
            m = numba.carray(as_voidptr(block[at + 2]), (n,), scalar)
            v = numba.carray(as_voidptr(block[at + 3]), (n,), scalar)
            p_out = numba.carray(as_voidptr(block[at + 4]), (n,), scalar)
            m_out = numba.carray(as_voidptr(block[at + 5]), (n,), scalar)
            v_out = numba.carray(as_voidptr(block[at + 6]), (n,), scalar)
            scalars = numba.carray(as_voidptr(block[at + 7]), (7,), scalar)
            step(p, g, m, v, p_out, m_out, v_out, scalars, block[LO], block[HI])

        kernel = numba.njit(nogil=True, cache=False, error_model="numpy")(entry)
        return kernel, f"k_adamentry{dtype.name}x{_DIGEST}"

    return crew_ranges.entry_at(numba_cache.built_once(_ENTRIES, dtype, build))


def _run(flat: list, targets: list, values: np.ndarray) -> None:
    # the kernel over every element: split over the native crew where it pays, else one call
    n = flat[0].size
    # the flat kernels' split model (a float32 negation alone and split over the same crew),
    # its cost per element scaled by MOVED
    crew = native_split.splits(n, MOVED, machine_constants().part_min_for(MOVED), _model)
    if crew is not None:
        addresses = [a.ctypes.data for a in (*flat, *targets, values)]
        if crew_ranges.run(crew, _entry(values.dtype), np.array([0, n, n, *addresses], np.int64)):
            return
    _kernel(values.dtype)(*flat, *targets, values, 0, n)


def update(p: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray, scalars: tuple,
           outs: tuple = (None, None, None)) -> tuple:  # fmt: skip
    """``(p', m', v')`` of one Adam step (``covers`` these arrays), written into ``outs`` where
    given (C-ordered arrays of p's shape and dtype; each may be its own input), else new.
    ``scalars``: ``(decay, 1 - b1, b2, 1 - b2, step size, sqrt(1 - b2**t), eps)``, each rounded
    to p's dtype here.

    Example:
        >>> one = np.ones(1, np.float32)
        >>> p, m, v = update(one, one * 2, one * 0, one * 0, (1.0, 0.5, 0.5, 0.5, 0.1, 1.0, 0.0))
        >>> p.tolist(), m.tolist(), v.tolist()  # m = 1, v = 2, p = 1 - 0.1 * 1 / sqrt(2)
        ([0.9292893409729004], [1.0], [2.0])
    """
    flat = [a.reshape(-1) for a in (p, g, m, v)]
    results = tuple(np.empty_like(p) if o is None else o for o in outs)
    values = np.array([float(s) for s in scalars], np.float64).astype(p.dtype)
    _run(flat, [r.reshape(-1) for r in results], values)
    return results


def warm() -> None:
    """Compile (so store) the kernel and the crew's entry point for both dtypes.

    Example:
        >>> warm(); sorted(d.name for d in _ENTRIES)
        ['float32', 'float64']
    """
    for dtype in DTYPES:
        a = np.zeros(2, dtype)
        update(a, a, a.copy(), a.copy(), (1.0, 0.1, 0.9, 0.1, 0.1, 1.0, 1e-8))
        _entry(dtype)
    crew_ranges.warm()
