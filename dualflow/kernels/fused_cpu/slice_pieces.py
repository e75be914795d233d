"""``sum_slice_grads``' CPU kernel: each piece plus 0.0 written at its place, strided on both
sides, in one numba loop nest split over the kernel threads.

numpy's ``add(piece, 0.0, out=place)`` on attention's pieces (a (N*heads, L, hd) gradient viewed
as (L, N, heads, hd), into a slice of the (L, N, 3E) result) calls its inner loop once per hd-long
run: 0.55-0.6 ms for three 64 x 64 x 64 float32 pieces with warm caches, 0.36 ms here on one
thread. Cold (as in a training step, the pieces just written by a batched product) it is
bandwidth-bound, so the rows are split over ``cpu_threads``: each part writes its own rows of
the places, so the result never depends on the split. The addition is the same IEEE addition of
+0.0 in the pieces' dtype.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numba
import numpy as np

from dualflow.kernels.base import numba_cache
from dualflow.kernels.base.cpu_threads import parts_for, run_parts, split
from dualflow.kernels.base.machine_constants import machine_constants

RANK = 4  # views get axes of 1 after their first up to this rank; deeper ones go to numpy
DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_KERNELS: dict[np.dtype, Any] = {}
_DIGEST = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def _add_zero(place, piece, lo, hi):  # pragma: no cover - runs compiled
    # rows lo..hi of axis 0: place = piece + 0.0 (-0.0 becomes +0.0; every other value stays)
    zero = piece.dtype.type(0.0)
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
