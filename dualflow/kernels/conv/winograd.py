"""Winograd F(4x4, 3x3) convolutions on numpy arrays: 3x3 stride-1 layers in 4x fewer multiplies.

Every 4x4 block of outputs is computed from a 6x6 input tile as A^T [(G g G^T) . (B^T d B)] A
(Lavin & Gray 2016): the tile transforms are numba loops (``winograd_loops``), the channel sums
are 36 GEMMs over all tiles of a chunk of images, the filters' transform one GEMM. The weight
gradient is this map's adjoint (G^T [(A gy A^T) . (B^T d B)] G, summed over tiles by the GEMMs)
and the input gradient is the forward map of the flipped weight. Why, when, and the float32
error: docs/design-notes.md "Winograd convolutions" and "Winograd F(4x4, 3x3)".
"""

from __future__ import annotations

import functools
import hashlib
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from dualflow.kernels.base.cpu_caches import l2_bytes
from dualflow.kernels.base.cpu_threads import (
    parts_for,
    run_parts,
    run_pulled_gemms,
    split,
    threads,
)
from dualflow.kernels.conv import winograd_loops
from dualflow.kernels.conv.column_copies import PART_MIN_BYTES, numba_kernel, part_bytes
from dualflow.kernels.linalg import tiles

MIN_CHANNELS = 16
"""Input and output channels a layer needs for the Winograd kernels (below, GEMMs of K < 16 run
far below the BLAS rate and im2col + one GEMM is faster)."""

MIN_CHUNK_BYTES: int | None = None
CHUNK_BYTES = 1 << 24
"""Bytes of transformed tiles (input and product, or input and gradient) one chunk of images
takes (at least one image): 4x the transformed filters' bytes, within these bounds. A chunk is
36 GEMMs that read the filters (or write and add a sum of their size): few channels pay for
small chunks whose tiles stay in cache between a transform and its GEMMs (ResNet-18's 64-channel
layer at 32x32: 7.7 ms weight gradient with 2 MiB chunks, 13.6 with 16, on a Zen 4 of 1 MiB L2),
many channels for large ones that spread the filters' traffic over more tiles (256 channels at
8x8: 9.2 ms with 16 MiB, 15.6 with 2). The floor, ``MIN_CHUNK_BYTES``, is two of a core's L2
caches (``cpu_caches.l2_bytes``) unless set here (tests): on a Xeon of 2 MiB L2, small-cnn's
32 -> 64 layer at 32x32 took 13.4 ms forward + weight gradient with 2 MiB chunks and 11.0 with
4 (ResNet-18's 64-channel layer 9.6 and 8.8; the 16x16 layers the same within 3%), as 2 MiB was
the best of 2 and 16 on the Zen 4."""


def chunk_bytes(channels: tuple[int, int], item: int, floor: int | None = None) -> int:
    """The tile budget of one chunk for ``channels`` (C, O) of ``item`` bytes, at least
    ``floor`` (default: ``MIN_CHUNK_BYTES``, else two L2 caches).

    Example:
        >>> [chunk_bytes((c, c), 4, floor=2 << 20) >> 20 for c in (64, 128, 256)]
        [2, 9, 16]
    """
    floor = floor or MIN_CHUNK_BYTES or 2 * l2_bytes()
    filters = 36 * channels[0] * channels[1] * item
    return min(CHUNK_BYTES, max(floor, 4 * filters))


MIN_TILES = 64
"""Tiles (4x4 outputs over the batch) a layer needs: the weight's transform is 36 C x O values
whatever the batch, and at 16 tiles (4x4 images, batch 16) it costs more than the GEMMs save
(F(2x2, 3x3) measured 64 of its 2x2 tiles there slower than im2col)."""

# numba_cache's key covers a kernel's own bytecode, not the helpers numba inlines into it: this
# digest of the loops' module and of the transposes they inline stands for them
_DIGEST = hashlib.sha256(
    Path(winograd_loops.__file__).read_bytes() + tiles.FINGERPRINT.encode()
).hexdigest()[:16]


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
    """Tiles down and across for an output of ``out_hw`` (each tile is 4x4 outputs).

    Example:
        >>> tiles_hw((32, 31))
        (8, 8)
    """
    return (out_hw[0] + 3) // 4, (out_hw[1] + 3) // 4


