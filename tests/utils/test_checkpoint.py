"""Activation checkpointing: gradients equal the plain call's (dropout included, first and second
order), the segment's saved values are dropped until backward, and compiled equals eager."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dualflow
from dualflow import nn
from dualflow.errors import RecomputeError
from dualflow.utils.checkpoint import _Pending, checkpoint, checkpoint_sequential
from tests.nn.compiled import assert_compiled_equals_eager


def _net() -> nn.Sequential:
    dualflow.manual_seed(0)
    return nn.Sequential(
        nn.Linear(4, 8), nn.Tanh(), nn.Dropout(0.5), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)
    )


def _grads(net: nn.Module, x: dualflow.Tensor, segments: int | None) -> tuple:
    dualflow.manual_seed(1)
    y = net(x) if segments is None else checkpoint_sequential(net, segments, x)
    loss = (y**2).sum()
    loss.backward()
    grads = [p.grad.numpy().copy() for p in net.parameters()] + [x.grad.numpy().copy()]
    return loss.item(), grads, dualflow.random.default_generator().state.tolist()


@pytest.mark.parametrize("segments", [1, 2, 3, 6])
def test_checkpoint_sequential_gradients_are_bit_identical(segments: int) -> None:
    net = _net()
    x = dualflow.randn(5, 4, requires_grad=True)
    plain = _grads(net, x, None)
    for p in [*net.parameters(), x]:
        p.grad = None
    checked = _grads(net, x, segments)
    assert plain[0] == checked[0]
    for a, b in zip(plain[1], checked[1]):
        np.testing.assert_array_equal(a, b)
    assert plain[2] == checked[2]  # the re-run left the generator where the forward did


def test_dropout_mask_is_redrawn_identically_and_without_rng_state_differs() -> None:
    x = dualflow.ones(200, requires_grad=True)
    dualflow.manual_seed(3)
    y = checkpoint(lambda t: nn.functional.dropout(t, 0.5) * 2.0, x)
    dualflow.rand(7)  # the generator moves on before backward
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), y.numpy())  # d(2 dropout(x))/dx = y
    x.grad = None
    dualflow.manual_seed(3)
    y = checkpoint(lambda t: nn.functional.dropout(t, 0.5), x, preserve_rng_state=False)
    y.sum().backward()
    assert not np.array_equal(x.grad.numpy(), y.numpy())  # another mask: PyTorch's meaning


def test_saved_values_are_dropped_until_backward() -> None:
    x = dualflow.randn(3, 3, requires_grad=True)
    y = checkpoint(lambda t: (t.exp() * t.sin()).sum(), x)
    node = y.creator.edges[0][0]  # the multiply under the sum
    assert node.op.name == "multiply" and isinstance(node.saved_inputs, _Pending)
    y.backward()
    assert node.released


@settings(max_examples=15, deadline=None)
@given(
    st.lists(st.sampled_from(["exp", "sin", "tanh", "square", "sigmoid"]), min_size=1, max_size=5)
)
def test_double_backward_matches_plain(chain: list[str]) -> None:
    def fn(t: dualflow.Tensor) -> dualflow.Tensor:
        for name in chain:
            t = t * t if name == "square" else getattr(t, name)()
        return t.sum()

    x = dualflow.tensor([0.3, -0.7, 0.4], requires_grad=True)
    results = []
    for f in (fn, lambda t: checkpoint(fn, t)):
        (g,) = dualflow.grad(f(x), x, create_graph=True)
        (h,) = dualflow.grad((g * g).sum(), x)
        results.append((g.numpy(), h.numpy()))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-5, atol=1e-6)


def test_grad_reaches_parameters_closed_over_without_input_grad() -> None:
    lin = nn.Linear(3, 1)
    x = dualflow.ones(2, 3)  # no input requires grad: PyTorch's reentrant form would give none
    out = checkpoint(lin, x).sum()
    (gw,) = dualflow.grad(out, lin.weight)
    np.testing.assert_array_equal(gw.numpy(), np.full((1, 3), 2.0, np.float32))


def test_a_segment_that_recomputes_differently_is_a_typed_error() -> None:
    calls = []

    def fn(t: dualflow.Tensor) -> dualflow.Tensor:
        calls.append(1)
        return (t.exp() if len(calls) == 1 else t.sin().cos()).sum()

    x = dualflow.ones(2, requires_grad=True)
    with pytest.raises(RecomputeError, match="other ops"):
        checkpoint(fn, x).backward()


def test_no_grad_is_the_plain_call_and_bad_segments_are_rejected() -> None:
    with dualflow.no_grad():
        y = checkpoint(lambda t: t * 2, dualflow.ones(2, requires_grad=True))
    assert not y.requires_grad
    with pytest.raises(ValueError, match="segments"):
        checkpoint_sequential(_net(), 7, dualflow.ones(1, 4))


def test_memory_is_released_after_forward() -> None:
    x = dualflow.randn(256, 256, requires_grad=True)
    gc.collect()

    def chain(t: dualflow.Tensor) -> dualflow.Tensor:
        for _ in range(6):
            t = t.tanh()
        return t

    plain, checked = chain(x), checkpoint(chain, x)
    # the plain tape keeps six 256x256 outputs; the checkpointed one keeps none of them
    assert plain.creator.saved_outputs[0] is not None
    assert isinstance(checked.creator.saved_outputs, _Pending)


def test_the_recompute_uses_the_forwards_autocast_setting() -> None:
    lin = nn.Linear(4, 4)
    x = dualflow.randn(3, 4, requires_grad=True)
    grads = []
    for wrap in (lambda f, t: f(t), checkpoint):
        with dualflow.autocast("cpu", dtype=dualflow.float16):
            y = wrap(lambda t: lin(t).relu() * 2.0, x)
        (y.float() ** 2).sum().backward()  # backward outside the context, as usual
        grads.append((x.grad.numpy().copy(), lin.weight.grad.numpy().copy()))
        x.grad = lin.weight.grad = lin.bias.grad = None
    assert y.dtype == dualflow.float16
    for a, b in zip(*grads):
        np.testing.assert_array_equal(a, b)


def test_nested_checkpoints_and_tuple_outputs() -> None:
    x = dualflow.tensor([0.2, -0.4, 0.9], requires_grad=True)

    inner_calls = []

    def inner(t):
        inner_calls.append(1)
        return t.tanh() * t, t.sin()

    def outer(t):
        a, b = checkpoint(inner, t.exp())
        return (a * b).sum()

    def plain(t):
        a, b = inner(t.exp())
        return (a * b).sum()

    calls = []
    y = checkpoint(lambda t: calls.append(1) or outer(t), x)
    assert calls == inner_calls == [1]  # nothing was recomputed before backward
    (g,) = dualflow.grad(y, x)
    (g0,) = dualflow.grad(plain(x), x)
    np.testing.assert_array_equal(g.numpy(), g0.numpy())
    assert calls == [1, 1]


class _Checked(nn.Module):
    def __init__(self, segments: int) -> None:
        super().__init__()
        self.net, self.segments = _net(), segments

    def forward(self, x: dualflow.Tensor) -> dualflow.Tensor:
        return checkpoint_sequential(self.net, self.segments, x)


@pytest.mark.parametrize("segments", [2, 3])
def test_compiled_training_step_equals_eager(segments: int) -> None:
    x = dualflow.tensor(np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32))
    assert_compiled_equals_eager(lambda: _Checked(segments), [x])


def test_compiled_double_backward_through_a_checkpoint_equals_eager() -> None:
    dualflow.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    params = list(net.parameters())[:3]  # the last bias does not reach the input's gradient
    x = dualflow.tensor(np.random.default_rng(0).normal(size=(5, 4)), dtype="float32")
    x.requires_grad_(True)

    def penalty(x: dualflow.Tensor, checked: bool) -> list:
        out = checkpoint(net, x) if checked else net(x)
        (g,) = dualflow.grad(out.sum(), [x], create_graph=True)
        pen = (g * g).sum()  # a gradient penalty: backward through the segment's backward
        return [pen, *dualflow.grad(pen, params)]

    want = [t.numpy() for t in penalty(x, False)]
    compiled = dualflow.compile(lambda x: penalty(x, True))
    for _ in range(2):
        for got, expected in zip(compiled(x), want):
            np.testing.assert_array_equal(got.numpy(), expected)
        for got, expected in zip(penalty(x, True), want):
            np.testing.assert_array_equal(got.numpy(), expected)
    assert compiled.stats().plan_runs >= 1
