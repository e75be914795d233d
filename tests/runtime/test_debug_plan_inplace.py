"""Debug mode names the exact op of a NaN inside a fused step even when, without debug mode, the
step would run in place over its inputs (issue 19): a realistic standardization whose batch of
equal targets divides 0 by 0 on a later call. Eager and compiled report the same op and line,
in the same text."""

from __future__ import annotations

import os

import numpy as np
import pytest

import dualflow
from dualflow import ops
from dualflow.errors import NumericalError


def standardized_error(pred, y):
    centered = y - y.mean()
    z = centered / ops.sqrt((centered * centered).mean())  # 0 / 0 when every y is equal
    return ((pred - z) ** 2).sum(axis=1)  # the fused step's output would reuse `centered`


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_nan_in_a_fused_step_names_divide_and_its_line(compiled: bool) -> None:
    fn = dualflow.compile(standardized_error) if compiled else standardized_error
    rng = np.random.default_rng(0)
    pred = dualflow.tensor(rng.normal(size=(64, 64)).astype(np.float32))
    dualflow.set_debug(True)
    try:
        for _ in range(2):  # compiled: a trace, then a plan run
            fn(pred, dualflow.tensor(rng.normal(size=(64, 64)).astype(np.float32)))
        if compiled:
            assert any(n.op == "fused" and "divide" in str(n.attrs["expr"])
                       for n in fn.history[-1].graph.nodes)  # fmt: skip
        with pytest.raises(NumericalError) as info:
            fn(pred, dualflow.tensor(np.full((64, 64), 3.0, np.float32)))
    finally:
        dualflow.set_debug(False)
    line = standardized_error.__code__.co_firstlineno + 2
    message = str(info.value)
    assert message.startswith("divide: output contains NaN"), message
    # compiled: the failing plan step makes the call re-run eagerly, so the text is eager's
    assert message.endswith(f"created at {os.path.abspath(__file__)}:{line}"), message
