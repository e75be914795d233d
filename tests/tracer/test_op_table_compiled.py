"""Every op-table entry under ``@dualflow.compile``: outputs and gradients equal eager over three
calls (one trace, two plan runs), and every traced graph verifies, round-trips and interprets alike.
At O0 and with ``passes="exact"`` they are the same bits (also for F-ordered arguments, whose
elementwise results numpy allocates F-ordered); at O2 within the compiled-vs-eager tolerance.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import ops
from dualflow.rule_check import same_bits
from dualflow.tensor.random import Generator
from tests.opinfo import OP_INFOS, OpInfo, Sample
from tests.tracer.helpers import (
    arrays_of,
    assert_same,
    check_all_traces,
    check_interpret_matches_plan,
    tol,
)

SPECIAL = {"assign", "dropout"}  # stateful: covered by their own tests below
INFOS = [info for info in OP_INFOS if info.name not in SPECIAL]


def _positions(sample: Sample) -> tuple[int, ...]:
    if sample.grad is not None:
        return sample.grad
    return tuple(
        i for i, v in enumerate(sample.inputs) if isinstance(v, np.ndarray) and v.dtype.kind == "f"
    )


def _outs(value: Any) -> list[Any]:
    return list(value) if isinstance(value, tuple | list) else [value]


def _make(info: OpInfo, sample: Sample, dtype: Any) -> tuple[Any, list[int], list[int]]:
    """A step ``fn(*array_args)`` plus which args are differentiable and which are arrays."""
    inputs = list(sample.inputs)
    # array inputs become tensor arguments; boolean masks stay static (they decide the output
    # shape, so a mask tensor fails closed by design)
    arrays = [i for i, v in enumerate(inputs) if isinstance(v, np.ndarray) and v.dtype != bool]
    wrt = [i for i in _positions(sample) if info.differentiable and i in arrays]

    def step(*args: Any) -> Any:
        full = list(inputs)
        *tensors, gys = args
        for i, t in zip(arrays, tensors):
            full[i] = t
        outs = _outs(info.fn(*full, **sample.kwargs))
        if not wrt or gys is None:
            return [o.detach() for o in outs]
        diff = [(o, gy) for o, gy in zip(outs, gys) if o.requires_grad]
        grads = dualflow.grad(
            [o for o, _ in diff], [full[i] for i in wrt], [gy for _, gy in diff], allow_unused=True
        )
        return [o.detach() for o in outs], list(grads)

    return step, arrays, wrt


def _args(
    sample: Sample,
    arrays: list[int],
    wrt: list[int],
    dtype: Any,
    scale: float,
    gys: list | None,
    order: str = "C",
) -> tuple:
    tensors = []
    for i in arrays:
        v = sample.inputs[i]
        if v.dtype.kind == "f":
            v = np.asarray(v * scale, dtype, order=order)
        tensors.append(dualflow.tensor(v, dtype=v.dtype, requires_grad=i in wrt))
    return (*tensors, gys)


PARAMS = [pytest.param(i, id=i.name) for i in INFOS]
# (passes, argument memory order, dtype): optimized (the default), unoptimized, and the exact
# pipeline; F-ordered arguments at O0
MODES = [
    pytest.param(passes, order, dtype, id=f"{passes}-{order}-{name}")
    for passes, order, dtypes in (
        ("O2", "C", ("f64", "f32")),
        ("O0", "C", ("f64", "f32")),
        ("O0", "F", ("f32",)),
        ("exact", "C", ("f32",)),
    )
    for name, dtype in (("f64", np.float64), ("f32", np.float32))
    if name in dtypes
]


@pytest.mark.parametrize("passes, order, dtype", MODES)
@pytest.mark.parametrize("info", PARAMS)
def test_compiled_equals_eager(info: OpInfo, passes: str, order: str, dtype: Any) -> None:
    rng = np.random.default_rng(1)
    for sample in info.samples(np.random.default_rng(0)):
        step, arrays, wrt = _make(info, sample, dtype)
        # output gradients: shaped from one plain eager forward
        probe = step(*_args(sample, arrays, wrt, dtype, 1.0, None))
        gys = [
            dualflow.tensor(rng.normal(size=o.shape).astype(o.dtype))
            if o.dtype.kind == "f"
            else None
            for o in probe
        ]
        compiled = dualflow.compile(step, fallback="error", passes=passes)
        for call, scale in enumerate((1.0, 1.0, 1.01)):
            args = _args(sample, arrays, wrt, dtype, scale, gys, order)
            got = compiled(*args)
            want = step(*_args(sample, arrays, wrt, dtype, scale, gys, order))
            msg = f"{info.name}/{sample.name} call {call}"
            if passes == "O2":
                assert_same(got, want, **tol(dtype), msg=msg)
            else:  # the same bits, signed zeros included
                assert_same(got, want, msg=msg)
                for g, w in zip(arrays_of(got), arrays_of(want)):
                    assert same_bits(g, w), msg
        stats = compiled.stats()
        assert stats.plan_runs >= 2, f"{sample.name}: {stats}"
        check_all_traces(compiled)
        check_interpret_matches_plan(compiled, args)


def test_every_entry_is_covered() -> None:
    names = {i.name for i in OP_INFOS}
    assert names >= SPECIAL
    assert {i.name for i in INFOS} | SPECIAL == names


def test_assign_to_captured_state_is_an_update() -> None:
    target = dualflow.tensor(np.zeros((2, 3)))
    compiled = dualflow.compile(lambda v: ops.assign(target, v).detach(), fallback="error")
    rng = np.random.default_rng(0)
    for _ in range(3):
        value = rng.normal(size=(3,))
        out = compiled(dualflow.tensor(value))
        np.testing.assert_array_equal(target.numpy(), np.broadcast_to(value, (2, 3)))
        np.testing.assert_array_equal(out.numpy(), np.broadcast_to(value, (2, 3)))
    assert compiled.stats().plan_runs == 2
    (trace,) = compiled.history
    assert len(trace.graph.updates) == 1 and trace.graph.updates[0][0] is trace.graph.state[0]
    check_all_traces(compiled)
    check_interpret_matches_plan(compiled, (dualflow.tensor(np.ones(3)),))


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_dropout_with_a_captured_generator_equals_eager(dtype: Any) -> None:
    def make() -> Any:
        gen = Generator(5)

        def step(x: Any, gy: Any) -> Any:
            y = ops.dropout(x, 0.4, train=True, generator=gen)
            (gx,) = dualflow.grad(y, x, gy)
            return y.detach(), gx

        return gen, step

    gen_c, step_c = make()
    gen_e, step_e = make()
    compiled = dualflow.compile(step_c, fallback="error")
    rng = np.random.default_rng(0)
    outs = []
    for _ in range(3):
        x, gy = rng.normal(size=(4, 5)).astype(dtype), rng.normal(size=(4, 5)).astype(dtype)
        got = compiled(dualflow.tensor(x, requires_grad=True), dualflow.tensor(gy))
        want = step_e(dualflow.tensor(x, requires_grad=True), dualflow.tensor(gy))
        assert_same(got, want, **tol(dtype))
        outs.append(got[0].numpy() != 0)
    assert compiled.stats().plan_runs == 2
    assert not np.array_equal(outs[1], outs[2]), "the mask must change at every call"
    np.testing.assert_array_equal(gen_c.state.numpy(), gen_e.state.numpy())
    check_all_traces(compiled)
