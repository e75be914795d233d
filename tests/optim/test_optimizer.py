"""The Optimizer base: param groups, lr tensors, in-place writes through assign, errors."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow.autograd.eager import EAGER
from dualflow.nn import Parameter
from dualflow.ops.dispatch import interpreting
from dualflow.optim import SGD, Adam, AdamW, RMSprop

ALL = [
    lambda ps: SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1),
    lambda ps: Adam(ps, lr=0.1, amsgrad=True, weight_decay=0.1),
    lambda ps: AdamW(ps, lr=0.1),
    lambda ps: RMSprop(ps, lr=0.01, momentum=0.5, centered=True),
]
NAMES = ["sgd", "adam", "adamw", "rmsprop"]


class Recorder:
    """An interpreter that runs ops eagerly and records each (op name, args)."""

    hooks = None  # not a tracing interpreter (dispatch.tracing())

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple]] = []

    def apply(self, op, args, attrs):
        self.calls.append((op.name, args))
        return EAGER.apply(op, args, attrs)


def constant_grads(*params: Parameter, value: float = 1.0) -> None:
    for p in params:
        p.grad = dualflow.tensor(np.full(p.shape, value, p.dtype))


def test_param_groups_have_their_own_hyperparameters() -> None:
    a, b = Parameter(np.zeros(2)), Parameter(np.zeros(2))
    opt = SGD([{"params": [a]}, {"params": [b], "lr": 0.01, "momentum": 0.9}], lr=0.1)
    assert [g["momentum"] for g in opt.param_groups] == [0.0, 0.9]
    for _ in range(2):
        constant_grads(a, b)
        opt.step()
    np.testing.assert_allclose(a.numpy(), [-0.2, -0.2], rtol=1e-15)
    np.testing.assert_allclose(b.numpy(), [-0.029, -0.029], rtol=1e-15)  # bufs 1, 1.9


def test_group_lr_is_a_0d_tensor_of_the_params_float_width() -> None:
    opt = SGD(
        [{"params": [Parameter(np.zeros(2, np.float32))]}, {"params": [Parameter(np.zeros(2))]}]
    )
    lr32, lr64 = (g["lr"] for g in opt.param_groups)
    assert lr32.shape == () and lr32.dtype == np.float32
    assert lr64.dtype == np.float64 and lr64.item() == 1e-3


def test_assigning_a_float_lr_is_copied_into_the_same_tensor() -> None:
    p = Parameter(np.zeros(2, np.float32))
    opt = SGD([p], lr=0.5)
    lr = opt.param_groups[0]["lr"]
    opt.param_groups[0]["lr"] = 0.25
    constant_grads(p)
    opt.step()
    assert opt.param_groups[0]["lr"] is lr and lr.item() == 0.25
    assert p.tolist() == [-0.25, -0.25]


def test_the_update_reads_the_lr_tensor_not_a_constant() -> None:
    p = Parameter(np.ones(2, np.float32))
    opt = SGD([p], lr=0.5)
    constant_grads(p)
    opt.step()
    dualflow.ops.assign(opt.lr_tensor(0), 0.0)  # what a scheduler or compiled step would do
    opt.step()
    assert p.tolist() == [0.5, 0.5]


@pytest.mark.parametrize("make", ALL, ids=NAMES)
def test_step_writes_params_and_state_in_place_through_assign(make) -> None:
    p, q = Parameter(np.ones(3, np.float32)), Parameter(np.ones(2, np.float32))
    opt = make([p, q])
    constant_grads(p, q, value=0.5)
    opt.step()  # creates the state
    arrays = {id(t): t.array for t in (p, q, *opt.state[p].values(), *opt.state[q].values())}
    before = p.numpy().copy()
    recorder = Recorder()
    with interpreting(recorder):
        opt.step()
    targets = [args[0] for name, args in recorder.calls if name == "assign"]
    expected = [p, *opt.state[p].values(), q, *opt.state[q].values()]
    assert sorted(map(id, targets)) == sorted(map(id, expected))  # each written exactly once
    assert {id(t): t.array for t in expected} == arrays  # same array objects, updated in place
    assert not np.array_equal(p.numpy(), before)


def test_params_without_grad_are_skipped() -> None:
    a, b = Parameter(np.ones(2)), Parameter(np.ones(2))
    opt = Adam([a, b], lr=0.1)
    constant_grads(a)
    opt.step()
    assert b.tolist() == [1.0, 1.0] and b not in opt.state
    assert a.tolist() != [1.0, 1.0]


def test_zero_grad_sets_none() -> None:
    a, b = Parameter(np.ones(2)), Parameter(np.ones(2))
    opt = SGD([{"params": [a]}, {"params": [b]}], lr=0.1)
    constant_grads(a, b)
    opt.zero_grad()
    assert a.grad is None and b.grad is None


def test_step_with_closure_returns_loss() -> None:
    p = Parameter(np.array([2.0]))
    opt = SGD([p], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    with dualflow.no_grad():  # the closure still records: step turns grad back on for it
        loss = opt.step(closure)
    assert loss.item() == 4.0 and p.tolist() == [1.0]


def test_add_param_group_uses_defaults() -> None:
    opt = Adam([Parameter(np.zeros(1))], lr=0.1, betas=(0.5, 0.6))
    opt.add_param_group({"params": Parameter(np.zeros(1)), "eps": 1e-3})
    group = opt.param_groups[1]
    assert group["betas"] == (0.5, 0.6) and group["eps"] == 1e-3
    assert group["lr"].item() == 0.1


def test_bad_params_raise() -> None:
    p = Parameter(np.zeros(2))
    with pytest.raises(ValueError, match="empty"):
        SGD([], lr=0.1)
    with pytest.raises(TypeError, match="iterable"):
        SGD(p, lr=0.1)
    with pytest.raises(TypeError, match="Tensors"):
        SGD([np.zeros(2)], lr=0.1)
    with pytest.raises(ValueError, match="more than once"):
        SGD([{"params": [p]}, {"params": [p]}], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        SGD([p * 2], lr=0.1)
    with pytest.raises(ValueError, match="learning rate"):
        SGD([{"params": [p], "lr": -0.1}], lr=0.1)


def test_repr_lists_groups() -> None:
    text = repr(SGD([Parameter(np.zeros(1))], lr=0.5))
    assert text.startswith("SGD (") and "lr: 0.5" in text


def test_optimizer_state_is_named_in_compiled_graphs() -> None:
    import dualflow
    from dualflow import nn, ops

    model = nn.Linear(3, 2)
    opt = dualflow.optim.Adam(model.params(), lr=0.1)

    @dualflow.compile
    def step(x):
        opt.zero_grad()
        loss = ops.sum(model(x) ** 2)
        loss.backward()
        opt.step()
        return loss

    x = dualflow.tensor(np.ones((4, 3), np.float32))
    for _ in range(2):
        step(x)
    names = {v.name for v in step.history[-1].graph.state}
    assert {"adam.lr", "adam.exp_avg[0]", "adam.exp_avg_sq[1]", "adam.step[0]"} <= names, names
