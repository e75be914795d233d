"""compare_modes on a function that itself makes NaN (issue 19's debugging session): the same
NaN in both modes is no mismatch, and the report says the reference holds it and how to find the
op (it used to print "MISMATCH: max abs 0" with no culprit)."""

from __future__ import annotations

import warnings

import numpy as np

from dualflow import ops
from dualflow.debug import compare_modes


def _standardized_loss(pred, y):
    centered = y - y.mean()
    z = centered / ops.sqrt((centered * centered).mean())  # 0 / 0 when every y is equal
    return ((pred - z) ** 2).mean()


def test_nan_made_by_the_function_is_reported_as_such_not_as_a_mismatch() -> None:
    pred = np.random.default_rng(0).normal(size=4096).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's 0/0 warning
        report = compare_modes(_standardized_loss, pred, np.full(4096, 3.0, np.float32))
    assert report.ok and report.max_abs == 0.0
    assert report.nonfinite == "NaN in order 0, output 0"
    assert "the function makes it, not the compiler" in str(report)
    assert "set_debug(True)" in str(report)


def test_nan_on_one_side_only_is_still_a_mismatch() -> None:
    from dualflow.debug import _difference

    ref = {"order 0, output 0": np.array([1.0, np.nan])}
    assert _difference(ref, {"order 0, output 0": np.array([1.0, np.nan])}, 1e-4, 1e-5)[0]
    assert not _difference(ref, {"order 0, output 0": np.array([1.0, 2.0])}, 1e-4, 1e-5)[0]
    assert not _difference({"k": np.array([1.0, 2.0])}, {"k": np.array([1.0, np.nan])}, 1e-4, 1e-5)[
        0
    ]
