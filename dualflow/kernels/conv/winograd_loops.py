"""The numba loops of the Winograd F(4x4, 3x3) convolution: the tile transforms around its GEMMs.

Each tile loop covers the tile rows ``[r0, r1)`` of a chunk of images (row r is row r % th of
image r // th) and writes only their part of the result, so ``winograd`` runs two ranges at
once on both cores (even within one image) and the result never depends on the split. Images
are NCHW; the loops copy the rows they need to or from a channels-last buffer, so the
transforms' inner loops run over contiguous channels, which LLVM vectorizes. The transforms are
the 1-D maps below applied down each column, then along each row, in the fixed order written.
"""

from __future__ import annotations

import numba
import numpy as np

from dualflow.kernels.linalg.tiles import to_fm, to_rows

# Indices known to be in range are unsigned: numba then adds no negative-index wraparound, which
# kept LLVM from vectorizing (as in pool_loops).
U = np.uint64

# The interpolation points are 0, -1, 1, 1/2, -2 and infinity (``winograd.POINTS``: mixing
# p and 1/p gave a third of the float32 error of Lavin & Gray's 0, +-1, +-2). The 1-D maps:
#   B^T = [[1, -3/2, -2, 3/2, 1, 0], [0, 1, -5/2, 1/2, 1, 0], [0, -1, 1/2, 5/2, 1, 0],
#          [0, -2, -1, 2, 1, 0], [0, 1/2, -1, -1/2, 1, 0], [0, 1, -3/2, -2, 3/2, 1]]
#   A^T = [[1, 1, 1, 1, 1, 0], [0, -1, 1, 1/2, -2, 0], [0, 1, 1, 1/4, 4, 0],
#          [0, -1, 1, 1/8, -8, 1]]
# Their constants come in ``k`` (``winograd.CONSTANTS``, in the arrays' dtype: a float
# literal would make numba compute float32 tiles in float64): 1/2, 1/4, 1/8, 3/2, 2, 5/2, 4, 8.


@numba.njit(nogil=True, cache=False, error_model="numpy", inline="always")
def _rows_in(img, x, b, p0, p1, top, left):  # pragma: no cover - inlined by numba
    # img (Hb, Wb, C) channels-last, x[b] (C, H, W) placed at (top, left): its rows [p0, p1)
    # that lie on the image are copied; the others (padding) are never written, so stay zero.
    # Row by row in 16-wide tiles (``tiles.to_fm``): channel by channel over the whole image,
    # each channel's stores swept the image's channels-last copy through L1 again (4x slower).
    h, w = x.shape[2], x.shape[3]
    for p in range(max(p0, top), min(p1, top + h)):
        to_fm(x[b, :, p - top, :], img[p, left : left + w, :])


@numba.njit(nogil=True, cache=False, error_model="numpy", inline="always")
def _segment(r, r1, th):  # pragma: no cover - inlined by numba
    # the image of global tile row r and its tile rows [ty0, ty1) within [r, r1)
    b = r // th
    return b, r - b * th, min(th, r1 - b * th)


@numba.njit(nogil=True, cache=False, error_model="numpy", inline="always")
def _bt(d0, d1, d2, d3, d4, d5, k):  # pragma: no cover - inlined by numba
    # B^T d
    a, b = d4 - d2, d3 - d1
    return (
        (d0 - d2) + a + k[3] * b,
        (d1 + d4) - k[5] * d2 + k[0] * d3,
        (d4 - d1) + k[0] * d2 + k[5] * d3,
        a + k[4] * b,
        a - k[0] * b,
        (d1 - d3) + (d5 - d3) + k[3] * a,
    )


@numba.njit(nogil=True, cache=False, error_model="numpy", inline="always")
def _at(m0, m1, m2, m3, m4, m5, k):  # pragma: no cover - inlined by numba
    # A^T m
    s, d = m1 + m2, m2 - m1
    return (
        (m0 + s) + (m3 + m4),
        d + k[0] * m3 - k[4] * m4,
        s + k[1] * m3 + k[6] * m4,
        d + k[2] * m3 - k[7] * m4 + m5,
    )


@numba.njit(nogil=True, cache=False, error_model="numpy", inline="always")
def _a(g0, g1, g2, g3, k):  # pragma: no cover - inlined by numba
    # A g (the adjoint of A^T m, for the weight gradient)
    e, o = g0 + g2, g1 + g3
    return (
        g0,
        e - o,
        e + o,
        g0 + k[0] * g1 + k[1] * g2 + k[2] * g3,
        g0 - k[4] * g1 + k[6] * g2 - k[7] * g3,
        g3,
    )


@numba.njit(nogil=True, cache=False, error_model="numpy", inline="always")
def _put6(a, i, s, j, e):  # pragma: no cover - inlined by numba
    # a[i + m, s, j] = e[m] for the six values of a 1-D map
    a[i, s, j] = e[0]
    a[i + U(1), s, j] = e[1]
    a[i + U(2), s, j] = e[2]
    a[i + U(3), s, j] = e[3]
    a[i + U(4), s, j] = e[4]
    a[i + U(5), s, j] = e[5]


