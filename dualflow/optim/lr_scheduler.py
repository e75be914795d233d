"""Learning-rate schedulers with PyTorch's names and values (``torch.optim.lr_scheduler``).

Closed-form schedules live here (StepLR, MultiStepLR, ConstantLR, LinearLR, ExponentialLR,
PolynomialLR, CosineAnnealingLR, LambdaLR, and dualflow's LinearWarmup); the cyclic ones,
ReduceLROnPlateau and the combinators are imported from their modules. Every scheduler writes the
optimizer's lr tensors, so a compiled training step sees new lrs without retracing.
"""

from __future__ import annotations

import math
import types
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from dualflow import arguments
from dualflow.optim.lr_compose import ChainedScheduler, SequentialLR
from dualflow.optim.lr_cycles import CosineAnnealingWarmRestarts, OneCycleLR
from dualflow.optim.lr_plateau import ReduceLROnPlateau
from dualflow.optim.optimizer import Optimizer
from dualflow.optim.scheduler import LRScheduler, MultiplicativeScheduler

__all__ = [
    "ChainedScheduler",
    "ConstantLR",
    "CosineAnnealingLR",
    "CosineAnnealingWarmRestarts",
    "ExponentialLR",
    "LRScheduler",
    "LambdaLR",
    "LinearLR",
    "LinearWarmup",
    "MultiStepLR",
    "OneCycleLR",
    "PolynomialLR",
    "ReduceLROnPlateau",
    "SequentialLR",
    "StepLR",
]


def _positive_int(name: str, value: Any) -> int:
    owner, _, argument = name.partition(": ")
    # A whole float counts (PyTorch's own tutorial passes StepLR(optimizer, 1.0, gamma=0.95)).
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return arguments.integer(owner, argument, value)


def _gamma(owner: str, gamma: Any) -> float:
    # a negative factor would flip the lr's sign every other decay
    return arguments.real(owner, "gamma", gamma, 0.0, what="the decay factor")


