"""Debug mode in compiled code: a NaN from a fused step names every user line folded into it."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import ops


def test_nan_in_a_fused_step_names_all_its_lines() -> None:
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
    assert "fused: output contains NaN" in message
    # the three lines of fn's body, all folded into one fused step
    lines = {int(loc.rsplit(":", 1)[1]) for loc in message.split("created at ")[1:]}
    start = fn.__code__.co_firstlineno
    assert lines == {start + 1, start + 2, start + 3}
