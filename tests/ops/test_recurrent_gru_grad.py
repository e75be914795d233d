"""``gru_scan_grad``, the GRU backward recurrence computing its factors from the forward's saved
gates, hidden projections and states: against the composition it replaced (whole-sequence
factors, then the linear recurrence; float64), with its gradients absent, to second order against
finite differences, compiled equal to eager bit for bit in nn.GRU training steps, and clear
errors."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dualflow
import tests.opinfo  # noqa: F401 - the op table first: its entries import it
from dualflow import nn, ops, optim
from dualflow.errors import ShapeError
from dualflow.gradcheck import check_backward, check_double_backward
from tests.op_entries.recurrent import _gru_grad_ref, _gru_ref, _gru_saved
from tests.tracer.helpers import assert_same

GIVEN = [(False, False), (True, False), (False, True), (True, True)]


def _ids(given: tuple) -> str:
    return "".join("x" if v else "-" for v in given)


def _grads(rng: np.random.Generator, sizes: tuple, given: tuple) -> tuple:
    steps, n, hidden = sizes
    shapes = ((steps, n, hidden), (steps, n, 3 * hidden))
    return tuple(rng.normal(size=s) if g else None for s, g in zip(shapes, given))


def _old_composition(xw, h0, w, b, ghs, ggates, ghn) -> tuple:
    """gru_scan's gradients as its backward computed them before (numpy, float64)."""
    hs, gates, hn = _gru_ref(xw, h0, w, b)
    steps, n, hidden = hs.shape
    r, z, g_n = np.split(gates, 3, axis=-1)
    gr, gz, gn = np.split(ggates, 3, axis=-1)
    slope_n, slope_r, slope_z = 1 - g_n * g_n, r * (1 - r), z * (1 - z)
    from_n = gn * slope_n
    base = np.concatenate([(from_n * hn + gr) * slope_r, gz * slope_z, from_n * r + ghn], -1)
    dg, dh = _gru_grad_ref(gates, hn, hs, h0, w, ghs, base)
    dx = np.concatenate([dg[..., : 2 * hidden], dh * (1 - z) * slope_n + from_n], -1)
    h_prev = np.concatenate([h0[None], hs[:-1]]).reshape(steps * n, hidden)
    rows = dg.reshape(steps * n, 3 * hidden)
    return dx, dh[0] * z[0] + dg[0] @ w, rows.T @ h_prev, rows.sum(0)


def _scan_inputs(rng: np.random.Generator, sizes: tuple) -> list[np.ndarray]:
    steps, n, hidden = sizes
    return [
        rng.normal(size=(steps, n, 3 * hidden)),
        rng.normal(scale=0.5, size=(n, hidden)),
        rng.normal(scale=0.5, size=(3 * hidden, hidden)),
        rng.normal(scale=0.5, size=3 * hidden),
    ]


@pytest.mark.parametrize("given", GIVEN, ids=_ids)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_each_set_of_gradients_equals_the_reference(given: tuple, dtype: str) -> None:
    rng = np.random.default_rng(0)
    sizes = (4, 3, 18)  # a 16-unit tile and a remainder
    saved, grads = _gru_saved(rng, *sizes), _grads(rng, sizes, given)
    got = ops.gru_scan_grad(*[None if a is None else a.astype(dtype) for a in (*saved, *grads)])
    tol = 1e-12 if dtype == "float64" else 1e-5
    for a, b in zip(got, _gru_grad_ref(*saved, *grads)):
        assert a.dtype == dtype
        np.testing.assert_allclose(a.numpy(), b, rtol=tol, atol=tol)


@pytest.mark.parametrize("given", GIVEN[1:], ids=_ids)
def test_compiled_equals_eager_with_gradients_absent(given: tuple) -> None:
    rng = np.random.default_rng(1)
    sizes = (5, 2, 3)
    arrays = [a for a in (*_gru_saved(rng, *sizes), *_grads(rng, sizes, given)) if a is not None]
    tensors = [dualflow.tensor(a.astype(np.float32)) for a in arrays]
    where = list(np.cumsum(given) + 4)  # each gradient's position among the arguments

    def f(*xs: Any) -> Any:
        return ops.gru_scan_grad(*xs[:5], *[xs[k] if g else None for g, k in zip(given, where)])

    eager = [t.numpy() for t in f(*tensors)]
    compiled = dualflow.compile(f)
    for _ in range(2):  # the trace, then its plan
        assert_same([t.numpy() for t in compiled(*tensors)], eager)
    assert compiled.stats().plan_runs == 1 and compiled.stats().eager_fallbacks == 0


