"""``explain(profile=True)`` names, per matmul step, numpy's rate for the same shapes and layouts
alone and the step's share of it; ``gemm_alone_share`` sums that over a compiled step's plans."""

from __future__ import annotations

import re

import numpy as np

import dualflow
from dualflow.tracer.explain_profile import gemm_alone_share
from tests.tracer.helpers import seeded_training_step


def _mlp_step(seed: int) -> tuple:
    def layers() -> list:
        return [dualflow.nn.Linear(32, 64), dualflow.nn.ReLU(), dualflow.nn.Linear(64, 4)]

    return seeded_training_step(seed, layers, lambda ps: dualflow.optim.Adam(ps, 1e-3), (16, 32))


def test_each_matmul_step_names_numpy_alone_and_its_share() -> None:
    model, step = _mlp_step(0)
    compiled = dualflow.compile(step, fallback="error")
    compiled()
    compiled()
    text = str(dualflow.explain(compiled, profile=True))
    rows = [line for line in text.splitlines() if re.search(r" ms .*matmul", line)]
    assert rows
    pattern = r"; numpy alone [\d.]+ GFLOP/s, here \d+% of it$"
    assert all(re.search(pattern, r) for r in rows)
    assert re.search(r"matmul steps: [\d.]+ ms in the plan, [\d.]+ ms alone in numpy", text)
    eager_model, eager_step = _mlp_step(0)
    for _ in range(3):  # the profiled call was a real step: compiled == eager after it
        eager_step()
    for got, want in zip(model.parameters(), eager_model.parameters(), strict=True):
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_the_share_covers_every_matmul_step_and_none_without_one() -> None:
    _model, step = _mlp_step(1)
    compiled = dualflow.compile(step, fallback="error")
    compiled()
    compiled()
    share = gemm_alone_share(compiled, compiled, runs=2)
    assert share is not None and share > 0
    elementwise = dualflow.compile(lambda a: (a * 2).sum())
    a = dualflow.ones(8)
    elementwise(a)
    assert gemm_alone_share(elementwise, lambda: elementwise(a)) is None
    assert gemm_alone_share(step, step) is None  # not compiled: no plans