class StepLR(MultiplicativeScheduler):
    """Multiply the lr by ``gamma`` every ``step_size`` epochs: ``base * gamma**(e // size)``.

    Example:
        >>> import numpy as np
        >>> from dualflow.nn import Parameter
        >>> from dualflow.optim import SGD
        >>> sched = StepLR(SGD([Parameter(np.zeros(1))], lr=1.0), step_size=2, gamma=0.1)
        >>> [sched.lr_at(e)[0] for e in range(5)]
        [1.0, 1.0, 0.1, 0.1, 0.010000000000000002]
    """

    def __init__(
        self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1
    ) -> None:
        self.step_size = _positive_int("StepLR: step_size", step_size)
        self.gamma = _gamma("StepLR", gamma)
        super().__init__(optimizer, last_epoch)

    def factor(self, epoch: int) -> float:
        return self.gamma ** (epoch // self.step_size)


class MultiStepLR(MultiplicativeScheduler):
    """Multiply the lr by ``gamma`` at each milestone epoch (a repeated milestone counts twice).

    Example:
        >>> import numpy as np
        >>> from dualflow.nn import Parameter
        >>> from dualflow.optim import SGD
        >>> sched = MultiStepLR(SGD([Parameter(np.zeros(1))], lr=1.0), [1, 3], gamma=0.5)
        >>> [sched.lr_at(e)[0] for e in range(5)]
        [1.0, 0.5, 0.5, 0.25, 0.25]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        milestones: Iterable[int],
        gamma: float = 0.1,
        last_epoch: int = -1,
    ) -> None:
        checked = [arguments.integer("MultiStepLR", "milestones", m, minimum=0) for m in milestones]
        self.milestones = Counter(checked)
        self.gamma = _gamma("MultiStepLR", gamma)
        super().__init__(optimizer, last_epoch)

    def factor(self, epoch: int) -> float:
        return self.gamma ** bisect_right(sorted(self.milestones.elements()), epoch)


class ConstantLR(MultiplicativeScheduler):
    """The lr times ``factor`` until epoch ``total_iters``, then the base lr.

    Example:
        >>> import numpy as np
        >>> from dualflow.nn import Parameter
        >>> from dualflow.optim import SGD
        >>> sched = ConstantLR(SGD([Parameter(np.zeros(1))], lr=1.0), factor=0.5, total_iters=2)
        >>> [sched.lr_at(e)[0] for e in range(4)]
        [0.5, 0.5, 1.0, 1.0]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        factor: float = 1.0 / 3,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        self.factor_value = arguments.real("ConstantLR", "factor", factor, 0.0, 1.0)
        self.total_iters = arguments.integer("ConstantLR", "total_iters", total_iters, minimum=0)
        super().__init__(optimizer, last_epoch)

    def factor(self, epoch: int) -> float:
        return 1.0 if epoch >= self.total_iters else self.factor_value

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["factor"] = state.pop("factor_value")  # PyTorch's attribute name
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        if "factor" in state:
            state["factor_value"] = state.pop("factor")
        super().load_state_dict(state)


class LinearLR(MultiplicativeScheduler):
    """Scale the lr linearly from ``start_factor`` to ``end_factor`` over ``total_iters`` epochs.

    ``lr = base * (start + (end - start) * min(e, total_iters) / total_iters)``, then constant.

    Example:
        >>> import numpy as np
        >>> from dualflow.nn import Parameter
        >>> from dualflow.optim import SGD
        >>> sched = LinearLR(SGD([Parameter(np.zeros(1))], lr=1.0), 0.5, 1.0, total_iters=2)
        >>> [sched.lr_at(e)[0] for e in range(4)]
        [0.5, 0.75, 1.0, 1.0]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        self.start_factor = arguments.real("LinearLR", "start_factor", start_factor, 0.0, 1.0)
        self.end_factor = arguments.real("LinearLR", "end_factor", end_factor, 0.0, 1.0)
        self.total_iters = _positive_int("LinearLR: total_iters", total_iters)
        super().__init__(optimizer, last_epoch)

    def factor(self, epoch: int) -> float:
        progress = min(epoch, self.total_iters) / self.total_iters
        return self.start_factor + (self.end_factor - self.start_factor) * progress


class LinearWarmup(LinearLR):
    """Ramp the lr linearly from ``start_factor * base`` to ``base`` over ``warmup_steps``
    (``LinearLR`` with ``end_factor=1``; dualflow's shorthand).

    Example:
        >>> import numpy as np
        >>> from dualflow.nn import Parameter
        >>> from dualflow.optim import SGD
        >>> sched = LinearWarmup(SGD([Parameter(np.zeros(1))], lr=1.0), 4, start_factor=0.0)
        >>> [sched.lr_at(e)[0] for e in range(6)]
        [0.0, 0.25, 0.5, 0.75, 1.0, 1.0]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        warmup_steps: int,
        start_factor: float = 0.1,
        last_epoch: int = -1,
    ) -> None:
        super().__init__(optimizer, start_factor, 1.0, warmup_steps, last_epoch)


class ExponentialLR(MultiplicativeScheduler):
    """Multiply the lr by ``gamma`` every epoch: ``base * gamma**e``.

    Example:
        >>> import numpy as np
        >>> from dualflow.nn import Parameter
        >>> from dualflow.optim import SGD
        >>> sched = ExponentialLR(SGD([Parameter(np.zeros(1))], lr=1.0), gamma=0.5)
        >>> [sched.lr_at(e)[0] for e in range(3)]
        [1.0, 0.5, 0.25]
    """

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = _gamma("ExponentialLR", gamma)
        super().__init__(optimizer, last_epoch)

    def factor(self, epoch: int) -> float:
        return self.gamma**epoch


class PolynomialLR(MultiplicativeScheduler):
    """Decay to 0 over ``total_iters`` epochs: ``base * (1 - min(e, T) / T) ** power``.

    Example:
        >>> import numpy as np
        >>> from dualflow.nn import Parameter
        >>> from dualflow.optim import SGD
        >>> sched = PolynomialLR(SGD([Parameter(np.zeros(1))], lr=1.0), total_iters=2)
        >>> [sched.lr_at(e)[0] for e in range(3)]
        [1.0, 0.5, 0.0]
    """

    def __init__(
        self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0, last_epoch: int = -1
    ) -> None:
        self.total_iters = _positive_int("PolynomialLR: total_iters", total_iters)
        self.power = arguments.real("PolynomialLR", "power", power, 0.0)
        super().__init__(optimizer, last_epoch)

    def factor(self, epoch: int) -> float:
        return (1.0 - min(self.total_iters, epoch) / self.total_iters) ** self.power


class CosineAnnealingLR(LRScheduler):
    """Cosine from the base lr down to ``eta_min`` over ``T_max`` epochs (SGDR without restarts).

    ``lr = eta_min + (base - eta_min) * (1 + cos(pi * e / T_max)) / 2``.

    Example:
        >>> import numpy as np
        >>> from dualflow.nn import Parameter
        >>> from dualflow.optim import SGD
        >>> sched = CosineAnnealingLR(SGD([Parameter(np.zeros(1))], lr=1.0), T_max=2)
        >>> [round(sched.lr_at(e)[0], 6) for e in range(3)]
        [1.0, 0.5, 0.0]
    """

    def __init__(
        self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1
    ) -> None:
        self.T_max = _positive_int("CosineAnnealingLR: T_max", T_max)
        self.eta_min = arguments.real("CosineAnnealingLR", "eta_min", eta_min)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> list[float]:
        cosine = (1 + math.cos(math.pi * epoch / self.T_max)) / 2
        return [self.eta_min + (base - self.eta_min) * cosine for base in self.base_lrs]

    def factor(self, epoch: int) -> float:
        """The multiplier when ``eta_min == 0`` (then it chains like the others)."""
        if self.eta_min != 0:
            raise NotImplementedError(
                "ChainedScheduler: CosineAnnealingLR with eta_min != 0 is not a pure factor"
            )
        return (1 + math.cos(math.pi * epoch / self.T_max)) / 2


class LambdaLR(LRScheduler):
    """``lr = base * lr_lambda(epoch)`` (one function, or one per param group).

    ``state_dict`` saves the ``__dict__`` of callable objects and None for plain functions, as
    PyTorch.

    Example:
        >>> import numpy as np
        >>> from dualflow.nn import Parameter
        >>> from dualflow.optim import SGD
        >>> sched = LambdaLR(SGD([Parameter(np.zeros(1))], lr=2.0), lambda e: 1 / (e + 1))
        >>> [sched.lr_at(e)[0] for e in range(3)]
        [2.0, 1.0, 0.6666666666666666]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        lr_lambda: Callable[[int], float] | list[Callable[[int], float]],
        last_epoch: int = -1,
    ) -> None:
        groups = len(optimizer.param_groups)
        lambdas = list(lr_lambda) if isinstance(lr_lambda, list | tuple) else [lr_lambda] * groups
        if len(lambdas) != groups:
            raise ValueError(f"Expected {groups} lr_lambdas, but got {len(lambdas)}")
        if not all(callable(f) for f in lambdas):
            raise TypeError("LambdaLR: lr_lambda must be callable (or a list of callables)")
        self.lr_lambdas = lambdas
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> list[float]:
        return [base * f(epoch) for f, base in zip(self.lr_lambdas, self.base_lrs)]

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["lr_lambdas"] = [
            None if isinstance(f, types.FunctionType) else dict(f.__dict__) for f in self.lr_lambdas
        ]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        saved = state.pop("lr_lambdas", [None] * len(self.lr_lambdas))
        super().load_state_dict(state)
        for f, attributes in zip(self.lr_lambdas, saved):
            if attributes is not None:
                f.__dict__.update(attributes)
