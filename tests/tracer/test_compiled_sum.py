"""Compiled steps whose loss is a fused sum (``((x - y) ** 2).sum()``, ``(a * b).sum()``): equal to
eager within the compiled-vs-eager tolerance, in every input dtype, broadcast and keepdims form,
and so are first- and second-order gradients (forward and backward graphs are fused separately).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import ops
from tests.tracer.helpers import check_all_traces, check_interpret_matches_plan, tol


def _reducing_fused(fn: Any) -> list:
    return [
        n
        for trace in fn.history
        for n in trace.graph.nodes
        if n.op == "fused" and n.attrs.get("reduce") == "sum"
    ]


def _bound(dtype: Any, elements: np.ndarray) -> dict[str, float]:
    """``tol`` relative to the magnitude of the summed elements (exact for integers)."""
    if np.dtype(dtype).kind in "iub":
        return {"rtol": 0.0, "atol": 0.0}
    scale = float(np.abs(np.asarray(elements, np.float64)).sum())
    return {"rtol": tol(dtype)["rtol"], "atol": tol(dtype)["atol"] * max(scale, 1.0)}


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize(
    "shapes", [[(64, 128), (64, 128)], [(96, 1), (1, 80)]], ids=["same", "outer"]
)
def test_compiled_sum_equals_eager(dtype: str, keepdims: bool, shapes: list) -> None:
    def fn(x, y):
        return ((x - y) ** 2).sum(keepdims=keepdims), (x * y + 0.5).sum()

    rng = np.random.default_rng(0)
    compiled = dualflow.compile(fn, fallback="error")
    for call in range(3):
        arrays = [(rng.standard_normal(s) * 8).astype(dtype) for s in shapes]
        xs = [dualflow.tensor(a) for a in arrays]
        got, want = compiled(*xs), fn(*xs)
        summed = (np.square(arrays[0] - arrays[1]), arrays[0] * arrays[1] + 0.5)
        for g, w, elements in zip(got, want, summed):
            assert g.dtype == w.dtype and g.shape == w.shape, f"call {call}"
            np.testing.assert_allclose(g.numpy(), w.numpy(), **_bound(w.dtype, elements))
    assert len(_reducing_fused(compiled)) == 2, "both sums fused with their chains"
    check_all_traces(compiled)
    # the loosest of the two outputs' bounds (an integer input gives an int64 and a float sum)
    bound = max((_bound(w.dtype, e) for w, e in zip(want, summed)), key=lambda b: b["atol"])
    check_interpret_matches_plan(compiled, tuple(xs), **bound)


def _loss(x: Any, y: Any) -> Any:
    return ((x - y) ** 2).sum()


def test_gradients_through_a_compiled_sum_equal_eager() -> None:
    """``backward()`` from outside the compiled call runs its separate backward graph."""
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal((64, 100)).astype(np.float32) for _ in range(2)]
    compiled = dualflow.compile(_loss, fallback="error")
    results = []
    for fn in (_loss, compiled, compiled):  # the second compiled call runs the plans
        x, y = (dualflow.tensor(a, requires_grad=True) for a in arrays)
        loss = fn(x, y)
        loss.backward()
        results.append((loss.numpy(), x.grad.numpy(), y.grad.numpy()))
    assert _reducing_fused(compiled)
    elements = np.square(arrays[0] - arrays[1])
    for loss, gx, gy in results[1:]:
        np.testing.assert_allclose(loss, results[0][0], **_bound("float32", elements))
        np.testing.assert_array_equal(gx, results[0][1])  # 2 * (x - y): no sum in it
        np.testing.assert_array_equal(gy, results[0][2])


def test_second_order_gradients_inside_a_compiled_step_equal_eager() -> None:
    def step(x, y):
        loss = _loss(x, y)
        (gx,) = dualflow.grad(loss, [x], create_graph=True)
        penalty = (gx * gx).sum()  # a second fused sum, in the gradient graph
        (ggx,) = dualflow.grad(penalty, [x])
        return loss, penalty, ggx

    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal(8192) for _ in range(2)]  # float64
    compiled = dualflow.compile(step, fallback="error")
    for _ in range(2):
        xs = [dualflow.tensor(a, requires_grad=True) for a in arrays]
        got = compiled(*xs)
    want = step(*(dualflow.tensor(a, requires_grad=True) for a in arrays))
    assert len(_reducing_fused(compiled)) >= 2
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12, atol=1e-9)


def test_double_backward_through_a_compiled_sum_equals_eager() -> None:
    """A gradient penalty taken through the outputs of a compiled ``((x-y)**2).sum()``."""
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(6000) for _ in range(2)]
    compiled = dualflow.compile(_loss, fallback="error")
    results = []
    for fn in (_loss, compiled, compiled):
        x, y = (dualflow.tensor(a, requires_grad=True) for a in arrays)
        (gx,) = dualflow.grad(fn(x, y), [x], create_graph=True)
        penalty = ops.sum(gx * gx)
        penalty.backward()
        results.append((penalty.numpy(), x.grad.numpy(), y.grad.numpy()))
    for got in results[1:]:
        for g, w in zip(got, results[0]):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-9)
