"""Compile the fixed CPU kernels ahead of time, so a model's first compiled call does not.

``warm`` runs every fixed numba kernel route once (convolutions: Winograd, channels-first and
im2col columns, the layout copies; pooling: the generic and the common fixed-geometry kernels;
relu's eager kernels; float32 tanh/exp/sigmoid loops; the LSTM and GRU forward cells and
backward recurrences' steps, the embedding gradient's scatter; softmax cross entropy's loss and
gradient; the native crew's part of a batch of small products; summed slice gradients'
pieces) on small arrays, which puts their
machine code in the signed kernels store. ``dualflow cache warm`` and the Makefile's install step
run it. Generated fused kernels depend on the model and still compile at its first call.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np

from dualflow import ops
from dualflow.kernels.fused_cpu import slice_pieces
from dualflow.kernels.linalg import batched_native, thin_gemm, unit_tiles
from dualflow.kernels.numba import compile_worker
from dualflow.kernels.optim import adam as adam_kernels
from dualflow.tensor.core import Tensor

DTYPES = ("float32", "float64")
# (name, images, channels in, channels out, side, kernel, stride, pad): each picks one route
CONVOLUTIONS = (
    ("winograd", 4, 16, 16, 16, 3, 1, 1),  # 3x3 stride 1, >= 16 channels, >= 64 4x4 tiles
    ("channels-first columns", 2, 3, 8, 16, 3, 1, 1),  # few input channels (a network's stem)
    ("im2col columns", 2, 16, 16, 16, 3, 2, 1),  # strided: columns, layout copies, col2im
    ("pointwise", 2, 16, 16, 8, 1, 2, 0),  # 1x1: batched GEMMs
    ("weight rows", 1, 32, 256, 4, 3, 1, 1),  # 64K+ filter values on few pixels: rows GEMMs
)
# max/avg pooling geometries (window, stride, pad) compiled with constants for large images
# (``pool_kernels.FIXED_MIN``), on one such image and one small image (the generic kernels)
POOLS = ((2, 2, 0), (3, 2, 1))


def _leaf(shape: tuple[int, ...], dtype: str) -> Tensor:
    array = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    return Tensor(array, requires_grad=True)


def _backward(y: Tensor) -> None:
    """Backpropagate a C-ordered gradient, as a loss does (``sum()``'s would be a broadcast view,
    another numba signature than a training step's)."""
    y.backward(Tensor(np.random.default_rng(1).standard_normal(y.shape).astype(y.dtype)))


def _convolution(dtype: str, n: int, c: int, o: int, side: int, k: int, s: int, p: int) -> None:
    """A convolution's forward, input gradient and weight gradient, as a training step runs."""
    x, w = _leaf((n, c, side, side), dtype), _leaf((o, c, k, k), dtype)
    _backward(ops.conv2d(x, w, stride=s, pad=p))


def _pooling(dtype: str, side: int, window: int, stride: int, pad: int) -> None:
    """Max and average pooling forward and backward, and the max's double-backward gather."""
    x = _leaf((1, 64, side, side), dtype)
    _backward(ops.max_pool2d(x, window, stride, pad))
    _backward(ops.avg_pool2d(x, window, stride, pad))
    ops.max_pool2d_gather(x.array, x.array, window, stride, pad)


def _sequence_kernels(dtype: str) -> None:
    """The LSTM and GRU forwards' cell steps (``lstm_scan``, ``gru_scan``; float32: the one-GEMM
    and lockstep loops, the latter's rows form too), their backward recurrences' step kernels
    (``lstm_scan_grad``, ``gru_scan_grad``; the LSTM's with gradients reaching h only, an LM's
    layer, and h and c, a layer whose last c is used: numba types one kernel per set of
    gradients present) and the embedding gradient's row scatter (int64 ids, a language model's
    inputs)."""
    _backward(ops.embedding(np.array([[1, 0, 1]]), _leaf((3, 4), dtype)))
    # one GEMM a step; the float32 lockstep halves (32 units and more, a batch of 8 or more);
    # their rows form (a batch of whole vectors, parts of whole pairs of vectors: an LM's)
    rows = (unit_tiles.LANES, 4 * unit_tiles.LANES)
    for batch, hidden in ((2, 2), (8, 32), rows):
        h0 = _leaf((batch, hidden), dtype)
        for used in (1, 2):  # hs; hs and cs
            xw, w = _leaf((3, batch, 4 * hidden), dtype), _leaf((4 * hidden, hidden), dtype)
            outs = ops.lstm_scan(xw, h0, h0, w)
            _backward(outs[0] if used == 1 else outs[0] + outs[1])
    for batch, hidden in ((2, 2), rows):
        h0, three = _leaf((batch, hidden), dtype), 3 * hidden
        xw, w, b = (
            _leaf((3, batch, three), dtype),
            _leaf((three, hidden), dtype),
            _leaf((three,), dtype),
        )
        _backward(ops.gru_scan(xw, h0, w, b)[0])


def _cross_entropy(dtype: str) -> None:
    """Softmax cross entropy's loss, gradient and merged kernels (``kernels.loss``): one
    signature per dtype (rows, int64 labels) whatever the shape."""
    labels = np.array([0, 4, -1, 2])
    ops.softmax_cross_entropy(_leaf((4, 5), dtype), labels).backward()
    ops.softmax_cross_entropy_and_grad(_leaf((4, 5), dtype), labels, np.ones((), dtype))


def _batch_norm(dtype: str) -> None:
    """Training batch norm's forward kernel (``kernels.norm``): one signature per dtype for
    every (N, C, ...) shape."""
    gamma, beta = _leaf((3,), dtype), _leaf((3,), dtype)
    _backward(ops.batch_norm(_leaf((2, 3, 4, 4), dtype), gamma, beta))


def _layer_norm(dtype: str) -> None:
    """Layer norm's forward and backward kernels (``kernels.norm``): one signature each per
    dtype for every shape (rows of the trailing axes)."""
    gamma, beta = _leaf((8,), dtype), _leaf((8,), dtype)
    _backward(ops.layer_norm(_leaf((3, 4, 8), dtype), gamma, beta))


def routes() -> list[tuple[str, Callable[[], None]]]:
    """(name, run) of every route ``warm`` compiles, for each dtype.

    Example:
        >>> names = [name for name, _ in routes()]
        >>> "winograd float32" in names, "max/avg pooling 2x2/2 32x32 float64" in names
        (True, True)
    """
    found: list[tuple[str, Callable[[], None]]] = []
    for dtype in DTYPES:
        for name, *shape in CONVOLUTIONS:
            found.append((f"{name} {dtype}", lambda d=dtype, s=shape: _convolution(d, *s)))
        for (window, stride, pad), side in itertools.product(POOLS, (32, 8)):
            # 32x32: kernels with the window as constants; 8x8: the generic ones
            label = f"max/avg pooling {window}x{window}/{stride} {side}x{side} {dtype}"
            geometry = (side, window, stride, pad)
            found.append((label, lambda d=dtype, g=geometry: _pooling(d, *g)))
        # relu and relu_grad from ``fused_elementwise.SELECT_MIN`` elements: the eager kernels (one
        # flat signature for every shape), which compiled plans run unfused too
        found.append((f"relu {dtype}", lambda d=dtype: _backward(ops.relu(_leaf((16, 4096), d)))))
        found.append((f"softmax cross entropy {dtype}", lambda d=dtype: _cross_entropy(d)))
        found.append((f"batch norm {dtype}", lambda d=dtype: _batch_norm(d)))
        found.append((f"layer norm {dtype}", lambda d=dtype: _layer_norm(d)))
        found.append(
            (
                f"lstm/gru recurrences, embedding gradient {dtype}",
                lambda d=dtype: _sequence_kernels(d),
            )
        )
    found.append(("batched small float32 products on the native crew", batched_native.warm))
    found.append(("summed slice gradients' pieces", slice_pieces.warm))
    found.append(("adam's update, alone and on the native crew", adam_kernels.warm))
    found.append(("few-row float32 products on register tiles", thin_gemm.warm))
    unary = (ops.tanh, ops.exp, ops.sigmoid)
    found.append(("float32 tanh/exp", lambda: [f(_leaf((4096,), "float32")) for f in unary]))
    return found


def warm(report: Callable[[str], None] | None = None) -> list[str]:
    """Run every route of ``routes`` (calling ``report`` with each name first); the names run.

    Example:
        >>> "float32 tanh/exp" in warm()
        True
    """
    done = []
    with compile_worker.synchronous():  # filling the store is this process's job
        for name, run in routes():
            if report is not None:
                report(name)
            run()
            done.append(name)
    return done
