"""``explain(fn, ..., profile=True)``: one more real call with every plan step timed, the slowest
steps printed with their lines and the GFLOP/s of matmuls and convolutions (``OpDef.flops``)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import dualflow
from dualflow import nn, optim
from dualflow.graph_ir.ir import Node, Value
from dualflow.tracer.explain_profile import request_profile, step_flops
from tests.tracer.helpers import seeded_training_step


def _model_and_step(seed: int) -> tuple:
    def layers() -> list:
        return [nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(512, 4)]

    return seeded_training_step(seed, layers, lambda ps: optim.SGD(ps, lr=0.1), (2, 3, 8, 8))


def test_profile_is_one_more_real_call_and_names_the_slow_steps() -> None:
    model, step = _model_and_step(0)
    compiled = dualflow.compile(step, fallback="error")
    compiled()
    compiled()
    text = str(dualflow.explain(compiled, profile=True))
    assert compiled.stats().plan_runs == 2  # the profiled call ran the plan and committed
    assert "profile of the plan's last profiled run" in text
    rows = [line for line in text.splitlines() if "GFLOP/s" in line]
    assert any("conv2d " in r for r in rows) and any("matmul" in r for r in rows)
    assert any("conv2d_grad_weight" in r and "(backward) at" in r for r in rows)
    steps = [r for r in rows if " ms " in r]  # each names its share of the measured GEMM rate
    assert steps and all(re.search(r"GFLOP/s +\d+% of the GEMM rate", r) for r in steps)
    assert re.search(r"machine: float32 GEMM [\d.]+ GFLOP/s, copy bandwidth [\d.]+ GB/s", text)
    eager_model, eager_step = _model_and_step(0)
    for _ in range(3):
        eager_step()
    for got, want in zip(model.parameters(), eager_model.parameters(), strict=True):
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_convolution_flops_count_every_multiply_add_twice() -> None:
    x, w = Value(0, (2, 3, 8, 8), "float32"), Value(1, (4, 3, 3, 3), "float32")
    y = Value(2, (2, 4, 4, 4), "float32")
    geometry = {"stride": (2, 2), "pad": (1, 1), "dilation": (1, 1), "groups": 1}
    forward = 2 * 2 * 4 * 4 * 4 * (3 * 3 * 3)  # N Ho Wo O x C kh kw
    assert step_flops(Node("conv2d", (x, w), (y,), geometry)) == forward
    grad_weight = Node("conv2d_grad_weight", (x, y), (w,), {**geometry, "ksize": (3, 3)})
    assert step_flops(grad_weight) == forward  # the adjoints do the same work
    transpose = Node("conv_transpose2d", (y, w), (x,), {**geometry, "output_padding": (1, 1)})
    assert step_flops(transpose) == forward
    assert step_flops(Node("exp", (x,), (Value(3, x.shape, "float32"),))) is None


def test_a_profiled_call_prints_once_even_when_its_guard_fails(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the profiled run holds debug_print messages until every guard passed, as plain runs do:
    # a failing guard's eager re-run prints the only line
    @dualflow.compile
    def f(x):
        y = x * 2
        dualflow.debug.print("sum={}", y.sum())
        if y.sum() > 0:
            return y
        return -y

    positive, negative = dualflow.tensor([1.0, 2.0]), dualflow.tensor([-1.0, -2.0])
    f(positive)
    f(positive)
    dualflow.explain(f)  # no arguments: nothing runs
    request_profile(f)
    f(negative)
    assert capsys.readouterr().out.splitlines() == ["sum=6.0", "sum=6.0", "sum=-6.0"]
    assert not any(t.plan.profile_next for t in f.history)  # the run used the request
    dualflow.explain(f, dualflow.tensor([1.0, 2.0, 3.0]), profile=True)  # new shape: retraces
    assert not any(t.plan.profile_next for t in f.history)  # explain withdrew what was unused
