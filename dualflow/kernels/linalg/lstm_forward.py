"""The LSTM forward recurrence on host float32 arrays: one BLAS GEMM and one numba cell step per
time step, reading and writing the op's own (L, N, F) layouts (``ops.lstm_scan``'s forward).

Written with numpy, a step's cell is ~10 calls on (4H, N) and (H, N) arrays, and the sequence
is transposed to the feature-major layout the GEMM wants and back (~1.8 ms a layer at 16 x 64 x
256). The cell step reads the step's input projection (N, 4H) and the GEMM's product (4H, N) as
they are, adds them into the step's gates rows, activates them and updates c and h in rows (the
outputs' layout), then writes h feature-major (H, N) for the next step's GEMM. Its
arithmetic is the ops' (``sigmoid`` is ``0.5 * tanh(0.5 * x) + 0.5`` with ``tanh_f32``, each
operation rounded to float32 in the same order), so its bits are those of the numpy cell.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numba
import numpy as np

from dualflow.kernels.base.cpu_threads import blas_spinning
from dualflow.kernels.fast_math.fast_tanh import FINGERPRINT, tanh_f32
from dualflow.kernels.fast_math.scalars import fingerprint
from dualflow.kernels.linalg import tiles
from dualflow.kernels.linalg.tiles import sum_to_rows, to_fm

_KERNELS: dict[str, Any] = {}
HALF = np.float32(0.5)
"""sigmoid's constant, float32: ``0.5 * tanh(0.5 * x) + 0.5`` rounds as the ``sigmoid`` op."""


@numba.njit(inline="always")
def activate_sigmoid(a):
    """The ``sigmoid`` op's float32 bits, in place on a 1-D contiguous array (inlined by the
    cell kernels; one array, so the loop vectorizes without alias checks).

    Example:
        >>> a = np.array([0.0, 100.0], np.float32)
        >>> activate_sigmoid(a)
        >>> a.tolist()
        [0.5, 1.0]
    """
    for m in range(a.shape[0]):
        a[m] = HALF * tanh_f32(HALF * a[m]) + HALF


@numba.njit(inline="always")
def activate_tanh(a):
    """The ``tanh`` op's float32 bits (``tanh_f32``), in place on a 1-D contiguous array.

    Example:
        >>> a = np.array([0.0, -100.0], np.float32)
        >>> activate_tanh(a)
        >>> a.tolist()
        [0.0, -1.0]
    """
    for m in range(a.shape[0]):
        a[m] = tanh_f32(a[m])


def _cell(xw, product, h_fm, c_prev, gates, h_out, c_out):
    # gates (N, 4H) = xw + product^T (product (4H, N) = W_hh @ h), activated row by row
    # [σi, σf, tanh g, σo] in flat loops over contiguous blocks (they vectorize); c = σf c_prev
    # + σi tanh g and h = σo tanh(c) in rows; then h feature-major (H, N) for the next step's
    # GEMM (the GEMM that read h_fm has run)
    n, hidden = h_out.shape
    sum_to_rows(xw, product, gates)
    for r in range(n):
        g = gates[r]
        activate_sigmoid(g[: 2 * hidden])
        activate_tanh(g[2 * hidden : 3 * hidden])
        activate_sigmoid(g[3 * hidden :])
        c_from, c_to, h_to = c_prev[r], c_out[r], h_out[r]
        for j in range(hidden):
            v = g[hidden + j] * c_from[j]
            c_to[j] = v + g[j] * g[2 * hidden + j]
        for j in range(hidden):
            h_to[j] = g[3 * hidden + j] * tanh_f32(c_to[j])
    to_fm(h_out, h_fm)


def cell_kernel(cell: Any, name: str) -> Any:
    """``cell`` (a recurrent cell step inlining the activations and the tiles) compiled through
    the kernels cache, once a process; the stem names the fast tanh and every inlined helper,
    since the cache key hashes ``cell``'s own bytecode only (a change to any of them is a new
    kernel). Shared by the LSTM and GRU cells.

    Example:
        >>> cell_kernel(_cell, "lstm_cell") is cell_kernel(_cell, "lstm_cell")
        True
    """
    helpers = "".join(fingerprint(f) for f in (activate_sigmoid, activate_tanh))
    digest = hashlib.sha256(f"{helpers}{tiles.FINGERPRINT}{HALF!r}".encode()).hexdigest()[:16]
    stem = f"k_{name}_{FINGERPRINT}_{digest}"
    kernel = _KERNELS.get(stem)
    if kernel is None:
        from dualflow.kernels.base import numba_cache  # noqa: PLC0415 - numba, when first used

        kernel = _KERNELS[stem] = numba_cache.cached_njit(cell, stem)
    return kernel


def fits(xp: Any, dtype: Any) -> bool:
    """Whether ``lstm_forward`` runs these arrays (numpy float32; others take the array calls).

    Example:
        >>> fits(np, np.dtype("float32")), fits(np, np.dtype("float64"))
        (True, False)
    """
    return xp is np and np.dtype(dtype) == np.float32


def lstm_forward(xw: Any, h0: Any, c0: Any, w_hh: Any) -> tuple[Any, Any, Any]:
    """Every step's h and c (L, N, H) and activated gates (L, N, 4H) of one LSTM layer, from the
    input projections ``xw`` (L, N, 4H), ``h0``/``c0`` (N, H) and ``w_hh`` (4H, H), all numpy
    float32 (``fits``).

    Example:
        >>> f32 = np.float32
        >>> hs, cs, gates = lstm_forward(np.zeros((3, 1, 8), f32), np.zeros((1, 2), f32),
        ...                              np.ones((1, 2), f32), np.zeros((8, 2), f32))
        >>> cs[:, 0, 0].tolist(), gates[0, 0, :4].tolist()
        ([0.5, 0.25, 0.125], [0.5, 0.5, 0.5, 0.5])
    """
    steps, n, four_h = xw.shape
    hidden = four_h // 4
    xw = np.ascontiguousarray(xw, dtype=np.float32)
    w_hh = w_hh.astype(np.float32, copy=False)  # as it is: another layout, other GEMM bits
    hs, cs = np.empty((steps, n, hidden), np.float32), np.empty((steps, n, hidden), np.float32)
    gates = np.empty((steps, n, four_h), np.float32)
    # feature-major h: W_hh (4H, H) @ h (H, N) is BLAS's fast form for a few rows
    h_fm, c_prev = np.empty((hidden, n), np.float32), np.ascontiguousarray(c0, np.float32)
    product = np.empty((four_h, n), np.float32)
    # the first GEMM reads h0 transposed, as the array-call path does: BLAS sums in another
    # order for a transposed operand than for a copy, so a copy would change the bits
    h = h0.T.astype(np.float32, copy=False)
    cell = cell_kernel(_cell, "lstm_cell") if n * hidden else None
    with blas_spinning():  # a GEMM every ~15 us: OpenBLAS's threads stay awake between
        for t in range(steps):
            np.matmul(w_hh, h, out=product)
            h = h_fm
            if cell is not None:
                cell(xw[t], product, h_fm, c_prev, gates[t], hs[t], cs[t])
                c_prev = cs[t]
    return hs, cs, gates