def _input_tiles(v, x, r0, r1, th, tw, ph, pw, k):  # pragma: no cover - compiled by numba
    # v (36, n*th*tw, C): B^T d B of the 6x6 tiles (stride 4) in tile rows [r0, r1) (row r:
    # image r // th) of x (n, C, H, W) padded by (ph, pw).
    c = x.shape[1]
    img = np.zeros((4 * th + 2, 4 * tw + 2, c), v.dtype)  # padding rows and columns stay zero
    rows = np.empty((6, 6, c), v.dtype)  # B^T d: rows[i, s] is row i of the tile's column s
    kk = (k[0], k[1], k[2], k[3], k[4], k[5], k[6], k[7])
    r = r0
    while r < r1:
        b, ty0, ty1 = _segment(r, r1, th)
        _rows_in(img, x, U(b), 4 * ty0, 4 * ty1 + 2, ph, pw)
        for ty in range(ty0, ty1):
            p = U(4 * ty)
            for tx in range(tw):
                q, t = U(4 * tx), U((b * th + ty) * tw + tx)
                for s_ in range(6):
                    s, qs = U(s_), q + U(s_)
                    for c_ in range(c):
                        j = U(c_)
                        e = _bt(
                            img[p, qs, j], img[p + U(1), qs, j], img[p + U(2), qs, j],
                            img[p + U(3), qs, j], img[p + U(4), qs, j], img[p + U(5), qs, j], kk,
                        )  # fmt: skip
                        _put6(rows, U(0), s, j, e)
                for i_ in range(6):
                    i, i6 = U(i_), U(6 * i_)
                    for c_ in range(c):
                        j = U(c_)
                        e = _bt(
                            rows[i, U(0), j], rows[i, U(1), j], rows[i, U(2), j],
                            rows[i, U(3), j], rows[i, U(4), j], rows[i, U(5), j], kk,
                        )  # fmt: skip
                        _put6(v, i6, t, j, e)
        r += ty1 - ty0


def _output_tiles(y, m, r0, r1, th, tw, k):  # pragma: no cover - compiled by numba
    # y (n, O, Ho, Wo): A^T m A of the tiles in tile rows [r0, r1) of m (36, n*th*tw, O),
    # cropped to Ho x Wo; each tile row is made channels-last in ``buf``, then copied out.
    o, ho, wo = y.shape[1], y.shape[2], y.shape[3]
    buf = np.empty((4, 4 * tw, o), m.dtype)
    cols = np.empty((4, 6, o), m.dtype)  # A^T m: cols[i, s] is row i of the tile's column s
    kk = (k[0], k[1], k[2], k[3], k[4], k[5], k[6], k[7])
    for r in range(r0, r1):
        b, ty = U(r // th), r % th
        for tx in range(tw):
            q, t = U(4 * tx), U(r * tw + tx)
            for s_ in range(6):
                s = U(s_)
                for c_ in range(o):
                    j = U(c_)
                    e = _at(
                        m[s, t, j], m[U(6) + s, t, j], m[U(12) + s, t, j],
                        m[U(18) + s, t, j], m[U(24) + s, t, j], m[U(30) + s, t, j], kk,
                    )  # fmt: skip
                    cols[U(0), s, j] = e[0]
                    cols[U(1), s, j] = e[1]
                    cols[U(2), s, j] = e[2]
                    cols[U(3), s, j] = e[3]
            for i_ in range(4):
                i = U(i_)
                for c_ in range(o):
                    j = U(c_)
                    e = _at(
                        cols[i, U(0), j], cols[i, U(1), j], cols[i, U(2), j],
                        cols[i, U(3), j], cols[i, U(4), j], cols[i, U(5), j], kk,
                    )  # fmt: skip
                    buf[i, q, j] = e[0]
                    buf[i, q + U(1), j] = e[1]
                    buf[i, q + U(2), j] = e[2]
                    buf[i, q + U(3), j] = e[3]
        for i in range(min(4, ho - 4 * ty)):
            to_rows(buf[i, :wo, :], y[b, :, 4 * ty + i, :])


def _gradient_tiles(w, g, r0, r1, th, tw, k):  # pragma: no cover - compiled by numba
    # w (36, n*th*tw, O): A g A^T of the 4x4 tiles in tile rows [r0, r1) of g (n, O, Ho, Wo),
    # zero beyond its edge.
    o = g.shape[1]
    img = np.zeros((4 * th, 4 * tw, o), w.dtype)  # rows and columns past the edge stay zero
    rows = np.empty((6, 4, o), w.dtype)  # A g: rows[i, s] is row i of the tile's column s
    kk = (k[0], k[1], k[2], k[3], k[4], k[5], k[6], k[7])
    r = r0
    while r < r1:
        b, ty0, ty1 = _segment(r, r1, th)
        _rows_in(img, g, U(b), 4 * ty0, 4 * ty1, 0, 0)
        for ty in range(ty0, ty1):
            p = U(4 * ty)
            for tx in range(tw):
                q, t = U(4 * tx), U((b * th + ty) * tw + tx)
                for s_ in range(4):
                    s, qs = U(s_), q + U(s_)
                    for c_ in range(o):
                        j = U(c_)
                        e = _a(
                            img[p, qs, j], img[p + U(1), qs, j], img[p + U(2), qs, j],
                            img[p + U(3), qs, j], kk,
                        )  # fmt: skip
                        _put6(rows, U(0), s, j, e)
                for i_ in range(6):
                    i, i6 = U(i_), U(6 * i_)
                    for c_ in range(o):
                        j = U(c_)
                        e = _a(rows[i, U(0), j], rows[i, U(1), j], rows[i, U(2), j],
                               rows[i, U(3), j], kk)  # fmt: skip
                        _put6(w, i6, t, j, e)
        r += ty1 - ty0
