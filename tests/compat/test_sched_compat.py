"""Schedulers against PyTorch: every group's lr (and momentum) after every step, and PyTorch
state dicts loaded mid-schedule continuing as PyTorch did. References from
``make_optim_references.py`` (torch 2.13).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dualflow import optim
from dualflow.nn import Parameter
from dualflow.optim import lr_scheduler
from tests.compat import nn_packing
from tests.compat.sched_cases import (
    CASES,
    EPOCHS,
    FRACTIONAL_EPOCHS,
    METRICS,
    STATE_AT,
    STATE_CASES,
    SchedCase,
)

REFS = nn_packing.load(Path(__file__).with_name("sched_references.npz"))
BY_ID = {case.id: case for case in CASES}


def make_optimizer(kind: str) -> optim.Optimizer:
    a, b = Parameter(np.zeros(2)), Parameter(np.zeros(3))
    groups = [{"params": [a]}, {"params": [b], "lr": 0.5}]
    return optim.SGD(groups, lr=1.0, momentum=0.9) if kind == "sgd" else optim.Adam(groups, lr=1.0)


def snapshot(sched, opt) -> list[float]:
    momenta = [g["momentum"] if "momentum" in g else g["betas"][0] for g in opt.param_groups]
    return [float(v) for v in sched.get_last_lr()] + [float(m) for m in momenta]


def advance(case: SchedCase, sched, epoch: int) -> None:
    if case.kind == "plateau":
        sched.step(METRICS[epoch])
    elif case.kind == "epochs":
        sched.step(FRACTIONAL_EPOCHS[epoch - 1])
    else:
        sched.step()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_scheduler_matches_torch(case: SchedCase) -> None:
    opt = make_optimizer(case.optimizer)
    sched = case.build(lr_scheduler, opt)
    rows = [snapshot(sched, opt)]
    for epoch in range(1, EPOCHS):
        advance(case, sched, epoch)
        rows.append(snapshot(sched, opt))
    np.testing.assert_allclose(np.array(rows), REFS[case.id + "/lrs"], rtol=1e-12, atol=1e-15)
    lr_tensors = [opt.lr_tensor(i).item() for i in range(2)]
    assert lr_tensors == pytest.approx(rows[-1][:2], rel=1e-15)  # what a compiled step reads


@pytest.mark.parametrize("case_name", STATE_CASES)
def test_torch_state_dict_loads_and_continues(case_name: str) -> None:
    case = BY_ID[case_name]
    expected = REFS[case.id + "/lrs"]
    opt = make_optimizer(case.optimizer)
    sched = case.build(lr_scheduler, opt)
    sched.load_state_dict(json.loads(str(REFS[case.id + "/state"])))
    for index, group in enumerate(opt.param_groups):  # the optimizer's own state dict's job
        group["lr"] = float(expected[STATE_AT][index])
    for epoch in range(STATE_AT + 1, EPOCHS):
        advance(case, sched, epoch)
        np.testing.assert_allclose(sched.get_last_lr(), expected[epoch][:2], rtol=1e-12)
