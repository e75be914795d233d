"""Hypothesis: random small programs (elementwise, shape and reduction ops on 1-2 inputs, with a
data-dependent branch) give the eager results when compiled, call after call as the branch flips.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dualflow
from dualflow import ops
from tests.tracer.helpers import assert_same, check_all_traces

UNARY = ["tanh", "exp_clip", "negative", "square", "relu"]
BINARY = ["add", "multiply", "maximum", "subtract"]
SHAPE = ["reshape_flat", "transpose", "sum_axis", "sum_keep", "mean_all", "expand"]

STEP = st.one_of(
    st.tuples(st.just("unary"), st.sampled_from(UNARY), st.just(0)),
    st.tuples(st.just("binary"), st.sampled_from(BINARY), st.integers(0, 2)),
    st.tuples(st.just("shape"), st.sampled_from(SHAPE), st.integers(0, 3)),
)


@st.composite
def programs(draw: Any) -> dict[str, Any]:
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=2)))
    second = draw(
        st.sampled_from(["same", "last", "ones", "none"]) if len(shape) == 2 else st.just("same")
    )
    shapes = [shape]
    if second != "none":
        shapes.append({"same": shape, "last": shape[-1:], "ones": (shape[0], 1)}[second])
    return {
        "shapes": shapes,
        "pre": draw(st.lists(STEP, max_size=4)),
        "branch": draw(st.sampled_from(["float", "bool"])),
        "threshold": draw(st.sampled_from([-0.5, 0.0, 0.5])),
        "then": draw(st.lists(STEP, min_size=1, max_size=3)),
        "else": draw(st.lists(STEP, max_size=3)),
    }


def _apply(h: Any, step: tuple, xs: tuple) -> Any:
    kind, name, k = step
    if kind == "unary":
        if name == "exp_clip":
            return ops.exp(ops.clip(h, -3.0, 3.0))
        if name == "square":
            return ops.tanh(h) * h  # stays small when repeated
        return getattr(ops, name)(h)
    if kind == "binary":
        other = h if k == 2 else xs[k % len(xs)]
        try:
            np.broadcast_shapes(h.shape, other.shape)
        except ValueError:
            other = other.sum()
        return getattr(ops, name)(h, other)
    if name == "reshape_flat":
        return ops.reshape(h, (-1,))
    if name == "transpose":
        return ops.transpose(h)
    if name == "expand":
        return ops.expand_dims(h, k % (h.ndim + 1))
    if h.ndim == 0:
        return h * 1.5
    if name == "sum_axis":
        return ops.sum(h, axis=k % h.ndim)
    if name == "sum_keep":
        return ops.sum(h, axis=-1, keepdims=True)
    return ops.mean(h)


def _program(p: dict[str, Any]) -> Any:
    def fn(*xs: Any) -> Any:
        h = xs[0]
        for step in p["pre"]:
            h = _apply(h, step, xs)
        if p["branch"] == "float":
            taken = float(h.sum()) > p["threshold"]  # guards the exact value
        else:
            taken = bool(h.sum() > p["threshold"])  # guards only the decision
        for step in p["then"] if taken else p["else"]:
            h = _apply(h, step, xs)
        return h, ops.sum(h), taken

    return fn


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(program=programs(), seed=st.integers(0, 2**16))
def test_random_program_compiled_equals_eager(program: dict[str, Any], seed: int) -> None:
    fn = _program(program)
    compiled = dualflow.compile(fn, max_traces=16, fallback="error")
    rng = np.random.default_rng(seed)
    taken = set()
    for call in range(6):
        xs = [rng.normal(size=s) for s in program["shapes"]]
        got = compiled(*(dualflow.tensor(x) for x in xs))
        want = fn(*(dualflow.tensor(x) for x in xs))
        assert got[2] == want[2], f"call {call}: branch"
        taken.add(want[2])
        assert_same(got[:2], want[:2], rtol=1e-12, atol=1e-12, msg=f"call {call}")
    stats = compiled.stats()
    assert stats.calls == 6 and stats.eager_fallbacks == 0
    if program["branch"] == "bool":  # a plan serves every call whose path was traced before
        assert stats.traces == len(taken), stats
        assert stats.plan_runs - stats.guard_failures == 6 - len(taken)
    check_all_traces(compiled)
