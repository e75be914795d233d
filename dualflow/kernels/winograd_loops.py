"""The numba loops of the Winograd F(2x2, 3x3) convolution: the tile transforms around its GEMMs.

Each tile loop covers the tile rows ``[r0, r1)`` of a chunk of images (row r is row r % th of
image r // th) and writes only their part of the result, so ``winograd_cpu`` runs two ranges at
once on both cores (even within one image) and the result never depends on the split. Images
are NCHW; the loops copy the rows they need to or from a channels-last buffer, so the
transforms' inner loops run over contiguous channels, which LLVM vectorizes. The transforms are
sums and differences only, in the fixed order written here.
"""

from __future__ import annotations

import numba
import numpy as np

# Indices known to be in range are unsigned: numba then adds no negative-index wraparound, which
# kept LLVM from vectorizing (as in pool_loops).
U = np.uint64

# B^T d B of a 4x4 input tile d, and A^T m A of a 4x4 product tile m (Lavin & Gray 2016):
#   B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
#   A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]
# and the adjoint of A^T m A (A g A^T of a 2x2 gradient tile g) for the weight gradient.


@numba.njit(nogil=True, cache=False, error_model="numpy", inline="always")
def _rows_in(img, x, b, p0, p1, top, left):  # pragma: no cover - inlined by numba
    # img (Hb, Wb, C) channels-last, x[b] (C, H, W) placed at (top, left): its rows [p0, p1)
    # that lie on the image are copied; the others (padding) are never written, so stay zero.
    c, h, w = x.shape[1], x.shape[2], x.shape[3]
    lo, hi = max(p0, top), min(p1, top + h)
    for k_ in range(c):
        k = U(k_)
        for p in range(lo, hi):
            for q in range(w):
                img[U(p), U(left + q), k] = x[b, k, U(p - top), U(q)]


@numba.njit(nogil=True, cache=False, error_model="numpy", inline="always")
def _segment(r, r1, th):  # pragma: no cover - inlined by numba
    # the image of global tile row r and its tile rows [ty0, ty1) within [r, r1)
    b = r // th
    return b, r - b * th, min(th, r1 - b * th)


def _input_tiles(v, x, r0, r1, th, tw, ph, pw):  # pragma: no cover - compiled by numba
    # v (16, n*th*tw, C): B^T d B of the tiles in tile rows [r0, r1) (row r: image r // th) of
    # x (n, C, H, W) padded by (ph, pw).
    c = x.shape[1]
    img = np.zeros((2 * th + 2, 2 * tw + 2, c), v.dtype)  # padding rows and columns stay zero
    rows = np.empty((4, 4, c), v.dtype)  # B^T d: rows[i, s] is row i of the tile's column s
    r = r0
    while r < r1:
        b, ty0, ty1 = _segment(r, r1, th)
        _rows_in(img, x, U(b), 2 * ty0, 2 * ty1 + 2, ph, pw)
        for ty in range(ty0, ty1):
            p = U(2 * ty)
            for tx in range(tw):
                q, t = U(2 * tx), U((b * th + ty) * tw + tx)
                for s_ in range(4):
                    s, qs = U(s_), q + U(s_)
                    for k_ in range(c):
                        k = U(k_)
                        d1, d2 = img[p + U(1), qs, k], img[p + U(2), qs, k]
                        rows[U(0), s, k] = img[p, qs, k] - d2
                        rows[U(1), s, k] = d1 + d2
                        rows[U(2), s, k] = d2 - d1
                        rows[U(3), s, k] = d1 - img[p + U(3), qs, k]
                for i_ in range(4):
                    i, i4 = U(i_), U(4 * i_)
                    for k_ in range(c):
                        k = U(k_)
                        e1, e2 = rows[i, U(1), k], rows[i, U(2), k]
                        v[i4, t, k] = rows[i, U(0), k] - e2
                        v[i4 + U(1), t, k] = e1 + e2
                        v[i4 + U(2), t, k] = e2 - e1
                        v[i4 + U(3), t, k] = e1 - rows[i, U(3), k]
        r += ty1 - ty0


