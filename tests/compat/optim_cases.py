"""The optimizer compatibility table, shared by ``make_optim_references.py`` (run with torch) and
``test_optim_compat.py``: each case is an optimizer name and PyTorch keyword arguments.

Both sides get the same initial parameters and the same gradient sequence, so differences come
from the update rules alone.
"""

from __future__ import annotations

import numpy as np

STEPS = 8
SHAPES = ((3, 4), (5,))

CASES = [
    ("Adadelta", {}),
    ("Adadelta", {"lr": 0.5, "rho": 0.8, "eps": 1e-4, "weight_decay": 0.1, "maximize": True}),
    ("Adagrad", {"lr": 0.1}),
    (
        "Adagrad",
        {"lr": 0.1, "lr_decay": 0.05, "weight_decay": 0.1, "initial_accumulator_value": 0.2},
    ),
    ("Adamax", {"lr": 0.01}),
    ("Adamax", {"lr": 0.01, "betas": (0.8, 0.9), "weight_decay": 0.1, "maximize": True}),
    ("NAdam", {"lr": 0.01}),
    ("NAdam", {"lr": 0.01, "weight_decay": 0.1, "momentum_decay": 0.01}),
    ("NAdam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("RAdam", {"lr": 0.01}),
    ("RAdam", {"lr": 0.01, "betas": (0.9, 0.99), "weight_decay": 0.1}),
    ("RAdam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True, "maximize": True}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "maximize": True}),
    ("Adam", {"lr": 0.01, "amsgrad": True, "maximize": True}),
    ("AdamW", {"lr": 0.01, "maximize": True}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.5, "centered": True, "maximize": True}),
]


def case_id(name: str, kwargs: dict) -> str:
    """A stable key for the references: ``Adam[lr=0.01,amsgrad=True]``."""
    return name + "[" + ",".join(f"{k}={v}" for k, v in kwargs.items()) + "]"


def problem(dtype: str) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
    """Initial parameters and ``STEPS`` gradients per parameter, in ``dtype``."""
    rng = np.random.default_rng(7)
    params = [rng.standard_normal(shape).astype(dtype) for shape in SHAPES]
    grads = [[rng.standard_normal(shape).astype(dtype) for shape in SHAPES] for _ in range(STEPS)]
    return params, grads
