"""Softmax cross entropy over the rows of a (R, C) numpy array: forward and gradient kernels.

Each row's maximum, sum of exponentials and log-sum-exp are computed in one numba loop (the numpy
form took ~15 calls, ~0.1 ms at 64 x 10, issue 38); ``exp`` is ``fast_math.exp_f32`` for float32
(the vectorized function eager's ``np.exp`` also runs) and libm's for float64, sums and the loss
accumulate in float64 and each result is rounded once. Eager and compiled plans call these same
kernels, so they agree bit for bit. Rows are split into contiguous ranges over ``cpu_threads``
for large inputs; each part writes its own rows, and the total is summed after all parts in a
fixed order, so results never depend on the split.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import numba
import numpy as np

from dualflow.kernels.base import numba_cache
from dualflow.kernels.base.cpu_threads import parts_for, run_parts, split
from dualflow.kernels.fast_math.fast_exp import FINGERPRINT, exp_f32

DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
PART_MIN = 1 << 16  # elements per part: below, a second thread costs more than it saves
# numba_cache's key covers a kernel's own bytecode, not the functions it inlines or calls: this
# digest of the module's source stands for them (exp_f32's fingerprint for exp)
_DIGEST = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
_KERNELS: dict[tuple[str, np.dtype], Any] = {}


def covers(x: Any, labels: Any) -> bool:
    """Whether these kernels take the arrays: numpy float32/float64 logits, integer labels.

    Example:
        >>> covers(np.zeros((2, 3), np.float32), np.zeros(2, np.int64))
        True
        >>> covers(np.zeros((2, 3), np.float16), np.zeros(2, np.int64))
        False
    """
    return (
        type(x) is np.ndarray
        and type(labels) is np.ndarray
        and x.dtype in DTYPES
        and labels.dtype.kind in "iu"
    )


@numba.njit(inline="always", error_model="numpy")
def exp64(v: Any) -> Any:  # pragma: no cover - runs compiled
    """libm's exp, inlined into the float64 kernels (``softmax_rows``' too).

    Example:
        >>> exp64(0.0)
        1.0
    """
    return math.exp(v)


# reassociation for this sum alone (its adds become vector lanes: 1024 x 1000 float32 rows'
# sums 3.2 -> 0.9 ms), never for exp_f32's arithmetic; fixed machine code, so fixed bits
@numba.njit(error_model="numpy", fastmath={"reassoc"})
def row_sum(row: Any) -> Any:  # pragma: no cover - runs compiled
    """A row's sum in float64, its adds in vector lanes (``softmax_rows`` shares it).

    Example:
        >>> row_sum(np.ones(5, np.float32))
        5.0
    """
    total = 0.0
    for c in range(row.shape[0]):
        total += np.float64(row[c])
    return total


LANES = 8  # the row maximum's independent running maxima (``row_max``)


@numba.njit(inline="always", error_model="numpy")
def _greater(v: Any, m: Any) -> Any:  # pragma: no cover - runs compiled
    return v if v > m else m


@numba.njit(inline="always", error_model="numpy")
def row_max(row: Any) -> Any:  # pragma: no cover - runs compiled
    """``m = row[0]; m = v if v > m else m`` over the rest, in ``LANES`` independent maxima
    (``softmax_rows`` shares it).

    The single chain (a compare and a select per element, each waiting for the last) ran 1.03
    ms for 1024 rows of 1000 float32 on one thread; in eight scalar lanes 0.35 (and 0.10 for
    4096 rows of 64, where lanes in an array paid an allocation or, passed in, LLVM's aliasing
    doubts). The value is the chain's: each lane starts at ``row[0]`` (a NaN there stays, as in
    the chain; later NaNs never win a ``>``), and a maximum is exact. Only the sign of a zero
    maximum may differ, and ``x - m`` then differs only for x = -0, where ``exp`` gives 1.

    Example:
        >>> float(row_max(np.array([1.0, 5.0, np.nan, 3.0], np.float32)))
        5.0
    """
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = row[0]
    stop = 1 + (row.shape[0] - 1) // LANES * LANES
    for c in range(1, stop, LANES):
        m0, m1 = _greater(row[c], m0), _greater(row[c + 1], m1)
        m2, m3 = _greater(row[c + 2], m2), _greater(row[c + 3], m3)
        m4, m5 = _greater(row[c + 4], m4), _greater(row[c + 5], m5)
        m6, m7 = _greater(row[c + 6], m6), _greater(row[c + 7], m7)
    m = _greater(m1, m0)
    m = _greater(m7, _greater(m6, _greater(m5, _greater(m4, _greater(m3, _greater(m2, m))))))
    for c in range(stop, row.shape[0]):
        m = _greater(row[c], m)
    return m


def _row_exp(exp: Any) -> Any:
    """``row_exp(x, r, e)``: ``e[:] = exp(x[r] - max(x[r]))``, returning ``max(x[r])``; inlined."""

    @numba.njit(inline="always", error_model="numpy")
    def row_exp(x, r, e):  # pragma: no cover - runs compiled
        # NaN anywhere in the row makes the sum of e NaN
        m = row_max(x[r])
        for c in range(x.shape[1]):  # branch-free: vectorized
            e[c] = exp(x[r, c] - m)
        return m

    return row_exp


@numba.njit(inline="always", error_model="numpy")
def _gradient_row(row: Any, label: Any, w: Any, total: Any) -> None:  # pragma: no cover
    # the row of exponentials (summing to ``total``) made (softmax - onehot) * w in place
    scale = w / total
    for c in range(row.shape[0]):
        row[c] = np.float64(row[c]) * scale - (w if c == label else 0.0)


def _loss_body(row_exp: Any) -> Any:
    def loss(x, t, ignore, out, lo, hi):  # pragma: no cover - runs compiled
        # out[r]: the row's loss (0 when ignored); returns (rows counted, a bad label seen)
        count, bad = 0, False
        e = np.empty(x.shape[1], x.dtype)
        for r in range(lo, hi):
            out[r] = 0.0
            label = t[r]
            if label == ignore:
                continue
            if label < 0 or label >= x.shape[1]:
                bad = True
                continue
            m = row_exp(x, r, e)
            out[r] = math.log(row_sum(e)) - np.float64(x[r, label] - m)
            count += 1
        return count, bad

    return loss


def _grad_body(row_exp: Any) -> Any:
    def grad(x, t, ignore, g, gx, lo, hi):  # pragma: no cover - runs compiled
        # gx[r] = (softmax(x[r]) - onehot(t[r])) * g[r], 0 for ignored rows; returns a bad label
        bad = False
        for r in range(lo, hi):
            label = t[r]
            if label == ignore or label < 0 or label >= x.shape[1]:
                bad = bad or label != ignore
                gx[r] = 0.0
                continue
            row = gx[r]
            row_exp(x, r, row)
            _gradient_row(row, label, g[r], row_sum(row))
        return bad

    return grad


def _both_body(row_exp: Any) -> Any:
    def both(x, t, ignore, g, out, gx, lo, hi):  # pragma: no cover - runs compiled
        # ``loss``'s out[r] and ``grad``'s gx[r] from one exp of the row (the same operations on
        # the same values: the same bits); returns (rows counted, a bad label seen)
        count, bad = 0, False
        for r in range(lo, hi):
            out[r] = 0.0
            label = t[r]
            if label == ignore or label < 0 or label >= x.shape[1]:
                bad = bad or label != ignore
                gx[r] = 0.0
                continue
            row = gx[r]
            m = row_exp(x, r, row)
            total = row_sum(row)
            out[r] = math.log(total) - np.float64(x[r, label] - m)
            count += 1
            _gradient_row(row, label, g[r], total)
        return count, bad

    return both


_BODIES = {"loss": _loss_body, "grad": _grad_body, "both": _both_body}


def _make(kind: str, exp: Any) -> Any:
    """The numba kernel ``kind`` ("loss", "grad" or "both") with ``exp`` inlined (its dtype's)."""
    body = _BODIES[kind](_row_exp(exp))
    return numba.njit(nogil=True, cache=False, error_model="numpy")(body)


def _kernel(kind: str, dtype: np.dtype) -> Any:
    """Kernel ``kind`` for ``dtype``, built once per process, its machine code in the signed
    kernels store (the stem names this module's digest and exp_f32's fingerprint)."""

    def build() -> tuple[Any, str]:
        kernel = _make(kind, exp_f32 if dtype == np.float32 else exp64)
        return kernel, f"k_ce{kind}{dtype.name}x{_DIGEST}x{FINGERPRINT}"

    return numba_cache.built_once(_KERNELS, (kind, dtype), build)


def _parts(rows: int, size: int) -> list[tuple[int, int]]:
    return split(rows, min(rows, parts_for(size, PART_MIN))) if rows else []


def _c_order(a: np.ndarray) -> np.ndarray:
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def _labels(t: np.ndarray) -> np.ndarray:
    # one integer type for every label dtype (uint64 against a negative ignore_label compares
    # as float in numba): fewer compiled signatures, exact comparisons
    return t if t.dtype == np.int64 else t.astype(np.int64)


def row_losses(x: np.ndarray, t: np.ndarray, ignore: int) -> tuple[np.ndarray, int, bool]:
    """Per-row losses of (R, C) logits ``x`` and (R,) labels ``t`` in float64 (0 where
    ``t == ignore``), the count of rows not ignored, and whether a label was out of range.

    Example:
        >>> losses, count, bad = row_losses(np.zeros((2, 4)), np.array([1, -1]), -1)
        >>> losses.round(4).tolist(), count, bad
        ([1.3863, 0.0], 1, False)
    """
    x, t = _c_order(x), _labels(t)
    kernel = _kernel("loss", x.dtype)
    out = np.empty(x.shape[0], np.float64)
    if x.size < 2 * PART_MIN:  # one part, called directly (a small loss: ~2 us of work)
        count, bad = kernel(x, t, ignore, out, 0, x.shape[0])
        return out, count, bad
    counts: list[tuple[int, bool]] = []
    jobs = [
        lambda lo=lo, hi=hi: counts.append(kernel(x, t, ignore, out, lo, hi))
        for lo, hi in _parts(x.shape[0], x.size)
    ]
    run_parts(jobs)
    return out, sum(c for c, _ in counts), any(b for _, b in counts)


def count_kept(t: np.ndarray, ignore: int) -> int:
    """Labels not equal to ``ignore``.

    Example:
        >>> count_kept(np.array([0, -1, 3]), -1)
        2
    """
    return int(np.count_nonzero(t != ignore))


def row_grads(x: np.ndarray, t: np.ndarray, ignore: int, g: np.ndarray) -> tuple[np.ndarray, bool]:
    """``(softmax(x) - onehot(t)) * g[:, None]`` for (R, C) ``x``, (R,) labels and float64
    weights ``g``, rows with ``t == ignore`` zero, in x's dtype; and whether a label was out of
    range (its row is zero too).

    Example:
        >>> gx, bad = row_grads(np.zeros((1, 2)), np.array([0]), -1, np.ones(1))
        >>> gx.tolist(), bad
        ([[-0.5, 0.5]], False)
    """
    x, t = _c_order(x), _labels(t)
    kernel = _kernel("grad", x.dtype)
    gx = np.empty(x.shape, x.dtype)
    g = np.ascontiguousarray(g, np.float64)
    if x.size < 2 * PART_MIN:
        return gx, kernel(x, t, ignore, g, gx, 0, x.shape[0])
    bads: list[bool] = []
    jobs = [
        lambda lo=lo, hi=hi: bads.append(kernel(x, t, ignore, g, gx, lo, hi))
        for lo, hi in _parts(x.shape[0], x.size)
    ]
    run_parts(jobs)
    return gx, any(bads)


def row_losses_and_grads(
    x: np.ndarray, t: np.ndarray, ignore: int, g: np.ndarray
) -> tuple[np.ndarray, int, np.ndarray, bool]:
    """``row_losses`` and ``row_grads`` of the same rows at once (each row's exponentials made
    once): (per-row losses, rows counted, the gradient, whether a label was out of range), each
    bit for bit what the two give (the same operations in the same order).

    Example:
        >>> losses, count, gx, bad = row_losses_and_grads(
        ...     np.zeros((1, 2)), np.array([0]), -1, np.ones(1))
        >>> losses.round(4).tolist(), count, gx.tolist(), bad
        ([0.6931], 1, [[-0.5, 0.5]], False)
    """
    x, t = _c_order(x), _labels(t)
    kernel = _kernel("both", x.dtype)
    out, gx = np.empty(x.shape[0], np.float64), np.empty(x.shape, x.dtype)
    g = np.ascontiguousarray(g, np.float64)
    if x.size < 2 * PART_MIN:
        count, bad = kernel(x, t, ignore, g, out, gx, 0, x.shape[0])
        return out, count, gx, bad
    counts: list[tuple[int, bool]] = []
    jobs = [
        lambda lo=lo, hi=hi: counts.append(kernel(x, t, ignore, g, out, gx, lo, hi))
        for lo, hi in _parts(x.shape[0], x.size)
    ]
    run_parts(jobs)
    return out, sum(c for c, _ in counts), gx, any(b for _, b in counts)
