"""Replacing a parameter between compiled calls trains the same model as eager (issue 35).

``m.fc.weight = nn.Parameter(...)`` with the same object put into the optimizer's param group
retraces (the Module's version changed), the new parameter's momentum buffer is born at its first
step, and that trace must not be kept as if the buffer were a temporary: the plan would restart
the buffer at every call. Changing a param group's ``params`` list in place retraces too.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualflow
from dualflow import nn, optim


def _train(compiled: bool, replace: str) -> tuple[list[float], list]:
    dualflow.random.seed(0)
    model = nn.Sequential(nn.Linear(3, 2))
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x):
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    run = dualflow.compile(step) if compiled else step
    x = dualflow.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))
    losses = []
    for call in range(7):
        if call == 2:
            new = nn.Parameter(dualflow.tensor(np.full((2, 3), 0.5, np.float32)))
            if replace != "list only":
                model[0].weight = new
            if replace in ("item", "list only"):
                opt.param_groups[0]["params"][0] = new
            elif replace == "whole list":
                opt.param_groups[0]["params"] = [new, model[0].bias]
        losses.append(run(x).item())
    if compiled:
        assert run.stats().plan_runs >= 3
    return losses, model[0].weight.tolist()


@pytest.mark.parametrize("replace", ["item", "whole list", "module only", "list only"])
def test_a_replaced_parameter_trains_as_eagerly(replace: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert _train(True, replace) == _train(False, replace)


def test_changing_a_param_list_bumps_the_optimizer_version() -> None:
    p, q = nn.Parameter(np.zeros(2, np.float32)), nn.Parameter(np.ones(2, np.float32))
    opt = optim.SGD([p], lr=0.1)
    params = opt.param_groups[0]["params"]
    for change in (lambda: params.append(q), lambda: params.pop(), lambda: params.insert(0, q)):
        before = opt._version
        change()
        assert opt._version == before + 1
    assert isinstance(params, list) and opt.state_dict()["param_groups"][0]["params"] == [0, 1]
