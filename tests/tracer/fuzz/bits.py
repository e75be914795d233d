"""Bitwise equality of arrays (NaNs equal whatever their payload, ``-0.0`` differs from ``0.0``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.rule_check import same_bits

__all__ = ["assert_same_bits", "first_difference", "same_bits"]


def first_difference(a: Any, b: Any) -> str:
    """A short description of how two arrays differ ('' when their bits are the same).

    Example:
        >>> first_difference(np.float32([1, 2]), np.float32([1, 3]))
        'at (1,): 2.0 vs 3.0 (1 of 2 elements differ, max abs 1)'
    """
    a, b = np.asarray(a), np.asarray(b)
    if same_bits(a, b):
        return ""
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"{a.shape} {a.dtype} vs {b.shape} {b.dtype}"
    bad = ~((a == b) | (np.isnan(a) & np.isnan(b))) if a.dtype.kind in "fc" else a != b
    if a.dtype.kind in "fc":
        bad |= (a == b) & (np.signbit(a) != np.signbit(b))
    where = tuple(int(i) for i in np.argwhere(bad)[0]) if a.ndim else ()
    with np.errstate(all="ignore"):
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64))[bad]
    finite = diff[np.isfinite(diff)]
    worst = f"{finite.max():.3g}" if finite.size else "inf"
    count = f"{int(bad.sum())} of {a.size} elements differ, max abs {worst}"
    return f"at {where}: {a[where]} vs {b[where]} ({count})"


def assert_same_bits(got: Any, want: Any, msg: str = "") -> None:
    """Raise AssertionError naming the first differing element unless the bits are the same.

    Example:
        >>> assert_same_bits(np.arange(3), np.arange(3))
    """
    why = first_difference(got, want)
    assert not why, f"{msg}: {why}" if msg else why
