"""``sum_slice_grads``' CPU kernel: each piece plus 0.0 written at its place, strided on both
sides, in one numba loop nest split over the kernel threads.

numpy's ``add(piece, 0.0, out=place)`` on attention's pieces (a (N*heads, L, hd) gradient viewed
as (L, N, heads, hd), into a slice of the (L, N, 3E) result) calls its inner loop once per
hd-long run: 0.55-0.6 ms for three 64 x 64 x 64 float32 pieces with warm caches. A loop nest
indexing the 4-D views by their strides compiles to scalar code (0.8 ms for the three on two
threads, 1.3 ms in a transformer step). So the views' common layouts get loops over contiguous
``numba.carray`` views of the same addresses, which LLVM vectorizes: runs along the last axis
where both sides are unit-stride there (a third of the time), and 16 x 16 blocks where the
piece is unit-stride on the first axis instead (the key's gradient, written transposed: half
the time); any other layout keeps the strided nest. Cold (as in a training step, the pieces
just written by a batched product) it is bandwidth-bound, so the rows are split over
``cpu_threads``: each part writes its own rows of the places, so the result never depends on
the split. The addition is the same IEEE addition of +0.0 in the pieces' dtype on every path.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numba
import numpy as np

from dualflow.kernels.base import native_calls, numba_cache
from dualflow.kernels.base.cpu_threads import parts_for, run_parts, split
from dualflow.kernels.base.machine_constants import machine_constants
from dualflow.kernels.base.native_calls import as_voidptr

RANK = 4  # views get axes of 1 after their first up to this rank; deeper ones go to numpy
DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_KERNELS: dict[np.dtype, Any] = {}
_DIGEST = hashlib.sha256(
    Path(__file__).read_bytes() + Path(native_calls.__file__).read_bytes()  # as_voidptr inlined
).hexdigest()[:16]


BLOCK = 16  # the transposed path's square blocks: constant trip counts LLVM turns into shuffles


@numba.njit(inline="always")
def _runs(place, piece, lo, hi, zero):  # pragma: no cover - runs compiled
    # both sides unit-stride on the last axis: each run of it as a contiguous array
    sp, st = piece.strides, place.strides
    at_piece, at_place, n = piece.ctypes.data, place.ctypes.data, piece.shape[3]
    for a in range(lo, hi):
        for b in range(piece.shape[1]):
            for c in range(piece.shape[2]):
                src = numba.carray(as_voidptr(at_piece + a * sp[0] + b * sp[1] + c * sp[2]), n,
                                   piece.dtype)  # fmt: skip
                dst = numba.carray(as_voidptr(at_place + a * st[0] + b * st[1] + c * st[2]), n,
                                   piece.dtype)  # fmt: skip
                for d in range(n):
                    dst[d] = src[d] + zero


@numba.njit(inline="always")
def _transposed(place, piece, lo, hi, zero):  # pragma: no cover - runs compiled
    # the piece unit-stride on axis 0, the place on axis 3: per (b, c) a matrix read as (d, a)
    # and written as (a, d), in BLOCK x BLOCK blocks (each address is the strided one)
    sp, st, size = piece.strides, place.strides, piece.itemsize
    n = piece.shape[3]
    for b in range(piece.shape[1]):
        for c in range(piece.shape[2]):
            src = numba.carray(as_voidptr(piece.ctypes.data + b * sp[1] + c * sp[2]),
                               (n, sp[3] // size), piece.dtype)  # fmt: skip
            dst = numba.carray(as_voidptr(place.ctypes.data + b * st[1] + c * st[2]),
                               (hi, st[0] // size), piece.dtype)  # fmt: skip
            for a0 in range(lo, hi, BLOCK):
                for d0 in range(0, n, BLOCK):
                    if a0 + BLOCK <= hi and d0 + BLOCK <= n:
                        for a in range(a0, a0 + BLOCK):
                            for dd in range(BLOCK):
                                dst[a, d0 + dd] = src[d0 + dd, a] + zero
                    else:
                        for a in range(a0, min(a0 + BLOCK, hi)):
                            for d in range(d0, min(d0 + BLOCK, n)):
                                dst[a, d] = src[d, a] + zero


def _add_zero(place, piece, lo, hi):  # pragma: no cover - runs compiled
    # rows lo..hi of axis 0: place = piece + 0.0 (-0.0 becomes +0.0; every other value stays)
    zero, size = piece.dtype.type(0.0), piece.itemsize
    sp, st = piece.strides, place.strides
    if sp[3] == size and st[3] == size:
        _runs(place, piece, lo, hi, zero)
    elif (
        sp[0] == size
        and st[3] == size
        and sp[3] >= 0
        and st[0] >= 0
        and not (sp[3] % size or st[0] % size)
    ):
        _transposed(place, piece, lo, hi, zero)
    else:
        for a in range(lo, hi):
            for b in range(piece.shape[1]):
                for c in range(piece.shape[2]):
                    for d in range(piece.shape[3]):
                        place[a, b, c, d] = piece[a, b, c, d] + zero


def _kernel(dtype: np.dtype) -> Any:
    def build() -> tuple[Any, str]:
        kernel = numba.njit(nogil=True, cache=False, error_model="numpy")(_add_zero)
        return kernel, f"k_slicepieces{dtype.name}x{_DIGEST}"

    return numba_cache.built_once(_KERNELS, dtype, build)


def add_zero(place: np.ndarray, piece: np.ndarray) -> bool:
    """``place[...] = piece + 0.0`` (two numpy arrays of one shape and dtype, any strides) by the
    kernel, split by rows where it moves enough elements; False (nothing written) where the
    kernel does not take them (another dtype, more than ``RANK`` axes).

    Example:
        >>> piece = np.array([[-0.0, 1.0], [2.0, -3.0]], np.float32)
        >>> place = np.empty((2, 4), np.float32)[:, ::2]
        >>> add_zero(place, piece.T), place.tolist()
        (True, [[0.0, 2.0], [1.0, -3.0]])
    """
    if piece.dtype not in DTYPES or place.dtype != piece.dtype or piece.ndim > RANK:
        return False
    if place.shape != piece.shape or piece.size == 0:
        return False
    shape = (*piece.shape[:1], *(1,) * (RANK - piece.ndim), *piece.shape[1:])
    if piece.ndim == 0:
        shape = (1,) * RANK
    place, piece = place.reshape(shape), piece.reshape(shape)  # 1s inserted: views
    kernel, rows = _kernel(piece.dtype), piece.shape[0]
    parts = min(rows, parts_for(piece.size, machine_constants().part_min_for(1.0)))
    if parts <= 1:
        kernel(place, piece, 0, rows)
    else:
        run_parts([lambda a=a, b=b: kernel(place, piece, a, b) for a, b in split(rows, parts)])
    return True


def warm() -> None:
    """Compile (so store) the kernel for both dtypes and strided 4-D views.

    Example:
        >>> warm()
    """
    for dtype in DTYPES:
        piece = np.zeros((2, 2, 2, 4), dtype)
        add_zero(np.empty((2, 2, 2, 8), dtype)[..., ::2], piece.transpose(1, 0, 2, 3))
