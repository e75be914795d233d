"""Optimizer state dicts: exact resume, snapshots, identity of state tensors, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from dualflow.errors import ShapeError
from dualflow.nn import Parameter
from dualflow.optim import SGD, Adam, AdamW, RMSprop
from tests.optim.problems import X0, backward

ALL = [
    lambda ps: SGD(ps, lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.1),
    lambda ps: Adam(ps, lr=0.1, amsgrad=True, weight_decay=0.1),
    lambda ps: AdamW(ps, lr=0.1),
    lambda ps: RMSprop(ps, lr=0.01, momentum=0.5, centered=True),
]
NAMES = ["sgd", "adam", "adamw", "rmsprop"]


def run(p: Parameter, opt, steps: int) -> None:
    for _ in range(steps):
        backward(p)
        opt.step()


@pytest.mark.parametrize("make", ALL, ids=NAMES)
def test_resume_equals_uninterrupted_training_exactly(make) -> None:
    straight = Parameter(X0.copy())
    run(straight, make([straight]), 4)

    first = Parameter(X0.copy())
    opt = make([first])
    run(first, opt, 2)
    saved, at_save = opt.state_dict(), first.numpy().copy()
    run(first, opt, 3)  # training on must not change the saved dict: it is a snapshot
    resumed = Parameter(at_save)
    fresh = make([resumed])
    fresh.load_state_dict(saved)
    run(resumed, fresh, 2)
    np.testing.assert_array_equal(resumed.numpy(), straight.numpy())


def test_state_dict_layout_follows_pytorch() -> None:
    a, b = Parameter(np.ones(2)), Parameter(np.ones(3))
    opt = Adam([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1)
    a.grad = a * 1
    opt.step()
    saved = opt.state_dict()
    assert [g["params"] for g in saved["param_groups"]] == [[0], [1]]
    assert [g["lr"] for g in saved["param_groups"]] == [0.1, 0.5]  # float64 params: exact
    assert list(saved["state"]) == [0]
    assert saved["state"][0]["step"].item() == 1.0
    assert saved["state"][0]["exp_avg"] is not opt.state[a]["exp_avg"]  # a copy


def test_load_copies_into_existing_state_tensors() -> None:
    p = Parameter(X0.copy())
    opt = SGD([p], lr=0.1, momentum=0.9)
    run(p, opt, 2)
    buf = opt.state[p]["momentum_buffer"]
    saved = opt.state_dict()
    run(p, opt, 1)
    opt.load_state_dict(saved)
    assert opt.state[p]["momentum_buffer"] is buf
    np.testing.assert_array_equal(buf.numpy(), saved["state"][0]["momentum_buffer"].numpy())


def test_load_restores_hyperparameters_and_lr_tensor_identity() -> None:
    p = Parameter(np.zeros(2, np.float32))
    opt = SGD([p], lr=0.5, momentum=0.9)
    saved = opt.state_dict()
    lr = opt.lr_tensor(0)
    opt.param_groups[0]["momentum"] = 0.1
    opt.param_groups[0]["lr"] = 0.01
    opt.load_state_dict(saved)
    assert opt.param_groups[0]["momentum"] == 0.9
    assert opt.param_groups[0]["lr"] is lr and lr.item() == 0.5


def test_load_drops_state_of_params_absent_from_the_dict() -> None:
    p = Parameter(X0.copy())
    opt = Adam([p], lr=0.1)
    saved = opt.state_dict()  # before any step: no state
    run(p, opt, 1)
    opt.load_state_dict(saved)
    assert p not in opt.state


def _snapshot(opt) -> tuple:
    state = {id(p): {k: (t, t.numpy().copy()) for k, t in s.items()} for p, s in opt.state.items()}
    groups = [{k: v for k, v in g.items() if k != "lr"} for g in opt.param_groups]
    return state, groups, [opt.lr_tensor(i).item() for i in range(len(opt.param_groups))]


def _assert_unchanged(opt, snapshot) -> None:
    state, groups, lrs = snapshot
    assert [{k: v for k, v in g.items() if k != "lr"} for g in opt.param_groups] == groups
    assert [opt.lr_tensor(i).item() for i in range(len(opt.param_groups))] == lrs
    assert set(state) == {id(p) for p in opt.state}
    for p, entries in opt.state.items():
        for key, t in entries.items():
            assert t is state[id(p)][key][0]
            np.testing.assert_array_equal(t.numpy(), state[id(p)][key][1])


def _bad_dicts(saved: dict) -> list[tuple[dict, type]]:
    two_groups = {"state": {}, "param_groups": saved["param_groups"] * 2}
    more_params = {"state": {}, "param_groups": [{**saved["param_groups"][0], "params": [0, 1]}]}
    bad_shape = {
        "state": {0: {**saved["state"][0], "exp_avg": np.zeros(5)}},
        "param_groups": saved["param_groups"],
    }
    unknown = {"state": {7: saved["state"][0]}, "param_groups": saved["param_groups"]}
    bad_lr = {"state": {}, "param_groups": [{**saved["param_groups"][0], "lr": -1.0}]}
    # The first entries are valid, so a partial write would show up in the checks.
    return [
        (two_groups, ValueError),
        (more_params, ValueError),
        (bad_shape, ShapeError),
        (unknown, ValueError),
        (bad_lr, ValueError),
        ({"state": {}}, ValueError),
    ]


def test_mismatched_load_raises_and_changes_nothing() -> None:
    p = Parameter(X0.copy())
    opt = Adam([p], lr=0.1)
    run(p, opt, 1)
    saved = opt.state_dict()
    saved["param_groups"][0]["lr"] = 0.5
    run(p, opt, 1)
    snapshot = _snapshot(opt)
    for bad, error in _bad_dicts(saved):
        with pytest.raises(error, match="load_state_dict"):
            opt.load_state_dict(bad)
        _assert_unchanged(opt, snapshot)
    assert issubclass(ShapeError, ValueError)