@settings(max_examples=25, deadline=None)
@given(
    steps=st.integers(1, 4),
    n=st.integers(1, 3),
    hidden=st.integers(1, 5),
    used=st.tuples(st.booleans(), st.booleans(), st.booleans()).filter(any),
    seed=st.integers(0, 2**16),
)
def test_scan_gradients_equal_the_old_composition(
    steps: int, n: int, hidden: int, used: tuple, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    inputs = [dualflow.tensor(a, requires_grad=True) for a in _scan_inputs(rng, (steps, n, hidden))]
    outs = ops.gru_scan(*inputs)
    cots = [rng.normal(size=o.shape) if u else np.zeros(o.shape) for o, u in zip(outs, used)]
    loss = sum((o * dualflow.tensor(c)).sum() for o, c, u in zip(outs, cots, used) if u)
    loss.backward()
    want = _old_composition(*[t.numpy() for t in inputs], *cots)
    for t, w in zip(inputs, want):
        np.testing.assert_allclose(t.grad.numpy(), w, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("outputs", [(0,), (0, 2), (0, 1, 2)], ids=["hs", "hs,hn", "all"])
def test_scan_double_backward_against_finite_differences(outputs: tuple) -> None:
    inputs = _scan_inputs(np.random.default_rng(2), (3, 2, 2))

    def f(*xs: Any) -> tuple:
        outs = ops.gru_scan(*xs)
        return tuple(outs[k] for k in outputs)

    check_backward(f, inputs)
    check_double_backward(f, inputs)


def test_grad_op_double_backward_with_base_only() -> None:
    # the op table checks gh alone and both; base alone reaches the adjoint's lg only
    rng = np.random.default_rng(3)
    saved = list(_gru_saved(rng, 3, 2, 2))
    base = rng.normal(size=(3, 2, 6))

    def f(gates: Any, hn: Any, hs: Any, h0: Any, w: Any, b: Any) -> Any:
        return ops.gru_scan_grad(gates, hn, hs, h0, w, base=b)

    check_double_backward(f, [*saved, base])


def _train(compiled: bool) -> tuple[list, list, Any]:
    dualflow.random.seed(0)
    gru, head = nn.GRU(6, 20, 2), nn.Linear(20, 3)
    params = [*gru.parameters(), *head.parameters()]
    opt = optim.Adam(params, lr=1e-2)
    x = dualflow.tensor(np.random.default_rng(4).normal(size=(7, 3, 6)).astype(np.float32))

    def step() -> Any:
        opt.zero_grad()
        out, _ = gru(x)
        loss = (head(out) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    fn = dualflow.compile(step) if compiled else step
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "dualflow.compile: ", RuntimeWarning)
        losses = [fn().numpy().copy() for _ in range(4)]
    return losses, [p.numpy().copy() for p in params], fn


def test_gru_train_step_compiled_equals_eager() -> None:
    eager_losses, eager_params, _ = _train(compiled=False)
    losses, params, fn = _train(compiled=True)
    assert_same(losses, eager_losses, msg="losses")
    assert_same(params, eager_params, msg="parameters")
    nodes = [node for node in fn.history[-1].graph.nodes if node.op == "gru_scan_grad"]
    # no zeros for absent gradients: each layer's output feeds gh only
    assert len(nodes) == 2 and all(node.attrs["given"] == (True, False) for node in nodes)
    assert all(len(node.inputs) == 6 for node in nodes)
    assert fn.stats().eager_fallbacks == 0


def test_bad_shapes_are_shape_errors() -> None:
    gates, hn, hs, h0, w = _gru_saved(np.random.default_rng(6), 3, 2, 4)
    with pytest.raises(ShapeError, match=r"gru_scan_grad: .*hn \(3, 2, 5\)"):
        ops.gru_scan_grad(gates, np.zeros((3, 2, 5)), hs, h0, w)
    with pytest.raises(ShapeError, match=r"gru_scan_grad: .*gh \(3, 2, 3\)"):
        ops.gru_scan_grad(gates, hn, hs, h0, w, np.zeros((3, 2, 3)))
    with pytest.raises(ShapeError, match=r"gru_scan_grad: .*base \(3, 2, 4\)"):
        ops.gru_scan_grad(gates, hn, hs, h0, w, base=np.zeros((3, 2, 4)))
