"""Winograd F(2x2, 3x3) convolutions on numpy arrays: 3x3 stride-1 layers in 2.25x fewer multiplies.

Every 2x2 block of outputs is computed from a 4x4 input tile as A^T [(G g G^T) . (B^T d B)] A
(Lavin & Gray 2016): the tile transforms are numba loops (``winograd_loops``), the channel sums
are 16 GEMMs over all tiles of a chunk of images. The weight gradient is this map's adjoint
(G^T [(A gy A^T) . (B^T d B)] G, summed over tiles by the GEMMs) and the input gradient is the
forward map of the flipped weight. Why and when: docs/design-notes.md "Winograd convolutions".
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from dualflow.kernels import winograd_loops
from dualflow.kernels.columns_cpu import PART_MIN_BYTES, numba_kernel
from dualflow.kernels.cpu_threads import parts_for, run_parts, split

MIN_CHANNELS = 16
"""Input and output channels a layer needs for the Winograd kernels (below, GEMMs of K < 16 run
far below the BLAS rate and im2col + one GEMM is faster)."""

CHUNK_BYTES = 1 << 23
"""Bytes of transformed tiles (input and product) one chunk of images may take (at least one
image): each chunk is 16 BLAS calls (at 256 tiles a call the GEMMs took twice as long as at
8192), and its tiles should stay in cache between a transform and its GEMM (measured 2-30 MiB)."""

GRADIENT_CHUNK_BYTES = 1 << 24
"""The same for the weight gradient, whose GEMMs sum over the chunk's tiles (fewer, longer sums
pay there)."""

MIN_TILES = 256
"""Tiles (2x2 outputs over the batch) a layer needs: the weight's transform is 16 C x O values
whatever the batch, and at 64 tiles (4x4 images, batch 16) it cost more than the GEMMs saved."""

# numba_cache's key covers a kernel's own bytecode, not the helpers numba inlines into it: this
# digest of the loops' module stands for them
_DIGEST = hashlib.sha256(Path(winograd_loops.__file__).read_bytes()).hexdigest()[:16]


def runs(geometry: dict, ksize: tuple, channels: tuple[int, int], out_hw: tuple, n: int) -> bool:
    """Whether a convolution of this shape runs here (shapes only, so eager and compiled calls
    agree): a 3x3 kernel, stride and dilation 1, one group, at least ``MIN_CHANNELS`` channels in
    and out, at least ``MIN_TILES`` tiles over the batch (``n`` images of ``out_hw`` outputs).

    Example:
        >>> g = {"stride": (1, 1), "pad": (1, 1), "dilation": (1, 1), "groups": 1}
        >>> runs(g, (3, 3), (32, 64), (32, 32), 32), runs(g, (3, 3), (512, 512), (4, 4), 16)
        (True, False)
    """
    plain = all(tuple(geometry[k]) == (1, 1) for k in ("stride", "dilation"))
    if not plain or geometry["groups"] != 1 or tuple(ksize) != (3, 3):
        return False
    th, tw = tiles_hw(out_hw)
    return min(channels) >= MIN_CHANNELS and n * th * tw >= MIN_TILES


def runs_transposed(geometry: dict, w_shape: tuple, x_shape: tuple, out_hw: tuple) -> bool:
    """Whether conv2d's input gradient (a ``conv_transpose2d`` of x (N, Cin, H, W) with w
    (Cin, Cout, 3, 3) to ``out_hw``) runs here: as ``runs``, padding at most 2 and no output
    padding (the forward map of the flipped weight).

    Example:
        >>> g = {"stride": (1, 1), "pad": (1, 1), "dilation": (1, 1), "groups": 1}
        >>> runs_transposed(g, (64, 32, 3, 3), (32, 64, 32, 32), (32, 32))
        True
    """
    pad = tuple(geometry["pad"])
    exact = all(out_hw[k] == x_shape[2 + k] + 2 - 2 * pad[k] for k in range(2))
    channels = (w_shape[0], w_shape[1])
    return max(pad) <= 2 and exact and runs(geometry, w_shape[2:], channels, out_hw, x_shape[0])


def tiles_hw(out_hw: tuple) -> tuple[int, int]:
    """Tiles down and across for an output of ``out_hw`` (each tile is 2x2 outputs).

    Example:
        >>> tiles_hw((32, 31))
        (16, 16)
    """
    return (out_hw[0] + 1) // 2, (out_hw[1] + 1) // 2


def _gt_rows(m: Any, axis: int) -> Any:
    # G^T m along axis 0 or 1 (4 -> 3)
    m0, m1, m2, m3 = (m[k] if axis == 0 else m[:, k] for k in range(4))
    half = m.dtype.type(0.5)
    return np.stack([m0 + (m1 + m2) * half, (m1 - m2) * half, (m1 + m2) * half + m3], axis=axis)


def weight_tiles(w: Any, flip: bool = False) -> Any:
    """G g G^T of every (output, input) filter g of w (O, C, 3, 3), as a (16, O, C) stack
    (the GEMMs read it transposed); with ``flip``, of the convolution that the transposed
    convolution of w (C, O, 3, 3) is (each filter turned by 180 degrees).

    Example:
        >>> u = weight_tiles(np.ones((2, 1, 3, 3), np.float32))
        >>> u.shape, u[:, 0, 0].reshape(4, 4)[1].tolist()
        ((16, 2, 1), [1.5, 2.25, 0.75, 1.5])
    """
    o, c = (w.shape[1], w.shape[0]) if flip else w.shape[:2]
    u = np.empty((16, o, c), w.dtype)
    _in_parts("_weight_tiles", u, (np.ascontiguousarray(w), w.dtype.type(0.5), flip), o)
    return u


def _in_parts(name: str, out: Any, args: tuple, count: int) -> None:
    """Run loop ``name`` of ``winograd_loops`` as ``loop(out, args[0], a, b, *args[1:])`` over
    ``[0, count)`` (tile rows or filters) in parts on both cores, each writing only its own."""
    loop = numba_kernel(f"winograd{name}{_DIGEST}", getattr(winograd_loops, name))
    parts = split(count, parts_for(out.nbytes, PART_MIN_BYTES))
    run_parts([functools.partial(loop, out, args[0], a, b, *args[1:]) for a, b in parts])


def _input_tiles(x: Any, tiles: tuple, pad: tuple) -> Any:
    """B^T d B of the tiles of images x (n, C, H, W) padded by ``pad``: (16, n * tiles, C)."""
    v = np.empty((16, x.shape[0] * tiles[0] * tiles[1], x.shape[1]), x.dtype)
    _in_parts("_input_tiles", v, (x, *tiles, *pad), x.shape[0] * tiles[0])
    return v


def _chunks(n: int, tiles: tuple, channels: int, item: int, budget: int) -> list[tuple[int, int]]:
    """Ranges of images whose transformed tiles (``channels`` values each) fit ``budget``."""
    per_image = 16 * tiles[0] * tiles[1] * channels * item
    step = max(1, min(n, budget // max(1, per_image)))
    return [(a, min(n, a + step)) for a in range(0, n, step)]


def conv2d(x: Any, w: Any, pad: tuple) -> Any:
    """Cross-correlation of x (N, C, H, W) with w (O, C, 3, 3), stride 1: (N, O, Ho, Wo).

    Example:
        >>> x = np.arange(16.0).reshape(1, 1, 4, 4)
        >>> conv2d(x, np.ones((1, 1, 3, 3)), (0, 0)).tolist()
        [[[[45.0, 54.0], [81.0, 90.0]]]]
    """
    return _conv(x, weight_tiles(w), pad)


def _conv(x: Any, u: Any, pad: tuple) -> Any:
    """conv2d of x with the filters whose transforms are ``u`` (16, O, C)."""
    n, o = x.shape[0], u.shape[1]
    out_hw = (x.shape[2] + 2 * pad[0] - 2, x.shape[3] + 2 * pad[1] - 2)
    tiles = tiles_hw(out_hw)
    out = np.empty((n, o, *out_hw), x.dtype)
    for a, b in _chunks(n, tiles, x.shape[1] + o, x.dtype.itemsize, CHUNK_BYTES):
        m = np.matmul(_input_tiles(x[a:b], tiles, pad), u.transpose(0, 2, 1))
        _in_parts("_output_tiles", out[a:b], (m, *tiles), (b - a) * tiles[0])
        del m  # before the next chunk's: the scratch fact counts one chunk
    return out


def conv2d_grad_weight(x: Any, gy: Any, pad: tuple) -> Any:
    """Weight gradient of ``conv2d``: x (N, C, H, W), gy (N, O, Ho, Wo) -> (O, C, 3, 3); the
    chunks' sums are added in a fixed order.

    Example:
        >>> conv2d_grad_weight(np.ones((1, 1, 3, 3)), np.ones((1, 1, 1, 1)), (0, 0)).tolist()
        [[[[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]]]
    """
    n, o = gy.shape[:2]
    tiles = tiles_hw(gy.shape[2:])
    total = None  # (16, O, C): gradient tiles^T @ input tiles (faster than the other order)
    for a, b in _chunks(n, tiles, x.shape[1] + o, x.dtype.itemsize, GRADIENT_CHUNK_BYTES):
        g = np.empty((16, (b - a) * tiles[0] * tiles[1], o), gy.dtype)
        _in_parts("_gradient_tiles", g, (gy[a:b], *tiles), (b - a) * tiles[0])
        part = np.matmul(g.transpose(0, 2, 1), _input_tiles(x[a:b], tiles, pad))
        del g  # before the next chunk's (the scratch fact counts one chunk)
        total = part if total is None else np.add(total, part, out=total)
        del part
    gw = _gt_rows(_gt_rows(total.reshape(4, 4, *total.shape[1:]), 0), 1)  # (3, 3, O, C)
    return np.ascontiguousarray(gw.transpose(2, 3, 0, 1))


def conv_transpose2d(x: Any, w: Any, pad: tuple) -> Any:
    """conv2d's input gradient: x (N, Cin, H, W) with w (Cin, Cout, 3, 3), stride 1, padding
    ``pad`` (each at most 2): the forward map of the flipped, transposed weight.

    Example:
        >>> conv_transpose2d(np.ones((1, 1, 1, 1)), np.arange(9.0).reshape(1, 1, 3, 3),
        ...                  (0, 0))[0, 0].tolist()
        [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0]]
    """
    return _conv(x, weight_tiles(w, flip=True), (2 - pad[0], 2 - pad[1]))


def _tile_bytes(n: int, tiles: tuple, channels: int, item: int, budget: int) -> int:
    """Bytes of one (the largest) chunk's transformed tiles of ``channels`` values."""
    (a, b), *_ = _chunks(n, tiles, channels, item, budget)
    return 16 * (b - a) * tiles[0] * tiles[1] * channels * item


