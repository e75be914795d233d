"""Debug mode in compiled code: a NaN from a fused step is traced to the exact op and line, by
re-running the fused step's ops one by one on the same inputs (as eager debug mode names it)."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import ops


def test_nan_in_a_fused_step_names_the_exact_op_and_line() -> None:
    def fn(x):
        a = x * 2.0
        b = ops.log(a - 100.0)  # NaN for small x
        return b + 1.0

    compiled = dualflow.compile(fn)
    x = dualflow.tensor(np.full(8192, 200.0, np.float32))  # large enough to be fused
    dualflow.set_debug(True)
    try:
        compiled(x)
        compiled(x)  # a plan run (the first call traced)
        assert any(n.op == "fused" for n in compiled.history[-1].graph.nodes)
        with pytest.raises(dualflow.errors.NumericalError) as info:
            compiled(dualflow.tensor(np.full(8192, 1.0, np.float32)))
    finally:
        dualflow.set_debug(False)
    message = str(info.value)
    line = fn.__code__.co_firstlineno + 2  # the log's line, inside the fused step
    assert message.startswith("log: output contains NaN"), message
    assert message.endswith(f"created at test_debug_plan.py:{line}"), message
