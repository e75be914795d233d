"""The numba loops of the CPU pooling kernels (``pool_kernels``): window helpers and kernel bodies.

Every function here is inlined (numba IR) into the kernels ``pool_kernels`` builds; a body takes
(u, v, z, lo, hi, kh, kw, sh, sw, ph, pw, ij) and fills planes [lo, hi) of its result, one pass
over the outputs, skipping out-of-range taps, rounding exactly as ``ops/pooling.py``'s numpy
window loops (tap order, NaN, ties, zeros' signs).
"""

from __future__ import annotations

from typing import Any

import numba  # fails at import when numba is missing (ops/pooling.py falls back to numpy)
import numpy as np


def jit(**options: Any) -> Any:
    """``numba.njit`` as every pooling kernel and helper is compiled: nogil, numpy's errors.

    Example:
        >>> jit()(lambda a: a + 1)(1)
        2
    """
    # cache=False: numba's disk cache unpickles unverified files; _kernel attaches a signed one
    return numba.njit(nogil=True, cache=False, error_model="numpy", **options)


# The window helpers and kernel bodies are inlined (numba IR) into two kinds of kernels: "any",
# taking the window and stride as arguments (compiled once per dtype), and "fixed", closures with
# them as constants that let LLVM unroll and vectorize the taps, at one compile per geometry,
# used for images of at least FIXED_MIN elements. Both round alike. Windows inside the image
# ("_in" helpers) read all taps untested; the border's ("_edge") skip out-of-range taps. Indices
# are unsigned where they are known to be in range: numba then adds no negative-index
# wraparound, which kept LLVM from vectorizing (k=2 s=2 max pooling of 2048 32x32 float32 planes,
# one thread: 1.1 ms signed, 0.19 ms unsigned; 3.1 ms with the window as arguments).
U = np.uint64


@jit(inline="always")
def _fold_max(best, v):  # pragma: no cover - runs compiled
    """numpy's ``maximum(best, v)`` as the float32 SIMD loop rounds it: the first NaN stays, a
    later NaN wins, ties take v. Two selects on one comparison each: the single select on
    ``best == best and not best > v`` compiled to a data-dependent branch where LLVM left the
    loop scalar (outputs narrower than its vector width on AVX2), mispredicted half the time:
    k=2 s=2 over 2048 32x32 float32 planes, one thread on a Zen 1 core, 8.3 -> 1.1 ms."""
    larger = best if best > v else v
    return larger if best == best else best


@jit(inline="always")
def _vmax_in(x, p, r0, c0, kh, kw):  # pragma: no cover - runs compiled
    """numpy's maximum folded over the taps in order: the first NaN wins, ties take the later."""
    best = x[p, U(r0), U(c0)]
    for a in range(kh):
        for b in range(kw):
            v = x[p, U(r0 + a), U(c0 + b)]
            best = _fold_max(best, v)
    return best


@jit(inline="always")
def _vmax_edge(x, p, r0, c0, h, w, kh, kw):  # pragma: no cover - runs compiled
    best = x[p, U(max(r0, 0)), U(max(c0, 0))]
    for r in range(max(r0, 0), min(r0 + kh, h)):
        for c in range(max(c0, 0), min(c0 + kw, w)):
            v = x[p, U(r), U(c)]
            best = _fold_max(best, v)
    return best


@jit(inline="always")
def _argmax_in(x, p, r0, c0, kh, kw):  # pragma: no cover - runs compiled
    """Tap of the first maximum. After a NaN (best = maximum(best, NaN)) no later tap wins."""
    best, t = x[p, U(r0), U(c0)], 0  # in x's dtype (a float64 -inf made this 10x slower)
    for a in range(kh):
        for b in range(kw):
            if a + b:
                v = x[p, U(r0 + a), U(c0 + b)]
                t = a * kw + b if v > best else t
                best = _fold_max(best, v)
    return t


