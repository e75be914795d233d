"""The eager backward engine: accumulation, broadcasting, grad modes, retain_graph, grad()."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import ops
from dualflow.autograd import engine
from dualflow.autograd.eager import EAGER
from dualflow.errors import DTypeError, ShapeError
from dualflow.ops.dispatch import interpreting
from dualflow.tensor.tape import GraphReleasedError


def _leaf(values: Any, dtype: Any = np.float64) -> dualflow.Tensor:
    return dualflow.tensor(np.asarray(values, dtype), requires_grad=True)


class CountingInterpreter:
    """Runs every op eagerly and counts the op names it sees."""

    hooks = None  # not a tracing interpreter (dispatch.tracing())

    def __init__(self) -> None:
        self.calls: list[str] = []

    def apply(self, op: Any, args: tuple, attrs: dict) -> Any:
        self.calls.append(op.name)
        return EAGER.apply(op, args, attrs)


# ----- accumulation and broadcasting --------------------------------------------------------
def test_value_used_three_times_accumulates() -> None:
    x = _leaf([0.3, -1.2, 2.0])
    y = (x * x + ops.sin(x) + x).sum()
    y.backward()
    xv = x.numpy()
    np.testing.assert_allclose(x.grad.numpy(), 2 * xv + np.cos(xv) + 1, rtol=1e-12)


def test_intermediate_used_twice_accumulates_before_its_backward() -> None:
    x = _leaf([0.5, 1.5])
    h = ops.exp(x)  # h feeds two ops; its backward must run once, with the summed gradient
    y = (h * 3 + h * h).sum()
    y.backward()
    e = np.exp(x.numpy())
    np.testing.assert_allclose(x.grad.numpy(), (3 + 2 * e) * e, rtol=1e-12)


def test_broadcast_gradients_are_summed_to_input_shapes() -> None:
    a = _leaf(np.arange(3.0).reshape(3, 1))
    b = _leaf(np.arange(4.0) + 1)
    c = _leaf(np.full((2, 1, 1), 2.0))
    y = (a * b + c).sum()
    y.backward()
    assert a.grad.shape == (3, 1) and b.grad.shape == (4,) and c.grad.shape == (2, 1, 1)
    np.testing.assert_allclose(a.grad.numpy(), np.full((3, 1), 2 * b.numpy().sum()))
    np.testing.assert_allclose(b.grad.numpy(), np.full(4, 2 * a.numpy().sum()))
    np.testing.assert_allclose(c.grad.numpy(), np.full((2, 1, 1), 12.0))


def test_sum_to_runs_once_per_broadcast_input_in_the_engine() -> None:
    a = _leaf(np.ones((3, 1)))
    b = _leaf(np.ones(4))
    c = _leaf(np.ones((3, 4)))
    y = ((a + b) * c).sum()
    counter = CountingInterpreter()
    with interpreting(counter):
        y.backward()
    # add's backward returns gy unreduced for both inputs; the engine reduces each exactly once.
    assert counter.calls.count("sum_to") == 2, counter.calls
    assert a.grad.shape == (3, 1) and b.grad.shape == (4,) and c.grad.shape == (3, 4)


def test_grad_accumulates_across_two_backward_calls() -> None:
    x = _leaf([1.0, -2.0])
    (x * x).sum().backward()
    first = x.grad.numpy().copy()
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first)
    x.zero_grad()
    assert x.grad is None


def test_leaf_grad_keeps_the_leaf_dtype() -> None:
    x = dualflow.tensor([1.0, 2.0], requires_grad=True)  # float32
    w = np.array([3.0, 4.0])  # float64: the product is float64
    y = (x * w).sum()
    assert y.dtype == np.float64
    y.backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 4.0])


def test_backward_of_several_outputs_sums_their_gradients() -> None:
    x = _leaf([1.0, 2.0])
    h = x * 3
    dualflow.backward([h.sum(), (h * h).sum()])
    np.testing.assert_allclose(x.grad.numpy(), 3 + 18 * x.numpy())


# ----- grad modes ----------------------------------------------------------------------------
def test_no_grad_records_nothing() -> None:
    x = _leaf([1.0, 2.0])
    with dualflow.no_grad():
        assert not dualflow.is_grad_enabled()
        y = ops.tanh(x) * x
    assert dualflow.is_grad_enabled()
    assert y.requires_grad is False
    assert y.creator is None and y.is_leaf


def test_enable_grad_inside_no_grad_records() -> None:
    x = _leaf([1.0, 2.0])
    with dualflow.no_grad():
        with dualflow.enable_grad():
            y = (x * x).sum()
        z = x * x
    assert y.requires_grad and y.creator is not None
    assert not z.requires_grad and z.creator is None
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.numpy())


def test_ops_on_constants_record_nothing() -> None:
    y = ops.exp(dualflow.tensor([1.0, 2.0])) * 2
    assert not y.requires_grad and y.creator is None


# ----- retain_graph ----------------------------------------------------------------------------
def test_retain_graph_allows_a_second_backward_with_the_same_result() -> None:
    x = _leaf([0.5, -1.0])
    y = (ops.tanh(x) * ops.exp(x)).sum()
    y.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    x.grad = None
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), first, rtol=0)


def test_second_backward_without_retain_graph_raises() -> None:
    x = _leaf([0.5, -1.0])
    y = (ops.tanh(x) * x).sum()
    y.backward()
    with pytest.raises(GraphReleasedError, match="retain_graph=True"):
        y.backward()


def test_grad_with_retain_graph_can_be_called_twice() -> None:
    x = _leaf([0.5, 1.0])
    y = ops.exp(x).sum()
    (a,) = dualflow.grad(y, x, retain_graph=True)
    (b,) = dualflow.grad(y, x)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0)


def test_second_grad_without_retain_graph_raises_graph_released() -> None:
    x = _leaf([0.5, 1.0])
    y = (ops.tanh(x) * x).sum()
    dualflow.grad(y, x)
    with pytest.raises(GraphReleasedError):
        dualflow.grad(y, x)


# ----- dualflow.grad ---------------------------------------------------------------------------
def test_grad_returns_gradients_and_leaves_dot_grad_untouched() -> None:
    x = _leaf([0.2, 0.4])
    w = _leaf([[1.0, -1.0], [0.5, 2.0]])
    b = _leaf([0.1, -0.1])
    loss = ops.tanh(ops.matmul(w, x) + b).sum()
    gx, gw = dualflow.grad(loss, [x, w])
    assert x.grad is None and w.grad is None and b.grad is None
    t = 1 - np.tanh(w.numpy() @ x.numpy() + b.numpy()) ** 2
    np.testing.assert_allclose(gx.numpy(), w.numpy().T @ t, rtol=1e-12)
    np.testing.assert_allclose(gw.numpy(), np.outer(t, x.numpy()), rtol=1e-12)
    assert not gx.requires_grad and not gw.requires_grad


def test_grad_with_respect_to_a_non_leaf_intermediate() -> None:
    x = _leaf([1.0, 2.0])
    h = ops.tanh(x)
    out = (h * h * h).sum()
    (gh,) = dualflow.grad(out, h)
    np.testing.assert_allclose(gh.numpy(), 3 * np.tanh(x.numpy()) ** 2, rtol=1e-12)
    assert x.grad is None


def test_grad_with_respect_to_both_a_leaf_and_an_intermediate() -> None:
    x = _leaf([1.0, 2.0])
    h = x * x
    out = (h * x).sum()  # = x^3 ; d/dh = x ; d/dx = 3x^2 (total)
    gh, gx = dualflow.grad(out, [h, x])
    np.testing.assert_allclose(gh.numpy(), x.numpy())
    np.testing.assert_allclose(gx.numpy(), 3 * x.numpy() ** 2)


def test_grad_runs_only_the_backward_of_nodes_above_a_target() -> None:
    # w's branch (exp) and the op that made the target h (x * 2) lead to no target: grad()
    # computes no gradient for them, only for what lies between the output and x0 or h
    x0, x, w = _leaf([0.5, -1.0]), _leaf([1.0, 2.0]), _leaf([0.3, 0.7])
    h = x * 2.0
    out = (ops.tanh(x0) * ops.exp(w) * h).sum()
    counter = CountingInterpreter()
    with interpreting(counter):
        gx0, gh = dualflow.grad(out, [x0, h])
    e = np.exp(w.numpy())
    np.testing.assert_allclose(gx0.numpy(), (1 - np.tanh([0.5, -1.0]) ** 2) * e * h.numpy())
    np.testing.assert_allclose(gh.numpy(), np.tanh(x0.numpy()) * e)
    assert "tanh_grad" in counter.calls and "exp" not in counter.calls
    # multiply's backward for the ops above x0 and h: the sum's broadcast, then one product per
    # multiply node on the way (never the product for x * 2's input x)
    assert counter.calls.count("multiply") == 3, counter.calls


def test_grad_of_every_leaf_skips_the_pruning_and_matches_the_pruned_run() -> None:
    # grad() over every leaf below the output prunes nothing (``_reaching`` says so with None);
    # the gradients, and their own gradients, are those of a run that pruned z's branch
    x, w, z = _leaf([0.5, -1.0]), _leaf([0.3, 0.7]), _leaf([2.0, 3.0])
    out = (ops.tanh(x * w) * ops.exp(z) + x).sum()
    assert engine._reaching([out], {id(x): None, id(w): None, id(z): None}) is None
    assert engine._reaching([out], {id(x): None, id(w): None}) is not None
    every = dualflow.grad(out, [x, w, z], create_graph=True)
    pruned = dualflow.grad(out, [x, w], create_graph=True)
    for a, b in zip(every, pruned, strict=False):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    second_every = dualflow.grad((every[0] * every[0]).sum(), [x, w, z], retain_graph=True)
    second_pruned = dualflow.grad((pruned[0] * pruned[0]).sum(), [x, w, z], retain_graph=True)
    for a, b in zip(second_every, second_pruned, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    out.backward()
    for leaf, g in zip((x, w, z), every, strict=True):
        np.testing.assert_array_equal(leaf.grad.numpy(), g.numpy())


def test_grad_of_every_leaf_and_an_intermediate_answers_both() -> None:
    x = _leaf([1.0, 2.0])
    h = x * x
    out = (h * x).sum()
    gx, gh = dualflow.grad(out, [x, h])  # x is the only leaf: nothing pruned
    np.testing.assert_allclose(gx.numpy(), 3 * x.numpy() ** 2)
    np.testing.assert_allclose(gh.numpy(), x.numpy())


def test_grad_of_unused_input_needs_allow_unused() -> None:
    x = _leaf([1.0, 2.0])
    unused = _leaf([3.0])
    with pytest.raises(ValueError, match="allow_unused"):
        dualflow.grad((x * x).sum(), [x, unused])
    gx, gu = dualflow.grad((x * x).sum(), [x, unused], allow_unused=True)
    assert gu is None
    np.testing.assert_allclose(gx.numpy(), 2 * x.numpy())


def test_grad_with_explicit_grad_outputs() -> None:
    x = _leaf([1.0, 2.0, 3.0])
    y = x * x
    (gx,) = dualflow.grad(y, x, dualflow.tensor(np.array([1.0, 0.0, -1.0])))
    np.testing.assert_allclose(gx.numpy(), [2.0, 0.0, -6.0])


def test_grad_of_input_not_requiring_grad_raises() -> None:
    x = dualflow.tensor([1.0, 2.0])
    with pytest.raises(ValueError, match="does not require grad"):
        dualflow.grad((x * x).sum(), x)


def test_grad_has_the_input_dtype() -> None:
    x = dualflow.tensor([1.0, 2.0], requires_grad=True)  # float32
    (gx,) = dualflow.grad((x * np.array([3.0, 4.0])).sum(), x)
    assert gx.dtype == np.float32


def test_backward_after_retained_grad_reaches_every_leaf() -> None:
    x = _leaf([1.0, 2.0])
    w = _leaf([3.0, 4.0])
    y = (x * w).sum()
    dualflow.grad(y, x, retain_graph=True)
    y.backward()
    assert w.grad is not None
    np.testing.assert_allclose(w.grad.numpy(), x.numpy())


def test_grad_after_retained_grad_for_other_inputs() -> None:
    x = _leaf([1.0, 2.0])
    w = _leaf([3.0, 4.0])
    y = (x * w).sum()
    (gx,) = dualflow.grad(y, x, retain_graph=True)
    (gw,) = dualflow.grad(y, w)
    np.testing.assert_allclose(gx.numpy(), w.numpy())
    np.testing.assert_allclose(gw.numpy(), x.numpy())


# ----- seeds: gy -------------------------------------------------------------------------------
def test_backward_of_non_scalar_without_gy_raises_shape_error() -> None:
    x = _leaf([1.0, 2.0])
    with pytest.raises(ShapeError, match=r"one-element.*\(2,\)"):
        (x * 2).backward()


def test_gy_of_the_wrong_shape_raises() -> None:
    x = _leaf([1.0, 2.0])
    with pytest.raises(ShapeError, match=r"\(3,\).*\(2,\)"):
        (x * 2).backward(np.ones(3))


def test_explicit_gy_is_used() -> None:
    x = _leaf([1.0, 2.0])
    (x * x).backward(np.array([10.0, -1.0]))
    np.testing.assert_allclose(x.grad.numpy(), [20.0, -4.0])


def test_one_element_non_scalar_output_gets_an_implicit_seed() -> None:
    x = _leaf([[3.0]])
    (x * x).backward()
    np.testing.assert_allclose(x.grad.numpy(), [[6.0]])


def test_integer_tensor_cannot_require_grad() -> None:
    with pytest.raises(DTypeError):
        dualflow.tensor([1, 2], requires_grad=True)
    with pytest.raises(DTypeError):
        dualflow.tensor([1, 2]).requires_grad_()


def test_backward_of_output_not_requiring_grad_raises() -> None:
    y = dualflow.tensor([1.0, 2.0]).sum()
    with pytest.raises(RuntimeError):
        y.backward()
