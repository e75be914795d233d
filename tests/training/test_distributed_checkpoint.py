"""Checkpoints of a data-parallel ``fit`` on loopback ranks: rank 0 writes one file holding every
rank's own part; each rank resumes its own loader position and buffers; a job of another size,
or a file rank 0 cannot write, fails on every rank. (The kill-and-resume run under real MPI is
``tests/distributed/test_mpi_resume.py``.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dualflow import nn, ops, optim
from dualflow.data import DataLoader, TensorDataset
from dualflow.distributed import create_multi_node_optimizer, run_loopback
from dualflow.errors import CheckpointError
from dualflow.training import Trainer, fit, load_checkpoint


def _setup(comm: Any) -> tuple:
    rng = np.random.default_rng(comm.rank)
    x = rng.normal(size=(24, 4)).astype(np.float32)
    loader = DataLoader(TensorDataset(x, (x[:, 0] > 0).astype(np.int64)), 8, True, seed=comm.rank)
    model = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.Linear(6, 2))
    comm.bcast_params(model)
    sgd = optim.SGD(list(model.params()), lr=0.1, momentum=0.9)
    return model, create_multi_node_optimizer(sgd, comm, model=model), loader


def test_rank_0_writes_every_ranks_part_and_each_rank_resumes_its_own(tmp_path: Path) -> None:
    path = tmp_path / "ckpt.npz"

    def first(comm: Any) -> dict:
        model, opt, loader = _setup(comm)
        trainer = Trainer(
            model,
            opt,
            ops.softmax_cross_entropy,
            loader,
            progress=False,
            checkpoint_path=path,
            checkpoint_every=4,
        )
        trainer.run(epochs=2)  # checkpoints at steps 4 (mid-epoch 2)...
        return {"buffers": model[1].running_mean.numpy().copy()}

    run_loopback(first, 2)
    saved = load_checkpoint(path)
    assert saved["world_size"] == 2 and len(saved["ranks"]) == 2
    assert [r["loader"]["seed"] for r in saved["ranks"]] == [0, 1]
    assert saved["loop"]["global_step"] == 4 and saved["ranks"][1]["loop"]["batch"] == 1

    def resumed(comm: Any) -> tuple:
        model, opt, loader = _setup(comm)
        trainer = Trainer(model, opt, ops.softmax_cross_entropy, loader, progress=False)
        trainer.load(path)
        mine = saved["ranks"][comm.rank]
        running = model[1].running_mean.numpy().copy()
        return loader.state_dict(), running, mine

    for state, running, mine in run_loopback(resumed, 2):
        assert state == mine["loader"]
        np.testing.assert_array_equal(running, mine["buffers"]["1.running_mean"])


def test_resuming_with_another_number_of_ranks_fails_on_every_rank(tmp_path: Path) -> None:
    path = tmp_path / "ckpt.npz"

    def train(comm: Any) -> None:
        model, opt, loader = _setup(comm)
        fit(model, opt, ops.softmax_cross_entropy, loader, 1, progress=False, checkpoint_path=path)

    run_loopback(train, 2)

    def resume(comm: Any) -> str:
        model, opt, loader = _setup(comm)
        with pytest.raises(CheckpointError, match="written by a 2-rank job; this job has 3"):
            fit(model, opt, ops.softmax_cross_entropy, loader, 2, progress=False, resume=path)
        return "raised"

    assert run_loopback(resume, 3) == ["raised"] * 3


def test_a_checkpoint_rank_0_cannot_write_fails_on_every_rank(tmp_path: Path) -> None:
    target = tmp_path / "missing-dir" / "ckpt.npz"

    def train(comm: Any) -> str:
        model, opt, loader = _setup(comm)
        trainer = Trainer(model, opt, ops.softmax_cross_entropy, loader, progress=False)
        with pytest.raises(CheckpointError, match="rank 0 could not write the checkpoint"):
            trainer.save(target)
        return "raised"

    assert run_loopback(train, 2) == ["raised"] * 2
    assert not target.exists()
