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
    bad = np.full(8192, 1.0, np.float32)
    dualflow.set_debug(True)
    try:
        compiled(x)
        compiled(x)  # a plan run (the first call traced)
        plan = compiled.history[-1].plan
        assert any(n.op == "fused" for n in plan.graph.nodes)
        with pytest.raises(dualflow.errors.NumericalError) as in_plan:
            plan.run([bad], [])
        with pytest.raises(dualflow.errors.NumericalError) as info:
            compiled(dualflow.tensor(bad))
        with pytest.raises(dualflow.errors.NumericalError) as eager:
            fn(dualflow.tensor(bad))
    finally:
        dualflow.set_debug(False)
    line = fn.__code__.co_firstlineno + 2  # the log's line, inside the fused step
    message = str(in_plan.value)  # the plan itself names the op inside its fused step
    assert message.startswith("log: output contains NaN"), message
    assert message.endswith(f"created at test_debug_plan.py:{line}"), message
    # the compiled call re-runs eagerly when a step raises: eager's very message
    assert str(info.value) == str(eager.value)
    assert str(info.value).endswith(f"test_debug_plan.py:{line}")
    assert compiled.stats().step_errors == 1
