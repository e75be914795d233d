"""The lr-scheduler compatibility table, shared by ``make_optim_references.py`` (torch) and
``test_sched_compat.py``: each case builds a scheduler from a ``lr_scheduler`` namespace and an
optimizer (SGD with momentum, or Adam), with two param groups (lr 1.0 and 0.5).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

EPOCHS = 14
METRICS = [1.0, 0.9, 0.95, 0.95, 0.94, 0.96, 0.8, 0.81, 0.82, 0.83, 0.84, 0.5, 0.6, 0.7]


def warmup_lambda(epoch: int) -> float:
    """A LambdaLR schedule: linear warm-up over 3 epochs, then 0.9 decay."""
    return (epoch + 1) / 3 if epoch < 3 else 0.9 ** (epoch - 3)


@dataclass
class SchedCase:
    """How to build one scheduler; ``optimizer`` is "sgd" or "adam"; ``kind`` picks the driver."""

    id: str
    build: Callable[[Any, Any], Any]
    optimizer: str = "sgd"
    kind: str = "step"  # "step", "plateau" (step(metric)) or "epochs" (step(fractional epoch))


CASES = [
    SchedCase("step", lambda s, o: s.StepLR(o, step_size=3, gamma=0.3)),
    SchedCase("multistep", lambda s, o: s.MultiStepLR(o, [2, 5, 5, 9], gamma=0.5)),
    SchedCase("constant", lambda s, o: s.ConstantLR(o, factor=0.25, total_iters=4)),
    SchedCase("linear", lambda s, o: s.LinearLR(o, 0.2, 0.9, total_iters=5)),
    SchedCase("exponential", lambda s, o: s.ExponentialLR(o, gamma=0.9)),
    SchedCase("polynomial", lambda s, o: s.PolynomialLR(o, total_iters=6, power=2.0)),
    SchedCase("cosine", lambda s, o: s.CosineAnnealingLR(o, T_max=5, eta_min=0.01)),
    SchedCase("lambda", lambda s, o: s.LambdaLR(o, warmup_lambda)),
    SchedCase("warm_restarts", lambda s, o: s.CosineAnnealingWarmRestarts(o, 3, 2, 0.01)),
    SchedCase(
        "warm_restarts_fractional",
        lambda s, o: s.CosineAnnealingWarmRestarts(o, 2, 1),
        kind="epochs",
    ),
    SchedCase("one_cycle_sgd", lambda s, o: s.OneCycleLR(o, max_lr=[1.0, 2.0], total_steps=14)),
    SchedCase(
        "one_cycle_adam_three_phase",
        lambda s, o: s.OneCycleLR(
            o, max_lr=0.1, epochs=2, steps_per_epoch=7, anneal_strategy="linear", three_phase=True
        ),
        optimizer="adam",
    ),
    SchedCase(
        "plateau", lambda s, o: s.ReduceLROnPlateau(o, patience=1, cooldown=1), kind="plateau"
    ),
    SchedCase(
        "plateau_max_abs",
        lambda s, o: s.ReduceLROnPlateau(
            o, mode="max", factor=0.5, patience=0, threshold=0.05, threshold_mode="abs", min_lr=0.2
        ),
        kind="plateau",
    ),
    SchedCase(
        "sequential",
        lambda s, o: s.SequentialLR(
            o, [s.LinearLR(o, 0.1, total_iters=3), s.ExponentialLR(o, 0.8)], milestones=[3]
        ),
    ),
    SchedCase(
        "sequential_three",
        lambda s, o: s.SequentialLR(
            o,
            [s.ConstantLR(o, 0.5, 2), s.CosineAnnealingLR(o, 4), s.StepLR(o, 2, 0.5)],
            milestones=[3, 8],
        ),
    ),
    SchedCase(
        "chained",
        lambda s, o: s.ChainedScheduler([s.ConstantLR(o, 0.5, 3), s.ExponentialLR(o, 0.9)]),
    ),
]

# Cases whose PyTorch state dict, saved after STATE_AT steps, is loaded into a fresh dualflow
# scheduler that must then continue exactly as PyTorch's did.
STATE_CASES = ["step", "cosine", "warm_restarts", "one_cycle_sgd", "plateau", "lambda"]
STATE_AT = 5
FRACTIONAL_EPOCHS = [0.5, 1.0, 1.25, 2.0, 2.5, 3.75, 4.0, 4.1, 5.9, 6.0, 7.5, 8.0, 9.99]