def _output_tiles(y, m, r0, r1, th, tw):  # pragma: no cover - compiled by numba
    # y (n, O, Ho, Wo): A^T m A of the tiles in tile rows [r0, r1) of m (16, n*th*tw, O),
    # cropped to Ho x Wo; each tile row is made channels-last in ``buf``, then copied out.
    o, ho, wo = y.shape[1], y.shape[2], y.shape[3]
    buf = np.empty((2, 2 * tw, o), m.dtype)
    cols = np.empty((2, 4, o), m.dtype)  # A^T m: cols[i, j] is row i of the tile's column j
    for r in range(r0, r1):
        b, ty = U(r // th), r % th
        for tx in range(tw):
            q, t = U(2 * tx), U(r * tw + tx)
            for j_ in range(4):
                j = U(j_)
                for k_ in range(o):
                    k = U(k_)
                    m1, m2 = m[U(4) + j, t, k], m[U(8) + j, t, k]
                    cols[U(0), j, k] = m[j, t, k] + m1 + m2
                    cols[U(1), j, k] = m1 - m2 - m[U(12) + j, t, k]
            for i_ in range(2):
                i = U(i_)
                for k_ in range(o):
                    k = U(k_)
                    e1, e2 = cols[i, U(1), k], cols[i, U(2), k]
                    buf[i, q, k] = cols[i, U(0), k] + e1 + e2
                    buf[i, q + U(1), k] = e1 - e2 - cols[i, U(3), k]
        for k_ in range(o):
            k = U(k_)
            for i in range(min(2, ho - 2 * ty)):
                for p in range(wo):
                    y[b, k, U(2 * ty + i), U(p)] = buf[U(i), U(p), k]


def _gradient_tiles(w, g, r0, r1, th, tw):  # pragma: no cover - compiled by numba
    # w (16, n*th*tw, O): A g A^T of the 2x2 tiles in tile rows [r0, r1) of g (n, O, Ho, Wo),
    # zero beyond its edge.
    o = g.shape[1]
    img = np.zeros((2 * th, 2 * tw, o), w.dtype)  # rows and columns past the edge stay zero
    rows = np.empty((4, 2, o), w.dtype)  # A g: rows[i, s] is row i of the tile's column s
    r = r0
    while r < r1:
        b, ty0, ty1 = _segment(r, r1, th)
        _rows_in(img, g, U(b), 2 * ty0, 2 * ty1, 0, 0)
        for ty in range(ty0, ty1):
            p = U(2 * ty)
            for tx in range(tw):
                q, t = U(2 * tx), U((b * th + ty) * tw + tx)
                for s_ in range(2):
                    s, qs = U(s_), q + U(s_)
                    for k_ in range(o):
                        k = U(k_)
                        g0, g1 = img[p, qs, k], img[p + U(1), qs, k]
                        rows[U(0), s, k] = g0
                        rows[U(1), s, k] = g0 + g1
                        rows[U(2), s, k] = g0 - g1
                        rows[U(3), s, k] = -g1
                for i_ in range(4):
                    i, i4 = U(i_), U(4 * i_)
                    for k_ in range(o):
                        k = U(k_)
                        e0, e1 = rows[i, U(0), k], rows[i, U(1), k]
                        w[i4, t, k] = e0
                        w[i4 + U(1), t, k] = e0 + e1
                        w[i4 + U(2), t, k] = e0 - e1
                        w[i4 + U(3), t, k] = -e1
        r += ty1 - ty0


@numba.njit(nogil=True, cache=False, error_model="numpy", inline="always")
def _g(a0, a1, a2, half):  # pragma: no cover - inlined by numba
    # G (a0, a1, a2): G = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]]
    return a0, (a0 + a2 + a1) * half, (a0 + a2 - a1) * half, a2


@numba.njit(nogil=True, cache=False, error_model="numpy", inline="always")
def _tap(w, o, k, a, b, flip):  # pragma: no cover - inlined by numba
    # tap (a, b) of filter (o, k): w[o, k, a, b], or with ``flip`` w[k, o, 2 - a, 2 - b] (the
    # convolution a transposed convolution of w is); one signature for both (numba compiled the
    # flipped view's strides as a second one: ~1-2 s more on a cold cache)
    if flip:
        return w[k, o, U(2 - a), U(2 - b)]
    return w[o, k, U(a), U(b)]


def _weight_tiles(u, w, o0, o1, half, flip):  # pragma: no cover - compiled by numba
    # u (16, O, C): G g G^T of every 3x3 filter g (see ``_tap``) of w (C-ordered) for o in
    # [o0, o1); ``half`` is 1/2 in the arrays' dtype. The 16 planes of u lie a multiple of
    # 4 KiB apart (same cache sets): 64 filters are transformed into ``buf``, then each plane's
    # run is copied (storing each filter's 16 values at once was 5x slower).
    c = u.shape[2]
    buf = np.empty((16, 64), u.dtype)
    for o_ in range(o0, o1):
        o = U(o_)
        for k0 in range(0, c, 64):
            n = min(64, c - k0)
            for j_ in range(n):
                j, k = U(j_), U(k0 + j_)
                t00, t10, t20, t30 = _g(
                    _tap(w, o, k, 0, 0, flip),
                    _tap(w, o, k, 1, 0, flip),
                    _tap(w, o, k, 2, 0, flip),
                    half,
                )
                t01, t11, t21, t31 = _g(
                    _tap(w, o, k, 0, 1, flip),
                    _tap(w, o, k, 1, 1, flip),
                    _tap(w, o, k, 2, 1, flip),
                    half,
                )
                t02, t12, t22, t32 = _g(
                    _tap(w, o, k, 0, 2, flip),
                    _tap(w, o, k, 1, 2, flip),
                    _tap(w, o, k, 2, 2, flip),
                    half,
                )
                buf[0, j], buf[1, j], buf[2, j], buf[3, j] = _g(t00, t01, t02, half)
                buf[4, j], buf[5, j], buf[6, j], buf[7, j] = _g(t10, t11, t12, half)
                buf[8, j], buf[9, j], buf[10, j], buf[11, j] = _g(t20, t21, t22, half)
                buf[12, j], buf[13, j], buf[14, j], buf[15, j] = _g(t30, t31, t32, half)
            for i in range(16):
                for j_ in range(n):
                    u[U(i), o, U(k0 + j_)] = buf[U(i), U(j_)]
