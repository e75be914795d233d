"""Checkpoint + ``resume`` reproduce the uninterrupted run bit for bit (dropout, mid-epoch, lr
schedule, batch-norm buffers, history), and a bad checkpoint changes nothing.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow.errors import CheckpointError, ShapeError
from dualflow.training import Trainer, fit, load_checkpoint, read_jsonl
from tests.training.toy import make_setup, without_timing

EPOCHS = 3  # 15 steps; a checkpoint every 3 steps: mid-epoch ones and one after the last step


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The uninterrupted run, leaving a checkpoint at steps 3, 6, 9, 12 and 15."""
    directory = tmp_path_factory.mktemp("run")
    s = make_setup(seed=0)
    history = fit(
        *s.fit_args(),
        epochs=EPOCHS,
        val_loader=s.val_loader,
        scheduler=s.scheduler,
        checkpoint_path=directory / "step{step}.npz",
        checkpoint_every=3,
        log_path=directory / "log.jsonl",
        progress=False,
    )
    return {"dir": directory, "params": s.params(), "history": history}


def _resume(path, log=None) -> tuple[dict, list]:
    # Other seeds everywhere: only what the checkpoint restores can make the runs agree.
    s = make_setup(seed=99)
    s.loader.set_epoch(5)
    history = fit(
        *s.fit_args(),
        epochs=EPOCHS,
        val_loader=s.val_loader,
        scheduler=s.scheduler,
        resume=path,
        log_path=log,
        progress=False,
    )
    return s.params(), history


@pytest.mark.parametrize("step", [3, 6, 12, 15])
def test_resumed_run_matches_the_uninterrupted_run_exactly(reference: dict, step: int) -> None:
    # 3 and 6 and 12 are mid-epoch; 15 is after the last step, before the epoch's end.
    params, history = _resume(reference["dir"] / f"step{step}.npz")
    assert params.keys() == reference["params"].keys()
    for name, value in reference["params"].items():
        assert np.array_equal(params[name], value), name  # bit for bit
    assert without_timing(history) == without_timing(reference["history"])


def test_the_checkpoint_holds_every_part(reference: dict) -> None:
    state = load_checkpoint(reference["dir"] / "step6.npz")
    assert state["loop"]["epoch"] == 1 and state["loop"]["batch"] == 1
    assert state["loop"]["global_step"] == 6 and len(state["loop"]["history"]) == 1
    assert state["loader"] == {"epoch": 1, "position": 1, "seed": 7}
    assert state["scheduler"]["last_epoch"] == 1
    assert "cpu" in state["rng"] and state["optimizer"]["state"]
    assert "1.running_mean" in state["model"]


def test_resume_appends_to_the_log(reference: dict, tmp_path) -> None:
    # The log as it was when the step-9 checkpoint was written (the run then "crashed").
    lines = (reference["dir"] / "log.jsonl").read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if '"step": 9' in line and "checkpoint" in line)
    log = tmp_path / "log.jsonl"
    log.write_text("".join(lines[: cut + 1]))
    _resume(reference["dir"] / "step9.npz", log=log)
    records = read_jsonl(log)
    assert [r["event"] for r in records[cut + 1 :]] == ["epoch", "epoch"]
    epochs = [r for r in records if r["event"] == "epoch"]
    assert [r["epoch"] for r in epochs] == [0, 1, 2]
    reference_epochs = [
        r for r in read_jsonl(reference["dir"] / "log.jsonl") if r["event"] == "epoch"
    ]
    assert [r["loss"] for r in epochs] == [r["loss"] for r in reference_epochs]


def test_a_checkpoint_that_does_not_fit_changes_nothing(reference: dict) -> None:
    from dualflow import nn, ops, optim
    from dualflow.data import DataLoader

    model = nn.Sequential(nn.Linear(4, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 5))
    opt = optim.Adam(list(model.params()), lr=0.01)
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    rng_before = dualflow.random.default_generator().state.numpy().copy()
    trainer = Trainer(model, opt, ops.softmax_cross_entropy, DataLoader([]), progress=False)
    with pytest.raises(CheckpointError, match="scheduler"):
        trainer.load(reference["dir"] / "step3.npz")
    sched = optim.lr_scheduler.StepLR(opt, step_size=1)
    trainer = Trainer(model, opt, ops.softmax_cross_entropy, DataLoader([]), scheduler=sched)
    with pytest.raises(ShapeError):
        trainer.load(reference["dir"] / "step3.npz")
    for name, value in model.state_dict().items():
        assert np.array_equal(value.numpy(), before[name])
    assert np.array_equal(dualflow.random.default_generator().state.numpy(), rng_before)
    assert trainer.global_step == 0


def test_resume_from_a_file_that_is_not_a_checkpoint(tmp_path) -> None:
    s = make_setup()
    dualflow.save({"x": 1}, tmp_path / "other.npz")
    with pytest.raises(CheckpointError, match="not a dualflow training checkpoint"):
        fit(*s.fit_args(), epochs=1, resume=tmp_path / "other.npz", progress=False)
    with pytest.raises(CheckpointError):
        fit(*s.fit_args(), epochs=1, resume=tmp_path / "missing.npz", progress=False)
