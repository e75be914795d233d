"""A tiny, fully seeded training set-up shared by the training tests (model, data, optimizer)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import dualflow
from dualflow import nn, ops, optim
from dualflow.data import DataLoader, TensorDataset

N_SAMPLES, BATCH = 40, 8  # 5 steps per epoch


@dataclass
class Setup:
    """Everything ``fit`` needs, built from one seed."""

    model: Any
    optimizer: Any
    scheduler: Any
    loader: Any
    val_loader: Any
    loss_fn: Any = ops.softmax_cross_entropy

    def fit_args(self) -> tuple[Any, ...]:
        return (self.model, self.optimizer, self.loss_fn, self.loader)

    def params(self) -> dict[str, np.ndarray]:
        return {k: v.numpy().copy() for k, v in self.model.state_dict().items()}


def dataset(dtype: Any = np.float32) -> TensorDataset:
    rng = np.random.default_rng(123)
    x = rng.normal(size=(N_SAMPLES, 4)).astype(dtype)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 1).astype(np.int64)
    return TensorDataset(x, y)


def make_setup(
    seed: int = 0,
    dtype: Any = np.float32,
    dropout: float = 0.3,
    scheduler: bool = True,
    optimizer: str = "adam",
) -> Setup:
    """A Linear-BatchNorm-ReLU-Dropout-Linear classifier on 40 seeded samples, 3 classes."""
    dualflow.random.seed(seed)  # parameter init and dropout masks draw from the default generator
    model = nn.Sequential(
        nn.Linear(4, 16, dtype=dtype),
        nn.BatchNorm1d(16, dtype=dtype),
        nn.ReLU(),
        nn.Dropout(dropout),
        nn.Linear(16, 3, dtype=dtype),
    )
    params = list(model.params())
    opt = optim.Adam(params, lr=0.01) if optimizer == "adam" else optim.SGD(params, lr=0.1)
    sched = optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7) if scheduler else None
    loader = DataLoader(dataset(dtype), batch_size=BATCH, shuffle=True, seed=7)
    val_loader = DataLoader(dataset(dtype), batch_size=16)
    return Setup(model, opt, sched, loader, val_loader)


def without_timing(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """History records minus the wall-clock fields, which differ between runs."""
    return [
        {k: v for k, v in record.items() if k not in ("seconds", "steps_per_second")}
        for record in history
    ]
