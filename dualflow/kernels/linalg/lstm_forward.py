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

from typing import Any

import numpy as np

from dualflow.kernels.base.cpu_threads import blas_spinning
from dualflow.kernels.linalg import lstm_lockstep, unit_parts
from dualflow.kernels.linalg.cells import cell_kernel
from dualflow.kernels.linalg.lstm_lockstep import lstm_cell_part


def _cell(xw, product, h_fm, c_prev, gates, h_out, c_out):
    # one step of the one-GEMM loop: lstm_lockstep's cell over every unit (the product's rows
    # are already in gate order)
    lstm_cell_part(xw, product, 0, h_out.shape[1], c_prev, gates, h_out, c_out, h_fm)


def one_gemm_cell() -> Any:
    """The one-GEMM loop's cell kernel (``_cell``), its stem naming the cell it inlines.

    Example:
        >>> one_gemm_cell() is one_gemm_cell()
        True
    """
    return cell_kernel(_cell, "lstm_cell", lstm_lockstep.CELL)


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
    if unit_parts.fits(np, np.float32, hidden, n):  # half the units on each thread
        return lstm_lockstep.lstm_forward_lockstep(xw, h0, c0, w_hh)
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
    cell = one_gemm_cell() if n * hidden else None
    with blas_spinning():  # a GEMM every ~15 us: OpenBLAS's threads stay awake between
        for t in range(steps):
            np.matmul(w_hh, h, out=product)
            h = h_fm
            if cell is not None:
                cell(xw[t], product, h_fm, c_prev, gates[t], hs[t], cs[t])
                c_prev = cs[t]
    return hs, cs, gates
