"""``fit``: the loss goes down, history and JSON-lines logs hold what they say, callbacks run."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dualflow
from dualflow import nn, ops, optim
from dualflow.training import Trainer, fit, make_train_step, read_jsonl
from tests.training.toy import make_setup


def test_fit_decreases_the_loss_and_reports_each_epoch() -> None:
    s = make_setup(dropout=0.0, scheduler=False)
    history = fit(*s.fit_args(), epochs=6, val_loader=s.val_loader, progress=False)
    assert [r["epoch"] for r in history] == list(range(6))
    assert [r["step"] for r in history] == [5, 10, 15, 20, 25, 30]
    assert history[-1]["loss"] < 0.7 * history[0]["loss"]
    assert history[-1]["val_loss"] < history[0]["val_loss"]
    for record in history:
        assert 0.0 <= record["accuracy"] <= 1.0 and 0.0 <= record["val_accuracy"] <= 1.0
        assert record["seconds"] > 0 and record["steps_per_second"] > 0
    assert s.model.training  # validation ran in eval mode and switched back


def test_progress_bar_runs(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("tqdm")
    s = make_setup()
    fit(*s.fit_args(), epochs=1, progress=True)
    err = capsys.readouterr().err
    assert "epoch 1/1" in err and "loss=" in err and "accuracy=" in err and "step/s" in err


def test_scheduler_steps_once_per_epoch_and_history_shows_the_lr_used() -> None:
    s = make_setup()
    history = fit(*s.fit_args(), epochs=3, scheduler=s.scheduler, progress=False)
    lrs = [r["lr"][0] for r in history]
    np.testing.assert_allclose(lrs, [0.01, 0.007, 0.0049], rtol=1e-6)
    assert s.scheduler.last_epoch == 3


def test_jsonl_log_has_one_record_per_epoch_and_per_checkpoint(tmp_path) -> None:
    s = make_setup()
    log, ckpt = tmp_path / "log.jsonl", tmp_path / "ckpt-{step}.npz"
    history = fit(
        *s.fit_args(), epochs=2, val_loader=s.val_loader, log_path=log,
        checkpoint_path=ckpt, checkpoint_every=4, progress=False,
    )  # fmt: skip
    records = read_jsonl(log)
    assert [r["event"] for r in records] == ["checkpoint", "epoch", "checkpoint", "epoch"]
    epochs = [r for r in records if r["event"] == "epoch"]
    assert [{k: v for k, v in r.items() if k != "event"} for r in epochs] == history
    assert set(epochs[0]) >= {"epoch", "step", "loss", "accuracy", "val_loss", "val_accuracy", "lr"}
    checkpoints = [r for r in records if r["event"] == "checkpoint"]
    assert [(r["step"], r["epoch"], r["batch"]) for r in checkpoints] == [(4, 0, 4), (8, 1, 3)]
    assert [r["path"] for r in checkpoints] == [str(tmp_path / f"ckpt-{n}.npz") for n in (4, 8)]
    assert all((tmp_path / f"ckpt-{n}.npz").exists() for n in (4, 8))


def test_log_is_started_afresh_unless_resuming(tmp_path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text('{"event": "old"}\n')
    s = make_setup()
    fit(*s.fit_args(), epochs=1, log_path=log, progress=False)
    assert [r["event"] for r in read_jsonl(log)] == ["epoch"]


def test_end_of_epoch_checkpoints_when_no_step_interval(tmp_path) -> None:
    s = make_setup()
    log = tmp_path / "log.jsonl"
    fit(*s.fit_args(), epochs=2, log_path=log, checkpoint_path=tmp_path / "c.npz", progress=False)
    events = [(r["event"], r["step"]) for r in read_jsonl(log)]
    assert events == [("epoch", 5), ("checkpoint", 5), ("epoch", 10), ("checkpoint", 10)]


class Recorder:
    def __init__(self) -> None:
        self.steps: list[dict] = []
        self.epochs: list[dict] = []

    def on_step_end(self, info: dict) -> None:
        self.steps.append(dict(info))

    def on_epoch_end(self, info: dict) -> None:
        self.epochs.append(dict(info))


class StopAfterFirstEpoch:
    def on_epoch_end(self, info: dict) -> None:
        info["trainer"].stop_training = True


def test_callbacks_are_called_and_can_stop_training() -> None:
    s = make_setup()
    recorder, only_steps = Recorder(), type("OnlySteps", (), {"on_step_end": lambda self, i: None})
    history = fit(*s.fit_args(), epochs=3, callbacks=[recorder, only_steps()], progress=False)
    assert [i["step"] for i in recorder.steps] == list(range(1, 16))
    assert [i["batch"] for i in recorder.steps[:6]] == [1, 2, 3, 4, 5, 1]
    assert all(math.isfinite(i["loss"]) and 0 <= i["accuracy"] <= 1 for i in recorder.steps)
    assert [i["epoch"] for i in recorder.epochs] == [0, 1, 2]
    assert recorder.epochs[-1]["loss"] == history[-1]["loss"]
    assert isinstance(recorder.steps[0]["trainer"], Trainer)
    s = make_setup()
    assert len(fit(*s.fit_args(), epochs=3, callbacks=[StopAfterFirstEpoch()], progress=False)) == 1


def test_custom_step_fn_is_used() -> None:
    s = make_setup()
    calls = []
    inner = make_train_step(s.model, s.optimizer, s.loss_fn)

    def step(x, y):
        calls.append(x.shape)
        return inner(x, y)

    fit(*s.fit_args(), epochs=1, step_fn=step, progress=False)
    assert calls == [(8, 4)] * 5


def test_plain_iterables_work() -> None:
    s = make_setup()
    batches = list(s.loader)
    history = fit(s.model, s.optimizer, s.loss_fn, batches, epochs=2, progress=False)
    assert len(history) == 2 and history[0]["accuracy"] is not None


def test_regression_has_no_accuracy() -> None:
    x = np.random.default_rng(0).normal(size=(32, 3)).astype(np.float32)
    batches = [
        (dualflow.tensor(x[i : i + 8]), dualflow.tensor(x[i : i + 8, :1] * 2))
        for i in range(0, 32, 8)
    ]
    model = nn.Linear(3, 1)
    opt = optim.SGD(list(model.params()), lr=0.1)
    history = fit(
        model, opt, ops.mean_squared_error, batches, epochs=3, val_loader=batches, progress=False
    )
    assert history[0]["accuracy"] is None and history[0]["val_accuracy"] is None
    assert history[-1]["loss"] < history[0]["loss"]


def test_bad_checkpoint_options_are_rejected() -> None:
    s = make_setup()
    with pytest.raises(ValueError, match="checkpoint_path"):
        fit(*s.fit_args(), epochs=1, checkpoint_every=2, progress=False)


def test_without_tqdm_there_is_no_bar(monkeypatch, capsys: pytest.CaptureFixture[str]) -> None:
    import dualflow.training.progress as progress

    monkeypatch.setattr(progress, "tqdm", None)  # as if the optional dependency were missing
    s = make_setup()
    assert len(fit(*s.fit_args(), epochs=1, progress=True)) == 1
    assert capsys.readouterr().err == ""
