"""Softmax and log-softmax over the last axis of numpy float arrays, one pass a row.

The numpy form (``x - max``, ``exp``, ``sum``, divide: four calls, three of them over short
rows) took 0.90 ms on two threads for a Transformer's 16 x 4 x 64 x 64 float32 attention
weights, 0.40 of it numpy's maximum over 64-long rows. Here each row's maximum
(``cross_entropy.row_max``), exponentials (``exp_f32`` for float32, as eager's ``np.exp``; libm's
for float64), their float64 sum and the output are one numba loop, each result rounded once:
the sum to x's dtype, then ``e / sum`` (softmax) or ``(x - max) - log(sum)`` (log-softmax, the
log taken in float64). Eager and compiled calls run these same kernels, so they agree bit for
bit; rows are split into ranges over ``cpu_threads`` (a row is one part's alone, so the split
never changes the bits) from the elements an exp, a divide and a maximum each repay.
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
from dualflow.kernels.base.machine_constants import machine_constants
from dualflow.kernels.fast_math.fast_exp import FINGERPRINT, exp_f32
from dualflow.kernels.fast_math.work_weights import work_weights
from dualflow.kernels.loss import cross_entropy
from dualflow.kernels.loss.cross_entropy import exp64, row_max, row_sum

DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
KINDS = ("softmax", "log_softmax")
# numba_cache's key covers a kernel's own bytecode, not the functions it inlines: this digest of
# the module's source (and cross_entropy's, whose maximum and sum it inlines) stands for them
_DIGEST = hashlib.sha256(
    Path(__file__).read_bytes() + Path(cross_entropy.__file__).read_bytes()
).hexdigest()[:16]
_KERNELS: dict[tuple[str, np.dtype], Any] = {}


def covers(x: Any) -> bool:
    """Whether the kernels take ``x``: a numpy float32/float64 array of 2+ dims with non-empty
    rows (the last axis), in any memory layout (``rows`` reads a C-ordered copy where it is
    not one: which kernel runs, and so the bits, depend on the dtype and shape alone, never on
    a layout that a compiled plan may choose differently from eager).

    Example:
        >>> covers(np.zeros((2, 3), np.float32)), covers(np.zeros((2, 3), np.float16))
        (True, False)
        >>> covers(np.zeros((3, 2), np.float32).T)
        True
    """
    return type(x) is np.ndarray and x.dtype in DTYPES and x.ndim > 1 and x.shape[-1] > 0


def _make(kind: str, exp: Any) -> Any:
    """The numba kernel ``kind`` over rows [lo, hi) of (R, C) arrays, ``exp`` inlined."""

    def softmax(x, y, lo, hi):  # pragma: no cover - runs compiled
        for r in range(lo, hi):
            row, out = x[r], y[r]
            m = row_max(row)
            for c in range(row.shape[0]):  # branch-free: vectorized
                out[c] = exp(row[c] - m)
            total = out.dtype.type(row_sum(out))
            for c in range(row.shape[0]):
                out[c] = out[c] / total

    def log_softmax(x, y, lo, hi):  # pragma: no cover - runs compiled
        for r in range(lo, hi):
            row, out = x[r], y[r]
            m = row_max(row)
            for c in range(row.shape[0]):
                out[c] = exp(row[c] - m)
            log_total = out.dtype.type(math.log(row_sum(out)))
            for c in range(row.shape[0]):
                out[c] = (row[c] - m) - log_total

    body = softmax if kind == "softmax" else log_softmax
    return numba.njit(nogil=True, cache=False, error_model="numpy")(body)


def _kernel(kind: str, dtype: np.dtype) -> Any:
    """Kernel ``kind`` for ``dtype``, built once per process, its machine code in the signed
    kernels store (the stem names the digest and exp_f32's fingerprint)."""

    def build() -> tuple[Any, str]:
        kernel = _make(kind, exp_f32 if dtype == np.float32 else exp64)
        return kernel, f"k_rows{kind}{dtype.name}x{_DIGEST}x{FINGERPRINT}"

    return numba_cache.built_once(_KERNELS, (kind, dtype), build)


def part_min() -> int:
    """Elements per part from which a call is split: a copy's (``machine_constants``) over the
    kernel's work per element, an exp, a divide and a maximum (``work_weights``, measured).

    Example:
        >>> part_min() <= machine_constants().part_min
        True
    """
    weights = work_weights()
    return machine_constants().part_min_for(weights.exp + weights.divide + weights.maximum)


def rows(kind: str, x: np.ndarray) -> np.ndarray:
    """``kind`` (``KINDS``) of ``x`` over its last axis (``covers``), C-ordered.

    Example:
        >>> rows("softmax", np.log(np.array([[1.0, 3.0]], np.float32))).tolist()
        [[0.25, 0.75]]
        >>> rows("log_softmax", np.zeros((1, 2))).round(4).tolist()
        [[-0.6931, -0.6931]]
    """
    flat = np.ascontiguousarray(x).reshape(-1, x.shape[-1])
    out = np.empty(x.shape, x.dtype)
    into = out.reshape(flat.shape)
    kernel = _kernel(kind, x.dtype)
    spans = split(flat.shape[0], parts_for(x.size, part_min()))
    if len(spans) <= 1:
        kernel(flat, into, 0, flat.shape[0])
    else:
        run_parts([lambda lo=lo, hi=hi: kernel(flat, into, lo, hi) for lo, hi in spans])
    return out
