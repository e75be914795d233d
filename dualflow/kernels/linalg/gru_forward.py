"""The GRU forward recurrence on host float32 arrays: one BLAS GEMM and one numba cell step per
time step, reading and writing the op's own (L, N, F) layouts (``ops.gru_scan``'s forward).

The same change as ``lstm_forward``: the numpy cell (~8 calls a step on (3H, N) arrays) and the
sequences' transposes to and from the feature-major layout become one kernel call a step. Its
arithmetic is the ops' (``sigmoid`` is ``0.5 * tanh(0.5 * x) + 0.5`` with ``tanh_f32``, each
operation rounded to float32 in the numpy cell's order), so its bits are the numpy cell's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.kernels.base.cpu_threads import blas_spinning
from dualflow.kernels.linalg import gru_lockstep, unit_parts
from dualflow.kernels.linalg.cells import cell_kernel
from dualflow.kernels.linalg.gru_lockstep import gru_cell_part


def _cell(xw, product, bias, h_fm, h_prev, gates, h_out, hn_out):
    # one step of the one-GEMM loop: gru_lockstep's cell over every unit (the product's rows
    # and the bias are already in gate order)
    gru_cell_part(xw, product, bias, 0, h_out.shape[1], h_prev, gates, h_out, hn_out, h_fm)


def one_gemm_cell() -> Any:
    """The one-GEMM loop's cell kernel (``_cell``), its stem naming the cell it inlines.

    Example:
        >>> one_gemm_cell() is one_gemm_cell()
        True
    """
    return cell_kernel(_cell, "gru_cell", gru_lockstep.CELL)


def gru_forward(xw: Any, h0: Any, w_hh: Any, b_hh: Any) -> tuple[Any, Any, Any]:
    """Every step's h (L, N, H), gates (L, N, 3H) [r, z, n] and ``W_hn h + b_hn`` (L, N, H) of
    one GRU layer, from the input projections ``xw`` (L, N, 3H), ``h0`` (N, H), ``w_hh`` (3H, H)
    and ``b_hh`` (3H,), numpy float32 (``lstm_forward.fits``).

    Example:
        >>> f32 = np.float32
        >>> hs, gates, hn = gru_forward(np.zeros((2, 1, 3), f32), np.ones((1, 1), f32),
        ...                             np.zeros((3, 1), f32), np.zeros(3, f32))
        >>> hs[:, 0, 0].tolist(), gates[0, 0].tolist()
        ([0.5, 0.25], [0.5, 0.5, 0.0])
    """
    steps, n, three_h = xw.shape
    hidden = three_h // 3
    if unit_parts.fits(np, np.float32, hidden, n):  # half the units on each thread
        return gru_lockstep.gru_forward_lockstep(xw, h0, w_hh, b_hh)
    xw = np.ascontiguousarray(xw, dtype=np.float32)
    w_hh = w_hh.astype(np.float32, copy=False)  # as it is: another layout, other GEMM bits
    bias = np.ascontiguousarray(b_hh, dtype=np.float32)
    hs, hn = np.empty((steps, n, hidden), np.float32), np.empty((steps, n, hidden), np.float32)
    gates = np.empty((steps, n, three_h), np.float32)
    product, h_fm = np.empty((three_h, n), np.float32), np.empty((hidden, n), np.float32)
    h = h0.T.astype(np.float32, copy=False)  # the first GEMM reads it transposed (its bits)
    h_prev = np.ascontiguousarray(h0, np.float32)
    cell = one_gemm_cell() if n * hidden else None
    with blas_spinning():  # a GEMM every few microseconds, as in ``lstm_forward``
        for t in range(steps):
            np.matmul(w_hh, h, out=product)
            h = h_fm
            if cell is not None:
                cell(xw[t], product, bias, h_fm, h_prev, gates[t], hs[t], hn[t])
                h_prev = hs[t]
    return hs, gates, hn