def conv2d_scratch(x: tuple, w: tuple, item: int, pad: tuple) -> int:
    """Bytes ``conv2d`` holds besides its inputs and result: the weight's taps and transform
    (37 C x O values while it is made, 16 afterwards) or, with those 16, one chunk's tiles.

    Example:
        >>> conv2d_scratch((2, 16, 8, 8), (16, 16, 3, 3), 4, (1, 1))  # 16 C x O + 2 images' tiles
        81920
    """
    (n, c, h, wd), o = x, w[0]
    tiles = tiles_hw((h + 2 * pad[0] - 2, wd + 2 * pad[1] - 2))
    chunk = _tile_bytes(n, tiles, c + o, item, CHUNK_BYTES)
    return 16 * c * o * item + max(21 * c * o * item, chunk)


def conv2d_grad_weight_scratch(x: tuple, gy: tuple, item: int) -> int:
    """Bytes ``conv2d_grad_weight`` holds besides its inputs and result: one chunk's tiles and
    the running and chunk sums (16 C x O values each), then the sums' inverse transform.

    Example:
        >>> conv2d_grad_weight_scratch((2, 16, 8, 8), (2, 16, 8, 8), 4)  # 32 C x O + tiles
        98304
    """
    (n, c), (o, ho, wo) = x[:2], gy[1:]
    chunk = _tile_bytes(n, tiles_hw((ho, wo)), c + o, item, GRADIENT_CHUNK_BYTES)
    return max(32 * c * o * item + chunk, (16 + 12 + 9 + 9) * c * o * item)


def conv_transpose2d_scratch(x: tuple, w: tuple, item: int, pad: tuple) -> int:
    """Bytes ``conv_transpose2d`` holds besides its inputs and result: the flipped weight and
    ``conv2d``'s scratch.

    Example:
        >>> conv_transpose2d_scratch((2, 16, 8, 8), (16, 16, 3, 3), 4, (1, 1))
        91136
    """
    flipped = (w[1], w[0], 3, 3)
    return 9 * w[0] * w[1] * item + conv2d_scratch(x, flipped, item, (2 - pad[0], 2 - pad[1]))
