"""Transposes between (N, F) rows and the feature-major (F, N) layout, as numba functions that
kernels inline: the recurrences' steps (``lstm_forward``, ``recurrence``) and the convolutions'
NCHW <-> channels-last copies (``conv.winograd_loops``, ``conv.layout_copies``), one image row
at a time.

The recurrences' per-step GEMMs are fastest with many rows, ``W (F, K) @ s (K, N)``, so their
state lives feature-major while the ops' arrays are (L, N, F). Tiles of 16 features with
constant inner trip counts are what LLVM turns into vector shuffles (a plain double loop is ~2x
slower: ~10 us for 16 x 1024 float32; a convolution's copy channel by channel over a whole
image, 4-5x slower).
"""

from __future__ import annotations

import hashlib

import numba

from dualflow.kernels.fast_math.scalars import fingerprint


@numba.njit(inline="always")
def add_to_fm(rows, fm):
    """``fm (F, N) += rows (N, F)^T``.

    Example:
        >>> import numpy as np
        >>> fm = np.ones((3, 2))
        >>> add_to_fm(np.arange(6.0).reshape(2, 3), fm)
        >>> fm.tolist()
        [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]
    """
    n, features = rows.shape
    for m0 in range(0, features - 15, 16):
        for r in range(n):
            for mm in range(16):
                fm[m0 + mm, r] += rows[r, m0 + mm]
    for m in range(features - features % 16, features):
        for r in range(n):
            fm[m, r] += rows[r, m]


@numba.njit(inline="always")
def sum_to_rows(rows, fm, out):
    """``out (N, F) = rows (N, F) + fm (F, N)^T`` (each sum ``rows + fm``, rounded once).

    Example:
        >>> import numpy as np
        >>> out = np.empty((2, 3))
        >>> sum_to_rows(np.ones((2, 3)), np.arange(6.0).reshape(3, 2), out)
        >>> out.tolist()
        [[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]]
    """
    n, features = rows.shape
    for m0 in range(0, features - 15, 16):
        for r in range(n):
            for mm in range(16):
                out[r, m0 + mm] = rows[r, m0 + mm] + fm[m0 + mm, r]
    for m in range(features - features % 16, features):
        for r in range(n):
            out[r, m] = rows[r, m] + fm[m, r]


@numba.njit(inline="always")
def to_fm(rows, fm):
    """``fm (F, N) = rows (N, F)^T``.

    Example:
        >>> import numpy as np
        >>> fm = np.empty((20, 2))
        >>> to_fm(np.arange(40.0).reshape(2, 20), fm)
        >>> fm[17].tolist()
        [17.0, 37.0]
    """
    n, features = rows.shape
    for m0 in range(0, features - 15, 16):
        for r in range(n):
            for mm in range(16):
                fm[m0 + mm, r] = rows[r, m0 + mm]
    # the last features % 16 features in tiles of 16 rows (a narrow plane, a convolution's 8
    # or 4 pixels of a row, is all tail: one feature at a time over every row was 2x slower)
    tail = features - features % 16
    for r0 in range(0, n - 15, 16):
        for m in range(tail, features):
            for rr in range(16):
                fm[m, r0 + rr] = rows[r0 + rr, m]
    for m in range(tail, features):
        for r in range(n - n % 16, n):
            fm[m, r] = rows[r, m]


@numba.njit(inline="always")
def to_rows(fm, rows):
    """``rows (N, F) = fm (F, N)^T``.

    Example:
        >>> import numpy as np
        >>> rows = np.empty((2, 20))
        >>> to_rows(np.arange(40.0).reshape(20, 2), rows)
        >>> rows[1, 15:17].tolist()
        [31.0, 33.0]
    """
    n, features = rows.shape
    for m0 in range(0, features - 15, 16):
        for r in range(n):
            for mm in range(16):
                rows[r, m0 + mm] = fm[m0 + mm, r]
    tail = features - features % 16  # in tiles of 16 rows, as in to_fm
    for r0 in range(0, n - 15, 16):
        for m in range(tail, features):
            for rr in range(16):
                rows[r0 + rr, m] = fm[m, r0 + rr]
    for r in range(n - n % 16, n):
        for m in range(tail, features):
            rows[r, m] = fm[m, r]


FINGERPRINT = hashlib.sha256(
    "".join(fingerprint(f) for f in (add_to_fm, sum_to_rows, to_fm, to_rows)).encode()
).hexdigest()[:16]
"""A digest of the four functions: kernels inlining them add it to their cache stem (a kernel's
cache key hashes its own bytecode only)."""
