"""GradScaler: PyTorch's scale sequence and parameters (skipped steps on inf/NaN, backoff, growth)
eagerly and compiled; unscale_ before clipping; state dicts; misuse errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import dualflow
from dualflow.amp import GradScaler
from tests.compat.grad_scaler_cases import SETTINGS, START, STEPS, coefficients

REFERENCE = json.loads(
    (Path(__file__).parents[1] / "compat" / "grad_scaler_references.json").read_text()
)["rows"]


def _replay(compiled: bool) -> tuple[list, object]:
    p = dualflow.nn.Parameter(dualflow.tensor(START.copy()))
    opt = dualflow.optim.SGD([p], lr=0.1, momentum=0.9)
    scaler = GradScaler(**SETTINGS)

    def step(c: dualflow.Tensor) -> dualflow.Tensor:
        opt.zero_grad()
        loss = (p * c).sum()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    fn = dualflow.compile(step) if compiled else step
    rows = []
    for k in range(STEPS):
        fn(dualflow.tensor(coefficients(k)))
        state = scaler.state_dict()
        rows.append([state["scale"], state["_growth_tracker"], p.tolist()])
    return rows, fn


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_scale_sequence_and_parameters_match_pytorch(compiled: bool) -> None:
    rows, fn = _replay(compiled)
    for k, (got, want) in enumerate(zip(rows, REFERENCE)):
        assert got[:2] == want[:2], f"step {k}"
        np.testing.assert_allclose(got[2], want[2], rtol=1e-6, err_msg=f"step {k}")
    if compiled:
        stats = fn.stats()
        assert stats.plan_runs >= 1 and stats.guard_failures >= 1, stats


def test_an_inf_gradient_skips_the_step_and_halves_the_scale() -> None:
    p = dualflow.nn.Parameter(dualflow.ones(3))
    opt = dualflow.optim.Adam([p], lr=0.1)
    scaler = GradScaler(init_scale=1024.0)
    scaler.scale((p * dualflow.tensor([1.0, np.inf, 1.0])).sum()).backward()
    assert scaler.step(opt) is None
    scaler.update()
    assert p.tolist() == [1.0, 1.0, 1.0] and opt.state == {}  # nothing committed, no state
    assert scaler.get_scale() == 512.0
    opt.zero_grad()
    scaler.scale((p * 2.0).sum()).backward()
    scaler.step(opt)
    scaler.update()
    assert p.tolist() != [1.0, 1.0, 1.0] and scaler.get_scale() == 512.0


def test_unscale_then_clip_sees_true_gradients() -> None:
    p = dualflow.nn.Parameter(dualflow.tensor([3.0, 4.0]))
    opt = dualflow.optim.SGD([p], lr=1.0)
    scaler = GradScaler(init_scale=2.0**10)
    scaler.scale((p * p).sum() / 2).backward()
    scaler.unscale_(opt)
    np.testing.assert_array_equal(p.grad.numpy(), [3.0, 4.0])
    dualflow.nn.utils.clip_grad_norm_([p], 1.0)
    scaler.step(opt)  # no second unscale
    np.testing.assert_allclose(p.numpy(), [2.4, 3.2], rtol=1e-6)
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.step(opt)
    scaler.update()
    with pytest.raises(RuntimeError, match="No inf checks"):
        scaler.update()


def test_state_dict_round_trip_and_disabled_scaler() -> None:
    scaler = GradScaler(init_scale=16.0, growth_interval=7)
    restored = GradScaler()
    restored.load_state_dict(scaler.state_dict())
    assert restored.state_dict() == {
        "scale": 16.0,
        "growth_factor": 2.0,
        "backoff_factor": 0.5,
        "growth_interval": 7,
        "_growth_tracker": 0,
    }
    off = GradScaler(enabled=False)
    loss = dualflow.tensor(2.0)
    assert off.scale(loss) is loss and off.get_scale() == 1.0 and off.state_dict() == {}
    with pytest.raises(ValueError, match="backoff_factor"):
        GradScaler(backoff_factor=1.5)