def _toom_cook(points: tuple) -> tuple[list, list, list]:
    """A^T (4x6), G (6x3) and B^T (6x6) of F(4, 3) at ``points`` and infinity, exact."""
    ps = [Fraction(p) for p in points]

    def product(roots: list) -> list:  # coefficients (x^0 up) of the product of (x - root)
        poly = [Fraction(1)]
        for root in roots:
            poly = [a - root * b for a, b in zip([0, *poly], [*poly, 0], strict=True)]
        return poly

    a_t = [[p**i for p in ps] + [Fraction(i == 3)] for i in range(4)]
    g = [[p**k / math.prod(p - q for q in ps if q != p) for k in range(3)] for p in ps]
    b_t = [[*product([q for q in ps if q != p]), Fraction(0)] for p in ps] + [product(ps)]
    return a_t, [*g, [Fraction(0), Fraction(0), Fraction(1)]], b_t


POINTS = (0, -1, 1, Fraction(1, 2), -2)
"""The interpolation points besides infinity: mixing p and 1/p gave a third of the float32
error of Lavin & Gray's 0, +-1, +-2 (design notes: "Winograd F(4x4, 3x3)"). The numba loops
write out B^T and A^T at these points (``winograd_loops``); G is applied here."""

_G = np.array(_toom_cook(POINTS)[1], dtype=np.float64)
_TAPS = np.kron(_G, _G)
"""(36, 9): row 6i + j maps a filter's taps (a, b) -> 3a + b to G g G^T [i, j]."""

CONSTANTS = (0.5, 0.25, 0.125, 1.5, 2.0, 2.5, 4.0, 8.0)
"""The constants of the loops' B^T, A^T and A (all exact in binary), passed in the arrays'
dtype."""


def weight_tiles(w: Any, flip: bool = False) -> Any:
    """G g G^T of every (output, input) filter g of w (O, C, 3, 3), as a (36, O, C) stack
    (the GEMMs read it transposed); with ``flip``, of the convolution that the transposed
    convolution of w (Cin, Cout, 3, 3) is (each filter turned by 180 degrees): (36, Cout, Cin),
    a transposed view of a C-ordered array (what the GEMMs read). One GEMM of the taps' map
    (``_TAPS``, rounded to w's dtype) with the filters' taps.

    Example:
        >>> u = weight_tiles(np.ones((2, 1, 3, 3)))
        >>> u.shape, [round(float(t), 4) for t in u[:6, 0, 0]]
        ((36, 2, 1), [1.0, -0.3333, 1.0, -1.8667, 0.2, 1.0])
    """
    taps = np.ascontiguousarray(w).reshape(w.shape[0] * w.shape[1], 9)
    matrix = (_TAPS[:, ::-1] if flip else _TAPS).astype(w.dtype)
    u = np.matmul(matrix, taps.T).reshape(36, *w.shape[:2])
    return u.transpose(0, 2, 1) if flip else u


def _in_parts(name: str, out: Any, args: tuple, count: int) -> None:
    """Run loop ``name`` of ``winograd_loops`` as ``loop(out, args[0], a, b, *args[1:], k)``
    over ``[0, count)`` tile rows in parts on both cores, each writing only its own (``k``: the
    loops' ``CONSTANTS`` in out's dtype)."""
    loop = numba_kernel(f"winograd{name}{_DIGEST}", getattr(winograd_loops, name))
    parts = split(count, parts_for(out.nbytes, part_bytes(PART_MIN_BYTES)))
    k = np.array(CONSTANTS, out.dtype)
    run_parts([functools.partial(loop, out, args[0], a, b, *args[1:], k) for a, b in parts])


def _input_tiles(x: Any, tiles: tuple, pad: tuple) -> Any:
    """B^T d B of the tiles of images x (n, C, H, W) padded by ``pad``: (36, n * tiles, C)."""
    v = np.empty((36, x.shape[0] * tiles[0] * tiles[1], x.shape[1]), x.dtype)
    _in_parts("_input_tiles", v, (x, *tiles, *pad), x.shape[0] * tiles[0])
    return v


