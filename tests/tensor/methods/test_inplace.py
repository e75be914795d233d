"""In-place methods: PyTorch's autograd rules, ``.data``/``detach()`` aliasing, and compiled
functions that write through them (state updates equal the eager ones, views fail closed).
"""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import nn, ops
from dualflow.errors import DTypeError, TracingError


def _w() -> dualflow.Tensor:
    return dualflow.tensor([1.0, 2.0, 3.0], requires_grad=True)


def test_inplace_on_a_leaf_that_requires_grad_raises_outside_no_grad() -> None:
    w = _w()
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad") as info:
        w.add_(1.0)
    assert "test_inplace.py" in str(info.value)  # the user's line
    assert w.tolist() == [1.0, 2.0, 3.0]  # nothing written
    with dualflow.no_grad():
        assert w.mul_(2.0) is w
    assert w.tolist() == [2.0, 4.0, 6.0] and w.requires_grad


def test_inplace_into_a_graph_or_of_a_grad_value_raises_instead_of_losing_gradients() -> None:
    w = _w()
    h = w * 2.0
    with pytest.raises(RuntimeError, match="part of an autograd graph"):
        h.relu_()
    buffer = dualflow.tensor([0.0, 0.0, 0.0])
    with pytest.raises(RuntimeError, match="would drop its gradient"):
        buffer.copy_(h)
    buffer.data.copy_(h)  # through .data: values only, as in PyTorch
    assert buffer.tolist() == [2.0, 4.0, 6.0]


def test_data_shares_the_array_without_history() -> None:
    w = _w()
    d = w.data
    assert d is not w and not d.requires_grad and d.is_leaf
    d.mul_(10.0)
    d[0] = -1.0
    assert w.tolist() == [-1.0, 20.0, 30.0]
    (w * w).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [-2.0, 40.0, 60.0])


def test_detach_shares_the_array_as_in_pytorch() -> None:
    x = dualflow.tensor([1.0, 2.0])
    x.detach().zero_()
    assert x.tolist() == [0.0, 0.0]


def test_data_setter_rebinds_eagerly_and_fails_closed_when_compiled() -> None:
    w = _w()
    w.data = dualflow.tensor([5.0, 6.0])
    assert w.tolist() == [5.0, 6.0] and w.requires_grad

    def replace(x):
        w.data = x
        return x * 1

    with pytest.raises(TracingError, match=r"\.data"):
        dualflow.compile(replace, fallback="error")(dualflow.tensor([1.0, 1.0]))


def test_arithmetic_inplace_keeps_the_dtype_kind_as_pytorch() -> None:
    counts = dualflow.tensor([1, 2])
    with pytest.raises(DTypeError, match="can't be cast"):
        counts.add_(0.5)
    counts.fill_(7.9)  # fill_ casts, as PyTorch's does
    assert counts.tolist() == [7, 7]


def _manual_sgd_step(model: nn.Module, x, y, via_data: bool):
    for p in model.params():
        p.grad = None
    loss = ops.mean_squared_error(model(x), y)
    loss.backward()
    if via_data:  # the PyTorch word-language-model idiom
        for p in model.params():
            p.data.add_(p.grad, alpha=-0.1)
    else:
        with dualflow.no_grad():
            for p in model.params():
                p.sub_(p.grad * 0.1)
    return loss


@pytest.mark.parametrize("via_data", [True, False], ids=["p.data.add_", "no_grad-p.sub_"])
def test_compiled_manual_sgd_equals_eager(via_data: bool) -> None:
    rng = np.random.default_rng(0)
    data = [
        (
            dualflow.tensor(rng.normal(size=(4, 3)).astype(np.float32)),
            dualflow.tensor(rng.normal(size=(4, 2)).astype(np.float32)),
        )
        for _ in range(4)
    ]
    states = []
    for compiled in (False, True):
        dualflow.random.seed(0)
        model = nn.Linear(3, 2)

        def step(x, y, model=model):
            return _manual_sgd_step(model, x, y, via_data)

        fn = dualflow.compile(step, fallback="error") if compiled else step
        losses = [float(fn(x, y)) for x, y in data]
        states.append((losses, [p.numpy().copy() for p in model.params()], fn))
    (eager_losses, eager_params, _), (losses, params, fn) = states
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-6)
    for got, want in zip(params, eager_params):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert fn.stats().plan_runs >= 2  # the trace is reused, not retraced every step


def test_compiled_write_through_data_rebinds_every_alias() -> None:
    w = dualflow.tensor([1.0, 2.0])

    def fn(scale):
        d = w.data
        before = d.clone()  # a real copy: it must not see the write below
        d.mul_(scale)
        return before, d * 2.0, w * 2.0

    eager = [t.numpy().copy() for t in fn(dualflow.tensor(3.0))]
    w.data.copy_(dualflow.tensor([1.0, 2.0]))
    compiled = dualflow.compile(fn, fallback="error")
    for _ in range(2):
        w.data.copy_(dualflow.tensor([1.0, 2.0]))
        got = [t.numpy() for t in compiled(dualflow.tensor(3.0))]
        for g, e in zip(got, eager):
            np.testing.assert_array_equal(g, e)
        assert w.tolist() == [3.0, 6.0]


def test_inplace_into_a_view_works_eagerly_and_fails_closed_when_compiled() -> None:
    x = dualflow.tensor([[1.0, 2.0], [3.0, 4.0]])
    x.view(-1)[1:].zero_()
    assert x.tolist() == [[1.0, 0.0], [0.0, 0.0]]

    def fn(y):
        y.view(-1).fill_(1.0)
        return y * 1

    with pytest.raises(TracingError, match="view"):
        dualflow.compile(fn, fallback="error")(dualflow.tensor([[1.0, 2.0]]))


def test_random_fills_follow_the_seed_eagerly_and_compiled() -> None:
    def draw(x):
        return x.normal_(1.0, 0.5) * 1, x.uniform_(-2.0, 2.0) * 1

    results = []
    for fn in (draw, dualflow.compile(draw, fallback="error")):
        dualflow.random.seed(7)
        results.append([t.numpy() for _ in range(2) for t in fn(dualflow.ops.zeros(2000))])
    for got, want in zip(*results):
        np.testing.assert_array_equal(got, want)
    normal, uniform = results[0][0], results[0][1]
    assert abs(normal.mean() - 1.0) < 0.05 and abs(normal.std() - 0.5) < 0.05
    assert uniform.min() >= -2.0 and uniform.max() < 2.0 and abs(uniform.mean()) < 0.1
    assert not np.array_equal(results[0][0], results[0][2])  # the generator advanced


def test_setitem_forms() -> None:
    x = dualflow.ops.zeros((3, 4))
    x[0] = 1.0
    x[:, 1] = dualflow.tensor([5.0, 6.0, 7.0])
    x[x > 5.5] = -1.0
    x[dualflow.tensor([2, 2])] += 1.0  # a repeated index is written once (PyTorch: one of them)
    assert x.tolist() == [
        [1.0, 5.0, 1.0, 1.0],
        [0.0, -1.0, 0.0, 0.0],
        [1.0, 0.0, 1.0, 1.0],
    ]
