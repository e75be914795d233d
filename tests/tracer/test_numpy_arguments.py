"""numpy arrays passed to a compiled function are graph inputs: handing them to dualflow reads
each call's array; numpy computation on them runs (the call stays right) but fails the trace
closed instead of baking its result in (issue 13, hole 4)."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import nn
from dualflow.errors import TracingError


def _model() -> nn.Module:
    dualflow.random.seed(0)
    return nn.Linear(3, 2)


def test_numpy_math_on_an_argument_is_never_baked() -> None:
    model = _model()

    def step(x_np):
        return model(dualflow.tensor(x_np / 255.0)).sum()

    compiled = dualflow.compile(step)
    batches = [np.full((4, 3), v, np.float32) for v in (255.0, 510.0, 51.0)]
    with pytest.warns(RuntimeWarning, match="numpy-array argument x_np"):
        first = compiled(batches[0])
    assert first.item() == step(batches[0]).item()
    for batch in batches[1:]:  # eager from now on: every call right
        assert compiled(batch).item() == step(batch).item()


def test_passing_the_array_to_dualflow_makes_it_an_input() -> None:
    model = _model()

    def step(x_np, scale):
        h = model(dualflow.tensor(x_np)) * scale
        return h.sum() + dualflow.as_tensor(x_np).mean()

    compiled = dualflow.compile(step)
    for v in (1.0, 2.0, 3.0):
        batch = np.full((4, 3), v, np.float32)
        assert compiled(batch, 2.0).item() == step(batch, 2.0).item()
    assert compiled.stats().plan_runs == 2 and compiled.stats().traces == 1


@pytest.mark.parametrize(
    "body",
    ["x[0]", "x.astype(np.float64)", "np.log(x + 1)", "float(x.sum())", "x.tolist()"],
)
def test_every_numpy_use_fails_closed(body: str) -> None:
    namespace = {"np": np, "dualflow": dualflow}
    exec(f"def f(x):\n    y = {body}\n    return dualflow.tensor(np.asarray(y, np.float32))\n",
         namespace)  # fmt: skip
    compiled = dualflow.compile(namespace["f"], fallback="error")
    with pytest.raises(TracingError, match="numpy-array argument x"):
        compiled(np.arange(3, dtype=np.float32))


def test_isinstance_and_shape_still_work_and_containers_get_their_arrays_back() -> None:
    batch = {"x": np.ones((2, 3), np.float32)}
    seen = []

    def step(b):
        seen.append(isinstance(b["x"], np.ndarray) and b["x"].shape == (2, 3))
        return dualflow.tensor(b["x"]).sum()

    compiled = dualflow.compile(step)
    assert compiled(batch).item() == 6.0
    assert seen == [True] and type(batch["x"]) is np.ndarray  # the caller's dict is restored
