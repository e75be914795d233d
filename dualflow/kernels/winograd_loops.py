"""The numba loops of the Winograd F(2x2, 3x3) convolution: the tile transforms around its GEMMs.

Each loop covers the tiles of images ``[b0, b1)`` and writes only their part of the result, so
``winograd_cpu`` runs two image ranges at once on both cores and the result never depends on the
split. Images are NCHW; each loop copies one row of tiles at a time to or from a small
channels-last buffer (in L1), so the transforms' inner loops run over contiguous channels, which
LLVM vectorizes. The transforms are sums and differences only, in the fixed order written here.
"""

from __future__ import annotations

import numba
import numpy as np

# B^T d B of a 4x4 input tile d, and A^T m A of a 4x4 product tile m (Lavin & Gray 2016):
#   B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
#   A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]
# and the adjoint of A^T m A (A g A^T of a 2x2 gradient tile g) for the weight gradient.


@numba.njit(nogil=True, cache=False, error_model="numpy", inline="always")
def _image_in(img, x, b, top, left):  # pragma: no cover - inlined by numba
    # img (Hb, Wb, C) channels-last: x[b] (C, H, W) at (top, left); the border is left alone.
    c, h, w = x.shape[1], x.shape[2], x.shape[3]
    for k in range(c):
        for r in range(h):
            for q in range(w):
                img[top + r, left + q, k] = x[b, k, r, q]


def _input_tiles(v, x, b0, b1, th, tw, ph, pw):  # pragma: no cover - compiled by numba
    # v (16, n*th*tw, C): B^T d B of every tile of x (n, C, H, W) padded by (ph, pw).
    c = x.shape[1]
    img = np.zeros((2 * th + 2, 2 * tw + 2, c), v.dtype)  # its border stays zero
    rows = np.empty((4, 4, c), v.dtype)  # B^T d: rows[i, s] is row i of the tile's column s
    for b in range(b0, b1):
        _image_in(img, x, b, ph, pw)
        for ty in range(th):
            r = 2 * ty
            for tx in range(tw):
                q, t = 2 * tx, (b * th + ty) * tw + tx
                for s in range(4):
                    for k in range(c):
                        d1, d2 = img[r + 1, q + s, k], img[r + 2, q + s, k]
                        rows[0, s, k] = img[r, q + s, k] - d2
                        rows[1, s, k] = d1 + d2
                        rows[2, s, k] = d2 - d1
                        rows[3, s, k] = d1 - img[r + 3, q + s, k]
                for i in range(4):
                    for k in range(c):
                        e1, e2 = rows[i, 1, k], rows[i, 2, k]
                        v[4 * i, t, k] = rows[i, 0, k] - e2
                        v[4 * i + 1, t, k] = e1 + e2
                        v[4 * i + 2, t, k] = e2 - e1
                        v[4 * i + 3, t, k] = e1 - rows[i, 3, k]


def _output_tiles(y, m, b0, b1, th, tw):  # pragma: no cover - compiled by numba
    # y (n, O, Ho, Wo): A^T m A of every tile of m (16, n*th*tw, O), cropped to Ho x Wo.
    o, ho, wo = y.shape[1], y.shape[2], y.shape[3]
    img = np.empty((2 * th, 2 * tw, o), m.dtype)
    cols = np.empty((2, 4, o), m.dtype)  # A^T m: cols[i, j] is row i of the tile's column j
    for b in range(b0, b1):
        for ty in range(th):
            r = 2 * ty
            for tx in range(tw):
                q, t = 2 * tx, (b * th + ty) * tw + tx
                for j in range(4):
                    for k in range(o):
                        m1, m2 = m[4 + j, t, k], m[8 + j, t, k]
                        cols[0, j, k] = m[j, t, k] + m1 + m2
                        cols[1, j, k] = m1 - m2 - m[12 + j, t, k]
                for i in range(2):
                    for k in range(o):
                        e1, e2 = cols[i, 1, k], cols[i, 2, k]
                        img[r + i, q, k] = cols[i, 0, k] + e1 + e2
                        img[r + i, q + 1, k] = e1 - e2 - cols[i, 3, k]
        for k in range(o):
            for r in range(ho):
                for q in range(wo):
                    y[b, k, r, q] = img[r, q, k]


def _gradient_tiles(w, g, b0, b1, th, tw):  # pragma: no cover - compiled by numba
    # w (16, n*th*tw, O): A g A^T of every 2x2 tile of g (n, O, Ho, Wo), zero beyond its edge.
    o = g.shape[1]
    img = np.zeros((2 * th, 2 * tw, o), w.dtype)  # its border (odd Ho or Wo) stays zero
    rows = np.empty((4, 2, o), w.dtype)  # A g: rows[i, s] is row i of the tile's column s
    for b in range(b0, b1):
        _image_in(img, g, b, 0, 0)
        for ty in range(th):
            r = 2 * ty
            for tx in range(tw):
                q, t = 2 * tx, (b * th + ty) * tw + tx
                for s in range(2):
                    for k in range(o):
                        g0, g1 = img[r, q + s, k], img[r + 1, q + s, k]
                        rows[0, s, k] = g0
                        rows[1, s, k] = g0 + g1
                        rows[2, s, k] = g0 - g1
                        rows[3, s, k] = -g1
                for i in range(4):
                    for k in range(o):
                        e0, e1 = rows[i, 0, k], rows[i, 1, k]
                        w[4 * i, t, k] = e0
                        w[4 * i + 1, t, k] = e0 + e1
                        w[4 * i + 2, t, k] = e0 - e1
                        w[4 * i + 3, t, k] = -e1