def _chunks(n: int, tiles: tuple, channels: int, item: int, budget: int) -> list[tuple[int, int]]:
    """Ranges of images whose transformed tiles (``channels`` values each) fit ``budget``."""
    per_image = 36 * tiles[0] * tiles[1] * channels * item
    step = max(1, min(n, budget // max(1, per_image)))
    return [(a, min(n, a + step)) for a in range(0, n, step)]


def conv2d(x: Any, w: Any, pad: tuple) -> Any:
    """Cross-correlation of x (N, C, H, W) with w (O, C, 3, 3), stride 1: (N, O, Ho, Wo).

    Example:
        >>> x = np.arange(16.0).reshape(1, 1, 4, 4)
        >>> conv2d(x, np.ones((1, 1, 3, 3)), (0, 0)).round(9).tolist()  # exact up to rounding
        [[[[45.0, 54.0], [81.0, 90.0]]]]
    """
    return _conv(x, weight_tiles(w), pad)


def _conv(x: Any, u: Any, pad: tuple) -> Any:
    """conv2d of x with the filters whose transforms are ``u`` (36, O, C)."""
    n, o = x.shape[0], u.shape[1]
    out_hw = (x.shape[2] + 2 * pad[0] - 2, x.shape[3] + 2 * pad[1] - 2)
    tiles = tiles_hw(out_hw)
    out = np.empty((n, o, *out_hw), x.dtype)
    budget = chunk_bytes((x.shape[1], o), x.dtype.itemsize)
    u_t = u.transpose(0, 2, 1)

    def chunk(a: int, b: int) -> None:
        m = _gemms(_input_tiles(x[a:b], tiles, pad), u_t)
        _in_parts("_output_tiles", out[a:b], (m, *tiles), (b - a) * tiles[0])

    _run_chunks(_chunks(n, tiles, x.shape[1] + o, x.dtype.itemsize, budget), chunk)
    return out


def _run_chunks(chunks: list[tuple[int, int]], chunk: Any) -> None:
    """``chunk(a, b)`` for every image range of ``chunks``, ``threads()`` at once, each core
    taking the next when done (``run_pulled``), with OpenBLAS on one thread meanwhile. Most
    chunks are a few images whose 36 GEMMs are too small for OpenBLAS to split over the cores
    (its threshold) and whose transforms too small to split (``parts_for``), so a chunk at a
    time ran on one core; and two cores' multi-threaded GEMMs would queue on OpenBLAS's level-3
    lock. Each chunk writes only its own images (or its own sum), so which core runs it never
    changes a bit. One chunk alone keeps OpenBLAS's threads and splits its transforms and GEMMs
    over the cores (``_in_parts``, ``_gemms``)."""
    if len(chunks) == 1:
        chunk(*chunks[0])
        return
    run_pulled_gemms(len(chunks), lambda k: chunk(*chunks[k]))


def _gemms(a: Any, b: Any) -> Any:
    """``a @ b`` for stacks of 36 matrices. A chunk running alone (a layer of one chunk: many
    channels, few tiles) splits its GEMMs over the cores, each on one OpenBLAS thread: small
    GEMMs on two OpenBLAS threads wait for each other 36 times. A few groups a core, taken as
    cores come free (``run_pulled``); inside a chunk that already runs on one core of several,
    the groups run one after another. Each GEMM is the same call either way."""
    out = np.empty((a.shape[0], a.shape[1], b.shape[2]), np.result_type(a, b))
    if threads() == 1:
        return np.matmul(a, b, out=out)
    parts = split(a.shape[0], 3 * threads())

    def group(k: int) -> None:
        i, j = parts[k]
        np.matmul(a[i:j], b[i:j], out=out[i:j])

    run_pulled_gemms(len(parts), group)
    return out


def conv2d_grad_weight(x: Any, gy: Any, pad: tuple) -> Any:
    """Weight gradient of ``conv2d``: x (N, C, H, W), gy (N, O, Ho, Wo) -> (O, C, 3, 3); the
    chunks' sums are added in a fixed order.

    Example:
        >>> gw = conv2d_grad_weight(np.ones((1, 1, 3, 3)), np.ones((1, 1, 1, 1)), (0, 0))
        >>> gw.round(9).tolist()
        [[[[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]]]
    """
    n, o = gy.shape[:2]
    tiles = tiles_hw(gy.shape[2:])
    budget = chunk_bytes((x.shape[1], o), x.dtype.itemsize)
    chunks = _chunks(n, tiles, x.shape[1] + o, x.dtype.itemsize, budget)
    # each chunk's (36, O, C) sum: gradient tiles^T @ input tiles (faster than the other order)
    sums: list[Any] = [None] * len(chunks)
    place = {a: k for k, (a, _) in enumerate(chunks)}

    def chunk(a: int, b: int) -> None:
        g = np.empty((36, (b - a) * tiles[0] * tiles[1], o), gy.dtype)
        _in_parts("_gradient_tiles", g, (gy[a:b], *tiles), (b - a) * tiles[0])
        sums[place[a]] = _gemms(g.transpose(0, 2, 1), _input_tiles(x[a:b], tiles, pad))

    _run_chunks(chunks, chunk)
    total = sums[0]
    for k in range(1, len(chunks)):  # in chunk order, whatever core computed which
        total = np.add(total, sums[k], out=total)
        sums[k] = None
    gw = np.matmul(_TAPS.T.astype(total.dtype), total.reshape(36, -1))  # G^T (.) G: (9, O * C)
    return np.ascontiguousarray(gw.reshape(3, 3, o, x.shape[1]).transpose(2, 3, 0, 1))


def conv_transpose2d(x: Any, w: Any, pad: tuple) -> Any:
    """conv2d's input gradient: x (N, Cin, H, W) with w (Cin, Cout, 3, 3), stride 1, padding
    ``pad`` (each at most 2): the forward map of the flipped, transposed weight.

    Example:
        >>> conv_transpose2d(np.ones((1, 1, 1, 1)), np.arange(9.0).reshape(1, 1, 3, 3),
        ...                  (0, 0))[0, 0].round().astype(int).tolist()
        [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    """
    return _conv(x, weight_tiles(w, flip=True), (2 - pad[0], 2 - pad[1]))


def _tile_bytes(n: int, tiles: tuple, channels: int, item: int, budget: int) -> int:
    """Bytes of the transformed tiles (``channels`` values) of the chunks that run at once (one
    a core; the first chunks are the largest)."""
    chunks = _chunks(n, tiles, channels, item, budget)
    at_once = chunks[: max(1, threads())]
    return sum(36 * (b - a) * tiles[0] * tiles[1] * channels * item for a, b in at_once)


def conv2d_scratch(x: tuple, w: tuple, item: int, pad: tuple) -> int:
    """Bytes ``conv2d`` holds besides its inputs and result: the filters' transform (36 C x O
    values) and the tiles (input and product) of the chunks that run at once.

    Example:
        >>> conv2d_scratch((2, 16, 8, 8), (16, 16, 3, 3), 4, (1, 1))  # 36 C x O + 2 images' tiles
        73728
    """
    (n, c, h, wd), o = x, w[0]
    tiles = tiles_hw((h + 2 * pad[0] - 2, wd + 2 * pad[1] - 2))
    return 36 * c * o * item + _tile_bytes(n, tiles, c + o, item, chunk_bytes((c, o), item))


def conv2d_grad_weight_scratch(x: tuple, gy: tuple, item: int) -> int:
    """Bytes ``conv2d_grad_weight`` holds besides its inputs and result: every chunk's sum (36 C
    x O values each, added in chunk order at the end) and the tiles and channels-last image of
    the chunks that run at once; then the sum and its inverse transform (9 C x O).

    Example:
        >>> conv2d_grad_weight_scratch((2, 16, 8, 8), (2, 16, 8, 8), 4)  # 36 C x O, tiles, image
        80128
    """
    (n, c), (o, ho, wo) = x[:2], gy[1:]
    tiles = tiles_hw((ho, wo))
    budget = chunk_bytes((c, o), item)
    chunks = _chunks(n, tiles, c + o, item, budget)
    at_once = min(len(chunks), max(1, threads()))
    sums = len(chunks) * 36 * c * o * item
    # each running chunk's input transform holds an image's channels-last copy beside its tiles
    image = at_once * (4 * tiles[0] + 2) * (4 * tiles[1] + 2) * c * item
    chunk = _tile_bytes(n, tiles, c + o, item, budget)
    return max(sums + chunk + image, 45 * c * o * item)


def conv_transpose2d_scratch(x: tuple, w: tuple, item: int, pad: tuple) -> int:
    """Bytes ``conv_transpose2d`` holds besides its inputs and result: ``conv2d``'s scratch for
    the flipped weight (its transform reads w in place).

    Example:
        >>> conv_transpose2d_scratch((2, 16, 8, 8), (16, 16, 3, 3), 4, (1, 1))
        73728
    """
    flipped = (w[1], w[0], 3, 3)
    return conv2d_scratch(x, flipped, item, (2 - pad[0], 2 - pad[1]))