@jit(inline="always")
def _argmax_edge(x, p, r0, c0, h, w, kh, kw):  # pragma: no cover - runs compiled
    """As _argmax_in over the in-range taps; tap 0 when nothing beats -inf, even out of range
    (numpy's -inf padded passes did the same): the caller drops that one."""
    best, t = -np.inf, 0
    for r in range(max(r0, 0), min(r0 + kh, h)):
        for c in range(max(c0, 0), min(c0 + kw, w)):
            v = x[p, U(r), U(c)]
            t = (r - r0) * kw + c - c0 if v > best else t
            best = _fold_max(best, v)
    return t


@jit(inline="always")
def _total_in(x, p, r0, c0, kh, kw):  # pragma: no cover - runs compiled
    acc = x[p, U(r0), U(c0)]
    for a in range(kh):
        for b in range(kw):
            if a + b:
                acc += x[p, U(r0 + a), U(c0 + b)]
    return acc


@jit(inline="always")
def _total_edge(x, p, r0, c0, h, w, kh, kw, zero):  # pragma: no cover - runs compiled
    """Sum of the taps in order; a padded tap adds a zero, as numpy's padded passes (-0.0 + 0)."""
    acc = zero
    for a in range(kh):
        for b in range(kw):
            r, c = r0 + a, c0 + b
            v = x[p, U(r), U(c)] if 0 <= r < h and 0 <= c < w else zero
            acc = v if a + b == 0 else acc + v
    return acc


@jit(inline="always")
def _cols(i, ij, wo):  # pragma: no cover - runs compiled
    """Output columns [a, b) of row i whose windows lie inside the image (the rest: border)."""
    i0, i1, j0, j1 = ij
    return (j0, j1) if i0 <= i < i1 else (wo, wo)


@jit(inline="always")
def _max_pool(x, y, _, lo, hi, kh, kw, sh, sw, ph, pw, ij):  # pragma: no cover - runs compiled
    _, h, w = x.shape
    _, ho, wo = y.shape
    for p in range(lo, hi):
        for i in range(ho):
            r0, (a, b) = i * sh - ph, _cols(i, ij, wo)
            for j in range(a):
                y[p, U(i), U(j)] = _vmax_edge(x, p, r0, j * sw - pw, h, w, kh, kw)
            for j in range(a, b):
                y[p, U(i), U(j)] = _vmax_in(x, p, r0, j * sw - pw, kh, kw)
            for j in range(b, wo):
                y[p, U(i), U(j)] = _vmax_edge(x, p, r0, j * sw - pw, h, w, kh, kw)


@jit(inline="always")
def _max_pool_rows(x, y, _, lo, hi, kh, kw, sh, sw, ph, pw, ij):  # pragma: no cover
    """max_pool2d in two folds: each input row over its windows' columns, then those rows over
    each window's rows; the same result (the last maximal tap in row-major order, or the first
    NaN), and overlapping windows share the row folds."""
    _, h, w = x.shape
    _, ho, wo = y.shape
    _, _, j0, j1 = ij
    rows = np.empty((h, wo), x.dtype)
    for p in range(lo, hi):
        for r in range(h):
            for j in range(j0):
                rows[U(r), U(j)] = _vmax_edge(x, p, r, j * sw - pw, h, w, 1, kw)
            for j in range(j0, j1):
                rows[U(r), U(j)] = _vmax_in(x, p, r, j * sw - pw, 1, kw)
            for j in range(j1, wo):
                rows[U(r), U(j)] = _vmax_edge(x, p, r, j * sw - pw, h, w, 1, kw)
        for i in range(ho):
            r0 = max(i * sh - ph, 0)
            for j in range(wo):
                y[p, U(i), U(j)] = rows[U(r0), U(j)]
            for r in range(r0 + 1, min(i * sh - ph + kh, h)):
                for j in range(wo):
                    v, best = rows[U(r), U(j)], y[p, U(i), U(j)]
                    y[p, U(i), U(j)] = _fold_max(best, v)


