"""Every optimizer's compiled step equals its eager step (parameters and state), the lr tensor
(and OneCycleLR's momentum tensors) change without a retrace, and zero_grad(set_to_none=False)."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import nn, ops, optim

OPTIMIZERS = [
    ("Adadelta", {"weight_decay": 0.1}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.01, "initial_accumulator_value": 0.1}),
    ("Adamax", {"lr": 0.01, "maximize": True}),
    ("NAdam", {"lr": 0.01, "decoupled_weight_decay": True, "weight_decay": 0.1}),
    ("RAdam", {"lr": 0.01}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "maximize": True}),
    ("Adam", {"lr": 0.01, "amsgrad": True}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.5, "centered": True}),
]
X = np.random.default_rng(0).standard_normal((6, 3)).astype(np.float32)


def run(name: str, kwargs: dict, compiled: bool, steps: int = 9):
    dualflow.random.seed(0)
    model = nn.Linear(3, 2)
    opt = getattr(optim, name)(model.parameters(), **kwargs)

    def step(x):
        opt.zero_grad()
        loss = ops.sum(ops.tanh(model(x)) ** 2)
        loss.backward()
        opt.step()
        return loss

    fn = dualflow.compile(step) if compiled else step
    x = dualflow.tensor(X)
    losses = []
    for k in range(steps):
        losses.append(fn(x).item())
        if k == 4:  # a new lr, as a scheduler would write it: no retrace
            opt.param_groups[0]["lr"] = 0.5 * opt.lr_tensor(0).item()
    state = [{k: v.numpy().copy() for k, v in s.items()} for s in opt.state.values()]
    return losses, [p.numpy().copy() for p in model.parameters()], state, fn


@pytest.mark.parametrize(("name", "kwargs"), OPTIMIZERS, ids=[o[0] for o in OPTIMIZERS])
def test_compiled_step_equals_eager(name: str, kwargs: dict) -> None:
    eager = run(name, kwargs, compiled=False)
    compiled = run(name, kwargs, compiled=True)
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-5)
    for a, b in zip(compiled[1], eager[1]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    for state_c, state_e in zip(compiled[2], eager[2]):
        assert set(state_c) == set(state_e)
        for key in state_e:
            np.testing.assert_allclose(state_c[key], state_e[key], rtol=1e-5, atol=1e-7)
    stats = compiled[3].stats()
    # the first trace is single-use (state is born in it); the lr change does not retrace
    assert stats.traces <= 2 and stats.eager_fallbacks == 0 and stats.plan_runs >= 7, stats


def test_cycled_momentum_is_read_by_reference() -> None:
    p = nn.Parameter(np.ones(2, np.float32))
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    before = opt._version
    opt.param_groups[0]["momentum"] = 0.5
    assert opt._version == before and opt.param_groups[0].hyper("momentum").item() == 0.5
    opt.param_groups[0]["momentum"] = 0.0  # zero changes what the update keeps: retrace
    assert opt._version == before + 1
    adam = optim.Adam([p], lr=0.1)
    adam.param_groups[0]["betas"] = (0.8, 0.99)
    assert [t.item() for t in adam.param_groups[0].tensors["betas"]] == [0.8, 0.99]


def test_loaded_state_dict_rewrites_the_momentum_tensor() -> None:
    p = nn.Parameter(np.ones(2, np.float32))
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    saved = opt.state_dict()
    opt.param_groups[0]["momentum"] = 0.3
    opt.load_state_dict(saved)
    assert opt.param_groups[0]["momentum"] == 0.9
    assert opt.param_groups[0].hyper("momentum").item() == pytest.approx(0.9)


def test_differentiable_flag_is_rejected_and_implementation_flags_accepted() -> None:
    params = [nn.Parameter(np.ones(1, np.float32))]
    optim.Adam(params, foreach=True, fused=False, capturable=False)
    with pytest.raises(NotImplementedError, match="differentiable"):
        optim.NAdam(params, differentiable=True)
    with pytest.raises(ValueError, match=r"betas\[0\]"):
        optim.RAdam(params, betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="rho"):
        optim.Adadelta(params, rho=1.5)
    with pytest.raises(ValueError, match="lr_decay"):
        optim.Adagrad(params, lr_decay=-1)
