"""``lstm_scan_grad``, the LSTM backward recurrence computing its factors from the forward's saved
gates and cells: against the composition it replaced (whole-sequence factors, then the linear
recurrence; float64), with any of its gradients absent, to second order against finite
differences, compiled equal to eager bit for bit in nn.LSTM training steps, and clear errors."""

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
from dualflow.ops.dispatch import apply
from dualflow.ops.registry import OPS
from tests.op_entries.recurrent import _grad_ref, _lstm_ref, _saved
from tests.tracer.helpers import assert_same

GIVEN = [(a, b, c) for a in (False, True) for b in (False, True) for c in (False, True)]


def _grads(rng: np.random.Generator, sizes: tuple, given: tuple) -> tuple:
    steps, n, hidden = sizes
    shapes = (sizes, sizes, (steps, n, 4 * hidden))
    return tuple(rng.normal(size=s) if g else None for s, g in zip(shapes, given))


def _old_composition(xw, h0, c0, w, ghs, gcs, gacts) -> tuple:
    """lstm_scan's gradients as its backward computed them before (numpy, float64): the gates'
    slopes times gacts as ``base``, whole-sequence factors, the linear recurrence, the GEMMs."""
    hs, cs, acts = _lstm_ref(xw, h0, c0, w)
    steps, n, hidden = cs.shape
    i, f, g, o = np.split(acts, 4, axis=-1)
    slopes = np.concatenate([i * (1 - i), f * (1 - f), 1 - g * g, o * (1 - o)], -1)
    base = gacts * slopes
    dg, _, dc = _grad_ref(acts, cs, c0, w, ghs, gcs, base)
    h_prev = np.concatenate([h0[None], hs[:-1]]).reshape(steps * n, hidden)
    gw = dg.reshape(steps * n, 4 * hidden).T @ h_prev
    return dg, dg[0] @ w, dc[0] * f[0], gw


def _scan_inputs(rng: np.random.Generator, sizes: tuple) -> list[np.ndarray]:
    steps, n, hidden = sizes
    return [
        rng.normal(size=(steps, n, 4 * hidden)),
        rng.normal(scale=0.5, size=(n, hidden)),
        rng.normal(scale=0.5, size=(n, hidden)),
        rng.normal(scale=0.5, size=(4 * hidden, hidden)),
    ]


@pytest.mark.parametrize("given", GIVEN, ids=lambda g: "".join("x" if v else "-" for v in g))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_each_set_of_gradients_equals_the_reference(given: tuple, dtype: str) -> None:
    rng = np.random.default_rng(0)
    sizes = (4, 3, 18)  # a 16-unit tile and a remainder
    saved, grads = _saved(rng, *sizes), _grads(rng, sizes, given)
    cast = [None if a is None else a.astype(dtype) for a in (*saved, *grads)]
    got = ops.lstm_scan_grad(*cast)
    want = _grad_ref(*saved, *grads)
    tol = 1e-12 if dtype == "float64" else 1e-5
    for a, b in zip(got, want):
        assert a.dtype == dtype
        np.testing.assert_allclose(a.numpy(), b, rtol=tol, atol=tol)


