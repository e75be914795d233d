"""What the lockstep recurrences' tests share: the drawn sizes, the one-GEMM loops' products
computed on the split's row blocks through the kernels' own ``cblas_sgemm`` call (their bits),
the bit-for-bit comparison of both runs under one OpenBLAS lowering, and a training step of
``nn.LSTM`` / ``nn.GRU`` compiled and eager."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numba
import numpy as np
from hypothesis import strategies as st

import dualflow
from dualflow import nn, optim
from dualflow.background import blas_cores
from dualflow.kernels.base import cpu_threads
from dualflow.kernels.linalg import cblas, unit_parts, unit_tiles
from dualflow.kernels.linalg.tile_ir import LANES
from dualflow.kernels.linalg.unit_parts import unit_bounds
from dualflow.kernels.linalg.unit_tiles import tile_product
from tests.tracer.helpers import assert_same

BATCHES = st.one_of(
    st.integers(unit_parts.MIN_BATCH, unit_parts.MIN_BATCH + 6),
    st.sampled_from([LANES, 2 * LANES]),  # whole vectors: the LSTM's parts take the tiles
)
FORWARD_SIZES = {
    "steps": st.integers(1, 5),
    "n": BATCHES,
    "hidden": st.integers(unit_parts.MIN_HIDDEN, 70),
    "scale": st.sampled_from([0.1, 1.0, 30.0]),
    "seed": st.integers(0, 2**16),
    "blocked": st.booleans(),
}
"""The forward tests' draws: lengths, batches and layers the lockstep takes, small and large
activations, the parts' GEMMs whole or in row blocks (``force_row_blocks``)."""


def backward_sizes(gradients: int) -> dict:
    """The backward tests' draws, with which of ``gradients`` incoming gradients are present."""
    return {
        "steps": st.integers(1, 4),
        "n": BATCHES,
        "hidden": st.integers(unit_parts.MIN_HIDDEN, 60),
        "present": st.tuples(*[st.booleans()] * gradients),
        "seed": st.integers(0, 2**16),
        "blocked": st.booleans(),
    }


def drawn_gradients(seed: int, shapes: tuple, present: tuple) -> list:
    """float32 normal gradients of ``shapes``, None where ``present`` says absent."""
    rng = np.random.default_rng(seed)
    return [
        rng.standard_normal(s, dtype=np.float32) if p else None for s, p in zip(shapes, present)
    ]


def assert_same_bits(lockstep: Callable[[], tuple], reference: Callable[[], tuple]) -> None:
    """Both runs under one OpenBLAS lowering (nested uses share it: the GEMMs round by
    OpenBLAS's count, which a thread alive for a moment, another BLAS caller, would keep up for
    one of them only), then every result equal bit for bit, float32 and of the same shape."""
    with cpu_threads.blas_on_callers():
        expected = reference()
        got = lockstep()
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        assert a.dtype == np.float32 and a.shape == b.shape and np.array_equal(a, b)


@numba.njit
def _tiled(a, v, out):
    tile_product(a.shape[0], a.shape[1], a.ctypes.data, a.shape[1], v.ctypes.data, v.shape[1],
                 out.ctypes.data)  # fmt: skip


