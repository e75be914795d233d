"""The op table drives forward mode: every registered op has a jvp rule, a listed double-vjp
fallback or a listed reason to carry no tangent; every differentiable entry's forward-mode
tangent equals the double-vjp identity and central differences in float64, eager and compiled.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import func
from dualflow.autograd import grad as engine_grad
from dualflow.func import jvp_rules
from dualflow.ops import OPS
from tests.opinfo import OP_INFOS, OpInfo, Sample

DIFFERENTIABLE = [i for i in OP_INFOS if i.differentiable]


def test_every_op_has_a_rule_a_fallback_or_no_tangent() -> None:
    tables = (set(jvp_rules.RULES), set(jvp_rules.FALLBACK), set(jvp_rules.NO_TANGENT))
    for name, op in OPS.items():
        homes = [t for t in tables if name in t]
        assert len(homes) == 1, f"{name}: in {len(homes)} of RULES/FALLBACK/NO_TANGENT"
        assert op.differentiable == (name not in jvp_rules.NO_TANGENT), name
        fallback = jvp_rules.double_vjp if name in jvp_rules.FALLBACK else None
        assert op.jvp is jvp_rules.RULES.get(name, fallback), name  # the OpDef's jvp fact
    assert all(isinstance(reason, str) and reason for reason in jvp_rules.FALLBACK.values())
    assert not (set(jvp_rules.RULES) | set(jvp_rules.FALLBACK)) - set(OPS)


def _grad_fn(info: OpInfo, sample: Sample) -> tuple[Any, list[np.ndarray]]:
    positions = sample.grad
    if positions is None:
        positions = tuple(
            i
            for i, v in enumerate(sample.inputs)
            if isinstance(v, np.ndarray) and v.dtype.kind == "f"
        )

    def fn(*values: Any) -> Any:
        args = list(sample.inputs)
        for p, v in zip(positions, values):
            args[p] = v
        return info.fn(*args, **sample.kwargs)

    return fn, [np.asarray(sample.inputs[p], np.float64) for p in positions]


def _floats(value: Any) -> list:
    values = list(value) if isinstance(value, (tuple, list)) else [value]
    return [v for v in values if v.dtype.kind == "f"]


def _double_vjp(fn: Any, xs: list, ts: list) -> list[np.ndarray]:
    leaves = [x.detach().requires_grad_(True) for x in xs]
    outs = _floats(fn(*leaves))
    us = [dualflow.zeros_like(o).requires_grad_(True) for o in outs]
    gs = engine_grad(outs, leaves, us, create_graph=True, allow_unused=True, materialize_grads=True)
    live = [(g, t) for g, t in zip(gs, ts) if g.requires_grad]
    if not live:
        return [np.zeros(o.shape) for o in outs]
    pushed = engine_grad(
        [g for g, _ in live], us, [t for _, t in live], allow_unused=True, materialize_grads=True
    )
    return [p.numpy() for p in pushed]


def _central(fn: Any, xs: list, ts: list, eps: float) -> list[np.ndarray]:
    plus = _floats(fn(*[x + eps * t for x, t in zip(xs, ts)]))
    minus = _floats(fn(*[x - eps * t for x, t in zip(xs, ts)]))
    return [(p.numpy() - m.numpy()) / (2 * eps) for p, m in zip(plus, minus)]


def _case(info: OpInfo, sample: Sample) -> tuple[Any, list, list]:
    fn, arrays = _grad_fn(info, sample)
    rng = np.random.default_rng(5)
    xs = [dualflow.tensor(a) for a in arrays]
    ts = [dualflow.tensor(rng.normal(size=a.shape)) for a in arrays]
    return fn, xs, ts


@pytest.mark.parametrize("info", DIFFERENTIABLE, ids=lambda i: i.name)
def test_forward_mode_matches_double_vjp_and_finite_differences(info: OpInfo) -> None:
    for sample in info.samples(np.random.default_rng(0)):
        fn, xs, ts = _case(info, sample)
        _, tangent = func.jvp(fn, tuple(xs), tuple(ts))
        got = [t.numpy() for t in _floats(tangent)]
        exact = _double_vjp(fn, xs, ts)
        assert len(got) == len(exact), sample.name
        rtol, atol = info.grad_tol
        for g, e, c in zip(got, exact, _central(fn, xs, ts, info.eps)):
            assert g.dtype == np.float64
            np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12, err_msg=sample.name)
            np.testing.assert_allclose(g, c, rtol=rtol * 10, atol=atol * 10, err_msg=sample.name)


@pytest.mark.parametrize("info", DIFFERENTIABLE, ids=lambda i: i.name)
def test_compiled_forward_mode_equals_eager(info: OpInfo) -> None:
    sample = info.samples(np.random.default_rng(0))[0]
    fn, xs, ts = _case(info, sample)

    def tangent_of(xs: list, ts: list) -> list:
        return _floats(func.jvp(fn, tuple(xs), tuple(ts))[1])

    compiled = dualflow.compile(tangent_of, fallback="error")
    want = tangent_of(xs, ts)
    for _ in range(2):
        got = compiled(xs, ts)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12, atol=1e-14)
