"""LBFGS against PyTorch: the same problem and arguments give the same iterates, losses, closure
evaluations and state counts (references from ``make_optim_references.py lbfgs``, torch 2.13,
float64); a compiled closure gives the eager iterates with its plan run at every evaluation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dualflow
from dualflow import optim
from dualflow.nn import Parameter
from tests.compat import nn_packing
from tests.compat.lbfgs_cases import CASES, PROBLEMS, STEPS, case_id, run

REFS = nn_packing.load(Path(__file__).with_name("lbfgs_references.npz"))


@pytest.mark.parametrize(("problem", "kwargs"), CASES, ids=[case_id(*c) for c in CASES])
def test_lbfgs_matches_torch(problem: str, kwargs: dict) -> None:
    got = run(dualflow, optim, lambda v: Parameter(v.copy()), problem, kwargs)
    prefix = case_id(problem, kwargs) + "/"
    want = {k[len(prefix) :]: v for k, v in REFS.items() if k.startswith(prefix)}
    assert set(got) == set(want)
    for key, value in want.items():
        np.testing.assert_allclose(got[key], value, rtol=1e-9, atol=1e-12, err_msg=key)


def _train(problem: str, kwargs: dict, compiled: bool) -> tuple[list, list, object]:
    loss_fn, start = PROBLEMS[problem]
    params = [Parameter(p.copy()) for p in start()]
    opt = optim.LBFGS(params, **kwargs)

    def closure():
        opt.zero_grad()
        loss = loss_fn(dualflow, params)
        loss.backward()
        return loss

    step_closure = dualflow.compile(closure) if compiled else closure
    losses = [float(opt.step(step_closure)) for _ in range(STEPS)]
    return [p.numpy().copy() for p in params], losses, step_closure


COMPILED = CASES[:3] + CASES[5:7]


@pytest.mark.parametrize(("problem", "kwargs"), COMPILED, ids=[case_id(*c) for c in COMPILED])
def test_compiled_closure_equals_eager(problem: str, kwargs: dict) -> None:
    want_params, want_losses, _ = _train(problem, kwargs, compiled=False)
    got_params, got_losses, compiled = _train(problem, kwargs, compiled=True)
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-12, atol=1e-14)
    for got, want in zip(got_params, want_params):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    calls = int(REFS[case_id(problem, kwargs) + "/calls"])
    assert compiled.stats().plan_runs >= calls - 2  # one trace; every other call is the plan


def test_state_dict_round_trip_continues_the_same() -> None:
    problem, kwargs = CASES[1]
    loss_fn, start = PROBLEMS[problem]

    def make():
        params = [Parameter(p.copy()) for p in start()]
        opt = optim.LBFGS(params, **kwargs)

        def closure():
            opt.zero_grad()
            loss = loss_fn(dualflow, params)
            loss.backward()
            return loss

        return params, opt, closure

    params, opt, closure = make()
    opt.step(closure)
    saved = opt.state_dict()
    assert saved["state"][0]["n_iter"] == opt.state[params[0]]["n_iter"]
    other_params, other, other_closure = make()
    with dualflow.no_grad():
        other_params[0].copy_(params[0])
    other.load_state_dict(saved)
    opt.step(closure)
    other.step(other_closure)
    np.testing.assert_array_equal(other_params[0].numpy(), params[0].numpy())


def test_one_param_group_and_line_search_name_are_checked() -> None:
    p, q = Parameter(np.zeros(2)), Parameter(np.zeros(2))
    with pytest.raises(ValueError, match="parameter groups"):
        optim.LBFGS([{"params": [p]}, {"params": [q]}])
    with pytest.raises(ValueError, match="strong_wolfe"):
        optim.LBFGS([p], line_search_fn="backtracking")


def test_step_inside_a_compiled_function_fails_closed() -> None:
    p = Parameter(np.array([2.0, -1.0]))
    opt = optim.LBFGS([p], max_iter=3)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    def train():
        return opt.step(closure)

    compiled = dualflow.compile(train)
    with pytest.warns(RuntimeWarning, match="LBFGS.step"):
        compiled()
    q = Parameter(np.array([2.0, -1.0]))
    other = optim.LBFGS([q], max_iter=3)

    def other_closure():
        other.zero_grad()
        loss = (q * q).sum()
        loss.backward()
        return loss

    other.step(other_closure)
    np.testing.assert_array_equal(p.numpy(), q.numpy())  # the eager result


def test_compiled_closure_trains_a_module() -> None:
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((16, 3)), rng.standard_normal((16, 1))

    def train(compiled: bool) -> tuple[list, object]:
        dualflow.manual_seed(0)
        model = dualflow.nn.Linear(3, 1).double()
        opt = optim.LBFGS(model.parameters(), line_search_fn="strong_wolfe", max_iter=10)
        data, target = dualflow.tensor(x), dualflow.tensor(y)

        def closure():
            opt.zero_grad()
            loss = dualflow.nn.functional.mse_loss(model(data), target)
            loss.backward()
            return loss

        fn = dualflow.compile(closure) if compiled else closure
        losses = [float(opt.step(fn)) for _ in range(2)]
        return losses + [p.numpy().copy() for p in model.parameters()], fn

    want, _ = train(compiled=False)
    got, fn = train(compiled=True)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
    assert fn.stats().plan_runs >= 3 and fn.stats().eager_fallbacks == 0