def tiled(a: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``a @ v`` by the LSTM parts' register tiles (``unit_tiles``; ``v``'s columns whole
    vectors): their bits, whatever rows a part has."""
    a, v = np.ascontiguousarray(a, np.float32), np.ascontiguousarray(v, np.float32)
    out = np.empty((a.shape[0], v.shape[1]), np.float32)
    _tiled(a, v, out)
    return out


def gemm(
    a: np.ndarray,
    b: np.ndarray,
    transposed_b: bool = False,
    block: int | None = None,
    tiles: bool = False,
):
    """``a @ b`` (or ``a @ b.T``) by the kernels' own ``cblas_sgemm`` call (numpy's matmul takes
    gemv for one column, which rounds otherwise), one call per block of ``block`` rows of ``a``
    (None: the blocks a part's GEMM takes, ``unit_parts.row_block``; 0: one call), operands
    C-ordered; ``tiles``: by the register tiles where they take the batch (the LSTM's parts)."""
    m, k = a.shape
    n = b.shape[0] if transposed_b else b.shape[1]
    if tiles and unit_tiles.width(n):
        return tiled(a, b.T if transposed_b else b)
    out = np.empty((m, n), np.float32)
    trans = cblas.TRANS if transposed_b else cblas.NO_TRANS
    if block is None:
        block = unit_parts.row_block(n, k, transposed_b)
    block = block or max(m, 1)
    for r in range(0, m, block):
        rows = np.ascontiguousarray(a[r : r + block])
        part = np.empty((len(rows), n), np.float32)
        cblas.sgemm()(cblas.ROW_MAJOR, cblas.NO_TRANS, trans, len(rows), n, k, 1.0,
                      rows.ctypes.data, k, b.ctypes.data, b.shape[1], 0.0, part.ctypes.data,
                      n)  # fmt: skip
        out[r : r + block] = part
    return out


def force_row_blocks(patch: Any, small_mnk: int) -> None:
    """Have the parts' GEMMs cut into row blocks here, whatever OpenBLAS table runs: the running
    table counts as one with small-matrix kernels, of ``small_mnk`` multiply-adds, and blocks
    may be one tile (test sizes are small)."""
    core = (blas_cores.core_name() or "none").lower()
    patch.setattr(unit_parts, "SMALL_CORES", frozenset({core}))
    patch.setattr(unit_parts, "SMALL_MNK", small_mnk)
    patch.setattr(unit_parts, "MIN_BLOCK", unit_parts.TILE)


def by_parts(
    w_parts: np.ndarray, operand: np.ndarray, bounds: np.ndarray, gates: int, tiles: bool = False
) -> np.ndarray:
    """The product of each part's rows of ``w_parts`` (``gate_rows_by_part``) with ``operand``,
    back in gate order: (gates * H, N); ``tiles`` as ``gemm``'s."""
    hidden, n = w_parts.shape[0] // gates, operand.shape[1]
    out = np.empty((gates, hidden, n), np.float32)
    for a, b in itertools.pairwise(bounds):
        product = gemm(w_parts[gates * a : gates * b], operand, tiles=tiles)
        out[:, a:b] = product.reshape(gates, b - a, n)
    return out.reshape(gates * hidden, n)


def partitioned_carry(
    xp, wt: np.ndarray, dg: np.ndarray, out: np.ndarray, tiles: bool = False
) -> None:
    """``recurrence.carry`` computed on the split's row blocks of ``W^T``; ``tiles`` as
    ``gemm``'s."""
    for a, b in itertools.pairwise(unit_bounds(wt.shape[0])):
        out[a:b] = gemm(np.ascontiguousarray(wt[a:b]), dg, transposed_b=True, tiles=tiles)


def assert_train_steps_agree(
    module: Any, layer: str, monkeypatch: Any, blocked: bool, batch: int = 8
) -> None:
    """Three steps of a 2-layer ``nn.<layer>`` (8 -> 40 units, ``batch``, Adam) eager, then
    compiled from the same start: ``module.run`` (a lockstep module's runner) ran for each
    layer's forward and backward at every eager step, and the losses and parameters agree bit
    for bit. ``blocked``: the parts' GEMMs in row blocks (``force_row_blocks``)."""
    if blocked:  # 8 x 40 units, the first part 32 of them: blocks of 16 rows and more
        gates = {"LSTM": 4, "GRU": 3}[layer]
        force_row_blocks(monkeypatch, unit_parts.TILE * batch * gates * 40 + 1)
        forward, carry = (
            unit_parts.row_block(batch, 40, False),
            unit_parts.row_block(batch, gates * 40, True),
        )
        assert 0 < forward < gates * 32 and 0 < carry < 32
    calls: list[int] = []
    run = module.run
    monkeypatch.setattr(module, "run", lambda *a: calls.append(1) or run(*a))

    def train(compiled: bool) -> list:
        dualflow.random.seed(0)
        model = getattr(nn, layer)(8, 40, 2, batch_first=True)
        opt = optim.Adam(model.parameters(), lr=1e-2)
        x = np.random.default_rng(1).normal(size=(batch, 5, 8)).astype(np.float32)
        x = dualflow.tensor(x)

        def step() -> Any:
            opt.zero_grad()
            out, _ = model(x)
            loss = (out * out).mean()
            loss.backward()
            opt.step()
            return loss

        fn = dualflow.compile(step) if compiled else step
        losses = [fn().numpy().copy() for _ in range(3)]
        return losses + [p.numpy().copy() for p in model.parameters()]

    eager = train(False)
    assert len(calls) == 3 * 4  # each layer's forward and backward, each step
    assert_same(train(True), eager)
