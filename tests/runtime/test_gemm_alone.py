"""``runtime.gemm_alone``: a profiled plan run records its matmul steps' operand layouts, and
numpy's time for the same call on fresh operands of those layouts is measured once a layout."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import dualflow
from dualflow.runtime import gemm_alone
from dualflow.runtime.gemm_alone import _array, alone_seconds, layouts


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(1, 6),
    cols=st.integers(1, 6),
    step=st.integers(1, 3),
    swap=st.booleans(),
    dtype=st.sampled_from(["float32", "float64", "int64"]),
)
def test_a_fresh_operand_has_the_recorded_shape_strides_and_dtype(rows, cols, step, swap, dtype):
    base = np.zeros((rows * step, cols * step), dtype)[::step, ::step]
    view = base.T if swap else base
    (layout,), _ = layouts((view,))
    fresh = _array(layout, np.random.default_rng(0))
    assert (fresh.shape, fresh.strides, fresh.dtype) == (view.shape, view.strides, view.dtype)


def test_negative_strides_give_a_c_ordered_operand_of_the_shape() -> None:
    view = np.zeros((3, 4), np.float32)[::-1]
    fresh = _array(layouts((view,))[0][0], np.random.default_rng(0))
    assert fresh.shape == (3, 4) and fresh.flags.c_contiguous


def test_a_layout_is_measured_once_per_process_and_thread_count() -> None:
    gemm_alone.clear()
    a = np.ones((32, 16), np.float32)
    spec = layouts((a, a.T), np.empty((32, 32), np.float32))
    first = alone_seconds(spec)
    assert first > 0 and alone_seconds(spec) == first  # cached: the same measurement
    assert gemm_alone._seconds.cache_info().currsize == 1
    gemm_alone.clear()
    assert gemm_alone._seconds.cache_info().currsize == 0


def _step(seed: int):
    dualflow.manual_seed(seed)
    layer = dualflow.nn.Linear(16, 8)
    x = dualflow.tensor(np.random.default_rng(seed).normal(size=(4, 5, 16)).astype(np.float32))

    def step():
        layer.zero_grad()
        loss = (layer(x) ** 2).mean()
        loss.backward()
        return loss, layer.weight.grad

    return step


def test_a_profiled_run_records_every_matmul_steps_layouts_and_the_same_results() -> None:
    compiled, eager = dualflow.compile(_step(0), fallback="error"), _step(0)
    compiled()
    compiled()
    trace = compiled.history[-1]
    plans = [trace.plan, trace.backward.plan] if trace.backward else [trace.plan]
    for plan in plans:
        plan.profile_next = True
    got = compiled()
    want = eager()
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    seen = {}
    for plan in plans:
        matmuls = {i for i, n in enumerate(plan.graph.nodes) if n.op == "matmul"}
        assert set(plan.profile_layouts) == matmuls
        seen.update({(id(plan), i): s for i, s in plan.profile_layouts.items()})
    specs = list(seen.values())
    # the forward's x @ W.T: a (4, 5, 16) stack times the transposed (8, 16) weight
    forward = [s for s in specs if s[0][0][0] == (4, 5, 16)]
    assert forward and forward[0][0][1] == ((16, 8), (4, 64), "<f4")
    assert all(alone_seconds(s) > 0 for s in specs)