@jit(inline="always")
def _row_argmax(x, p, i, taps, h, w, kh, kw, sh, sw, ph, pw, ij):  # pragma: no cover
    """taps[j] = the tap of output (i, j)'s first maximum, for the row's every j."""
    r0, (a, b) = i * sh - ph, _cols(i, ij, taps.size)
    for j in range(a):
        taps[U(j)] = _argmax_edge(x, p, r0, j * sw - pw, h, w, kh, kw)
    for j in range(a, b):
        taps[U(j)] = _argmax_in(x, p, r0, j * sw - pw, kh, kw)
    for j in range(b, taps.size):
        taps[U(j)] = _argmax_edge(x, p, r0, j * sw - pw, h, w, kh, kw)


@jit(inline="always")
def _zero(gx, p):  # pragma: no cover - a loop LLVM turns into memset (gx[p] = 0 is ~10x slower)
    _, h, w = gx.shape
    for r in range(h):
        for c in range(w):
            gx[p, U(r), U(c)] = 0


@jit(inline="always")
def _span(tb, sw, pw, w, wo):  # pragma: no cover - runs compiled
    """Output columns [lo, hi) whose tap column tb falls inside the image (0 <= col < w)."""
    return max(0, -((tb - pw) // sw)), min(wo, (w - 1 + pw - tb) // sw + 1)


@jit(inline="always")
def _max_pool_gather(x, g, y, lo, hi, kh, kw, sh, sw, ph, pw, ij):  # pragma: no cover
    _, h, w = x.shape
    _, ho, wo = y.shape
    taps, zero = np.empty(wo, np.int32), np.zeros(1, y.dtype)[0]
    for p in range(lo, hi):
        for i in range(ho):
            _row_argmax(x, p, i, taps, h, w, kh, kw, sh, sw, ph, pw, ij)
            r0, (a, b) = i * sh - ph, _cols(i, ij, wo)
            for j in range(wo):
                t = taps[U(j)]
                r, c = r0 + t // kw, j * sw - pw + t % kw
                if a <= j < b:
                    y[p, U(i), U(j)] = g[p, U(r), U(c)]
                else:  # tap 0 out of range wins where nothing beats -inf: padding reads 0
                    y[p, U(i), U(j)] = g[p, U(r), U(c)] if 0 <= r < h and 0 <= c < w else zero


@jit(inline="always")
def _fill(gx, p, r0, c0, v, h, w, kh, kw):  # pragma: no cover - runs compiled
    """Write v at a window's in-range taps (disjoint windows)."""
    for a in range(kh):
        for b in range(kw):
            r, c = r0 + a, c0 + b
            if 0 <= r < h and 0 <= c < w:
                gx[p, U(r), U(c)] = v


@jit(inline="always")
def _fill_in(gx, p, r0, c0, v, kh, kw):  # pragma: no cover - runs compiled
    for a in range(kh):
        for b in range(kw):
            gx[p, U(r0 + a), U(c0 + b)] = v


@jit(inline="always")
def _add_row(gx, gy, p, i, taps, zero, h, w, kh, kw, sh, sw, ph, pw):  # pragma: no cover
    """Add output row i's gy (or 0) at every tap of its windows, taps in order (overlapping)."""
    wo = taps.size
    for ta in range(kh):
        r = i * sh - ph + ta
        for tb in range(kw if 0 <= r < h else 0):
            lo_j, hi_j = _span(tb, sw, pw, w, wo)
            for j in range(lo_j, hi_j):
                g = gy[p, U(i), U(j)]  # loaded first: a select, not a mispredicted branch
                gx[p, U(r), U(j * sw - pw + tb)] += g if taps[U(j)] == ta * kw + tb else zero


@jit(inline="always")
def _max_pool_grad(x, gy, gx, lo, hi, kh, kw, sh, sw, ph, pw, ij):  # pragma: no cover
    _, h, w = x.shape
    _, ho, wo = gy.shape
    add = sh < kh or sw < kw  # overlapping windows add up; else each pixel is written once
    taps, zero = np.empty(wo, np.int32), np.zeros(1, gx.dtype)[0]
    for p in range(lo, hi):
        _zero(gx, p)  # also the pixels no window covers
        # overlapping: rows in reverse and taps in order, so the windows covering a pixel add gy
        # (or 0) in increasing tap order, as numpy's per-tap passes did; disjoint windows go
        # forward (walking rows backwards made k=2 s=2 3x slower)
        for n in range(ho):
            i = ho - 1 - n if add else n
            _row_argmax(x, p, i, taps, h, w, kh, kw, sh, sw, ph, pw, ij)
            if add:
                _add_row(gx, gy, p, i, taps, zero, h, w, kh, kw, sh, sw, ph, pw)
                continue
            # disjoint windows: g stored at the picked tap over _zero's zeros (choosing g or 0
            # per tap compiled to a branch on the tap, mispredicted: 2x slower on a Zen 1 core)
            r0, (a, b) = i * sh - ph, _cols(i, ij, wo)
            for j in range(wo):
                t = taps[U(j)]
                r, c = r0 + t // kw, j * sw - pw + t % kw
                if (a <= j < b) or (0 <= r < h and 0 <= c < w):  # padding's tap 0: dropped
                    gx[p, U(r), U(c)] = gy[p, U(i), U(j)]


@jit(inline="always")
def _avg_pool(x, y, scale, lo, hi, kh, kw, sh, sw, ph, pw, ij):  # pragma: no cover
    _, h, w = x.shape
    _, ho, wo = y.shape
    zero = scale - scale  # of the array's type: float32 sums stay float32
    for p in range(lo, hi):
        for i in range(ho):
            r0, (a, b) = i * sh - ph, _cols(i, ij, wo)
            for j in range(a):
                y[p, U(i), U(j)] = _total_edge(x, p, r0, j * sw - pw, h, w, kh, kw, zero) * scale
            for j in range(a, b):
                y[p, U(i), U(j)] = _total_in(x, p, r0, j * sw - pw, kh, kw) * scale
            for j in range(b, wo):
                y[p, U(i), U(j)] = _total_edge(x, p, r0, j * sw - pw, h, w, kh, kw, zero) * scale


@jit(inline="always")
def _avg_pool_grad(gy, gx, scale, lo, hi, kh, kw, sh, sw, ph, pw, ij):  # pragma: no cover
    _, h, w = gx.shape
    _, ho, wo = gy.shape
    add = sh < kh or sw < kw
    scaled = np.empty(wo, gy.dtype)
    for p in range(lo, hi):
        _zero(gx, p)
        for n in range(ho):
            i = ho - 1 - n if add else n  # increasing tap order per pixel, as in _max_pool_grad
            for j in range(wo):
                scaled[U(j)] = gy[p, U(i), U(j)] * scale
            if not add:  # disjoint windows: the value at each in-range tap, window by window
                r0, (a, b) = i * sh - ph, _cols(i, ij, wo)
                for j in range(wo):
                    v = scaled[U(j)]
                    if a <= j < b:
                        _fill_in(gx, p, r0, j * sw - pw, v, kh, kw)
                    else:
                        _fill(gx, p, r0, j * sw - pw, v, h, w, kh, kw)
                continue
            for ta in range(kh):
                r = i * sh - ph + ta
                for tb in range(kw if 0 <= r < h else 0):
                    lo_j, hi_j = _span(tb, sw, pw, w, wo)
                    for j in range(lo_j, hi_j):
                        gx[p, U(r), U(j * sw - pw + tb)] += scaled[U(j)]


BODIES = {
    "maxpool": _max_pool,
    "maxpoolrows": _max_pool_rows,
    "maxpoolgrad": _max_pool_grad,
    "maxpoolgather": _max_pool_gather,
    "avgpool": _avg_pool,
    "avgpoolgrad": _avg_pool_grad,
}