@pytest.mark.parametrize("given", GIVEN[1:], ids=lambda g: "".join("x" if v else "-" for v in g))
def test_compiled_equals_eager_with_gradients_absent(given: tuple) -> None:
    rng = np.random.default_rng(1)
    sizes = (5, 2, 3)
    arrays = [a for a in (*_saved(rng, *sizes), *_grads(rng, sizes, given)) if a is not None]
    tensors = [dualflow.tensor(a.astype(np.float32)) for a in arrays]

    where = list(np.cumsum(given) + 3)  # each gradient's position among the arguments

    def f(*xs: Any) -> Any:
        grads = [xs[k] if g else None for g, k in zip(given, where)]
        return ops.lstm_scan_grad(*xs[:4], *grads)

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
    outs = ops.lstm_scan(*inputs)
    cots = [rng.normal(size=o.shape) if u else None for o, u in zip(outs, used)]
    loss = sum((o * dualflow.tensor(c)).sum() for o, c in zip(outs, cots) if c is not None)
    loss.backward()
    zeros = [np.zeros(o.shape) if c is None else c for o, c in zip(outs, cots)]
    want = _old_composition(*[t.numpy() for t in inputs], *zeros)
    for t, w in zip(inputs, want):
        np.testing.assert_allclose(t.grad.numpy(), w, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("outputs", [(0,), (0, 1), (0, 1, 2)], ids=["hs", "hs,cs", "all"])
def test_scan_double_backward_against_finite_differences(outputs: tuple) -> None:
    inputs = _scan_inputs(np.random.default_rng(2), (3, 2, 2))

    def f(*xs: Any) -> tuple:
        outs = ops.lstm_scan(*xs)
        return tuple(outs[k] for k in outputs)

    check_backward(f, inputs)
    check_double_backward(f, inputs)


def test_grad_op_double_backward_with_gc_only() -> None:
    # the op table checks gh alone and all three; gc alone reaches the adjoint's lc only
    rng = np.random.default_rng(3)
    saved = list(_saved(rng, 3, 2, 2))
    gc = rng.normal(size=(3, 2, 2))

    def f(acts: Any, cs: Any, c0: Any, w: Any, g: Any) -> Any:
        return ops.lstm_scan_grad(acts, cs, c0, w, gc=g)

    check_double_backward(f, [*saved, gc])


class _Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm, self.head = nn.LSTM(6, 20, 2), nn.Linear(20, 3)

    def forward(self, x: Any, use_state: bool) -> Any:
        out, (h, c) = self.lstm(x)
        loss = (self.head(out) ** 2).mean()
        return loss + (h * c).sum() if use_state else loss


def _train(use_state: bool, compiled: bool) -> tuple[list, list, Any]:
    dualflow.random.seed(0)
    model = _Model()
    opt = optim.Adam(model.parameters(), lr=1e-2)
    x = dualflow.tensor(np.random.default_rng(4).normal(size=(7, 3, 6)).astype(np.float32))

    def step() -> Any:
        opt.zero_grad()
        loss = model(x, use_state)
        loss.backward()
        opt.step()
        return loss

    fn = dualflow.compile(step) if compiled else step
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "dualflow.compile: ", RuntimeWarning)
        losses = [fn().numpy().copy() for _ in range(4)]
    return losses, [v.numpy().copy() for v in model.state_dict().values()], fn


@pytest.mark.parametrize("use_state", [False, True], ids=["output", "output,h_n,c_n"])
def test_lstm_train_step_compiled_equals_eager(use_state: bool) -> None:
    eager_losses, eager_state, _ = _train(use_state, compiled=False)
    losses, state, fn = _train(use_state, compiled=True)
    assert_same(losses, eager_losses, msg="losses")
    assert_same(state, eager_state, msg="parameters")
    nodes = [node for node in fn.history[-1].graph.nodes if node.op == "lstm_scan_grad"]
    assert len(nodes) == 2
    # no zeros for absent gradients: a layer's output feeds gh only (gc too where c_n is used),
    # and no layer's gates get a gradient
    assert {node.attrs["given"] for node in nodes} == {(True, use_state, False)}
    assert all(len(node.inputs) == 5 + use_state for node in nodes)
    assert fn.stats().eager_fallbacks == 0


def test_gates_output_gradient_compiled_equals_eager() -> None:
    rng = np.random.default_rng(5)
    params = [dualflow.tensor(a.astype(np.float32), requires_grad=True)
              for a in _scan_inputs(rng, (6, 2, 17))]  # fmt: skip

    def step() -> Any:
        for p in params:
            p.grad = None
        hs, _, acts = ops.lstm_scan(*params)
        loss = (hs * hs).sum() + (acts * acts).mean()
        loss.backward()
        return loss, *[p.grad for p in params]

    eager = [t.numpy().copy() for t in step()]
    compiled = dualflow.compile(step)
    for _ in range(2):
        assert_same([t.numpy().copy() for t in compiled()], eager)
    assert compiled.stats().plan_runs == 1 and compiled.stats().eager_fallbacks == 0


def test_bad_shapes_are_shape_errors() -> None:
    acts, cs, c0, w = _saved(np.random.default_rng(6), 3, 2, 4)
    with pytest.raises(ShapeError, match=r"lstm_scan_grad: .*cs \(3, 2, 5\)"):
        ops.lstm_scan_grad(acts, np.zeros((3, 2, 5)), c0, w, cs)
    with pytest.raises(ShapeError, match=r"lstm_scan_grad: .*gh \(3, 2, 3\)"):
        ops.lstm_scan_grad(acts, cs, c0, w, np.zeros((3, 2, 3)))
    with pytest.raises(ShapeError, match=r"lstm_scan_grad: .*base \(3, 2, 4\)"):
        ops.lstm_scan_grad(acts, cs, c0, w, base=np.zeros((3, 2, 4)))
    with pytest.raises(ShapeError, match="lstm_scan_grad: given"):
        apply(OPS["lstm_scan_grad"], acts, cs, c0, w, given=(True, True, False))
