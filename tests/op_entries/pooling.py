"""Op-table entries for max/avg pooling, their gradient ops, and global_avg_pool2d.

References loop over output positions in float64. Max-pool inputs are distinct values spaced far
more than gradcheck's eps apart, so no window has a tie and finite differences are valid.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from dualflow import ops
from tests.opinfo import OpInfo, Sample

_SHAPES = [
    ((2, 3, 4, 4), {"ksize": 2}),
    ((1, 2, 5, 5), {"ksize": 3, "stride": 2, "pad": 1}),
    ((1, 2, 6, 5), {"ksize": (3, 2), "stride": (1, 2), "pad": (1, 0)}),
    ((1, 1, 5, 7), {"ksize": 2, "stride": 1}),
]


def _two(v: int | tuple) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)


def _windows(shape, ksize, stride, pad) -> Iterator[tuple[int, int, slice, slice]]:
    """Every output position (i, j) and the rows/cols of the padded input its window covers."""
    (kh, kw), (ph, pw) = _two(ksize), _two(pad)
    sh, sw = _two(ksize if stride is None else stride)
    for i in range((shape[2] + 2 * ph - kh) // sh + 1):
        for j in range((shape[3] + 2 * pw - kw) // sw + 1):
            yield i, j, slice(i * sh, i * sh + kh), slice(j * sw, j * sw + kw)


def _pad(x, pad, value=0.0):
    ph, pw = _two(pad)
    return np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=value)


def _crop(full, shape, pad):
    ph, pw = _two(pad)
    return full[:, :, ph : ph + shape[2], pw : pw + shape[3]]


def _pooled(shape, ksize, stride, pad):
    positions = list(_windows(shape, ksize, stride, pad))
    return shape[:2] + (positions[-1][0] + 1, positions[-1][1] + 1)


def max_pool2d_ref(x, ksize, stride=None, pad=0):
    xp = _pad(x, pad, -np.inf)
    y = np.zeros(_pooled(x.shape, ksize, stride, pad))
    for i, j, rows, cols in _windows(x.shape, ksize, stride, pad):
        y[:, :, i, j] = xp[:, :, rows, cols].max(axis=(2, 3))
    return y


def _argmax_positions(x, ksize, stride, pad):
    """(n, c, i, j, row, col) of each window's maximum in the padded input."""
    xp = _pad(x, pad, -np.inf)
    for i, j, rows, cols in _windows(x.shape, ksize, stride, pad):
        for n in range(x.shape[0]):
            for c in range(x.shape[1]):
                r, q = np.unravel_index(np.argmax(xp[n, c, rows, cols]), xp[n, c, rows, cols].shape)
                yield n, c, i, j, rows.start + r, cols.start + q


def max_pool2d_grad_ref(x, gy, ksize, stride=None, pad=0):
    full = np.zeros(_pad(x, pad).shape)
    for n, c, i, j, r, q in _argmax_positions(x, ksize, stride, pad):
        full[n, c, r, q] += gy[n, c, i, j]
    return _crop(full, x.shape, pad)


def max_pool2d_gather_ref(x, g, ksize, stride=None, pad=0):
    gp = _pad(g, pad)
    y = np.zeros(_pooled(x.shape, ksize, stride, pad))
    for n, c, i, j, r, q in _argmax_positions(x, ksize, stride, pad):
        y[n, c, i, j] = gp[n, c, r, q]
    return y


def avg_pool2d_ref(x, ksize, stride=None, pad=0):
    xp = _pad(x, pad)
    y = np.zeros(_pooled(x.shape, ksize, stride, pad))
    for i, j, rows, cols in _windows(x.shape, ksize, stride, pad):
        y[:, :, i, j] = xp[:, :, rows, cols].mean(axis=(2, 3))  # padded zeros count
    return y


def avg_pool2d_grad_ref(gy, shape, ksize, stride=None, pad=0):
    x_shape = gy.shape[:2] + tuple(shape)
    full = np.zeros(_pad(np.zeros(x_shape), pad).shape)
    kh, kw = _two(ksize)
    for i, j, rows, cols in _windows(x_shape, ksize, stride, pad):
        full[:, :, rows, cols] += gy[:, :, i, j, None, None] / (kh * kw)
    return _crop(full, x_shape, pad)


def _distinct(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    size = int(np.prod(shape))
    return (rng.permutation(size).reshape(shape) + rng.uniform(0, 0.1, shape)) * (4 / size) - 2


def _max_samples(rng: np.random.Generator) -> list[Sample]:
    return [Sample((_distinct(rng, s),), kw, name=str(kw)) for s, kw in _SHAPES]


def _max_pair_samples(rng: np.random.Generator, pooled_second: bool) -> list[Sample]:
    out = []
    for s, kw in _SHAPES:
        second = _pooled(s, kw["ksize"], kw.get("stride"), kw.get("pad", 0)) if pooled_second else s
        out.append(Sample((_distinct(rng, s), rng.normal(size=second)), kw, name=str(kw)))
    return out


def _avg_samples(rng: np.random.Generator) -> list[Sample]:
    return [Sample((rng.normal(size=s),), kw, name=str(kw)) for s, kw in _SHAPES]


def _avg_grad_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for s, kw in _SHAPES:
        gy = rng.normal(size=_pooled(s, kw["ksize"], kw.get("stride"), kw.get("pad", 0)))
        out.append(Sample((gy,), {"shape": s[2:], **kw}, name=str(kw)))
    return out


def _global_samples(rng: np.random.Generator) -> list[Sample]:
    return [Sample((rng.normal(size=s),), name=str(s)) for s in [(2, 3, 4, 4), (1, 2, 1, 5)]]


ENTRIES = [
    OpInfo("max_pool2d", ops.max_pool2d, max_pool2d_ref, _max_samples),
    OpInfo(
        "max_pool2d_grad",
        ops.max_pool2d_grad,
        max_pool2d_grad_ref,
        lambda rng: _max_pair_samples(rng, pooled_second=True),
    ),
    OpInfo(
        "max_pool2d_gather",
        ops.max_pool2d_gather,
        max_pool2d_gather_ref,
        lambda rng: _max_pair_samples(rng, pooled_second=False),
    ),
    OpInfo("avg_pool2d", ops.avg_pool2d, avg_pool2d_ref, _avg_samples),
    OpInfo("avg_pool2d_grad", ops.avg_pool2d_grad, avg_pool2d_grad_ref, _avg_grad_samples),
    OpInfo(
        "global_avg_pool2d",
        ops.global_avg_pool2d,
        lambda x: x.mean(axis=(2, 3)),
        _global_samples,
        composite=True,
    ),
]
