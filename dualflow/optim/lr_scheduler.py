"""Learning-rate schedulers: ``StepLR``, ``CosineAnnealingLR``, ``LinearLR`` and ``LinearWarmup``.

A scheduler computes each group's lr for its current epoch in closed form and writes it into the
optimizer's 0-d lr tensor with ``ops.assign``, so a compiled training step that reads the lr by
reference sees the new value without retracing.
"""

from __future__ import annotations

import math
from typing import Any

from dualflow import ops
from dualflow._config import no_grad
from dualflow.optim.optimizer import Optimizer


class LRScheduler:
    """Base class: ``step()`` advances ``last_epoch`` and sets every group's lr.

    As in PyTorch, constructing a scheduler records each group's ``initial_lr`` and applies the
    epoch-0 lr at once; call ``step()`` after each ``optimizer.step()``.

    Example:
        >>> import numpy as np
        >>> from dualflow.nn import Parameter
        >>> from dualflow.optim import SGD
        >>> opt = SGD([Parameter(np.zeros(1))], lr=1.0)
        >>> sched = StepLR(opt, step_size=1, gamma=0.5); sched.step(); sched.get_last_lr()
        [0.5]
    """

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        self.optimizer = optimizer
        for index, group in enumerate(optimizer.param_groups):
            if last_epoch == -1:
                group.setdefault("initial_lr", float(optimizer.lr_tensor(index).item()))
            elif "initial_lr" not in group:
                raise KeyError(
                    f"param group {index} has no 'initial_lr'; resuming with last_epoch="
                    f"{last_epoch} needs an optimizer that was scheduled before"
                )
        self.base_lrs = [float(group["initial_lr"]) for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._last_lr: list[float] = []
        self.step()

    def lr_at(self, epoch: int) -> list[float]:
        """Each group's lr at ``epoch`` (closed form; subclasses define it)."""
        raise NotImplementedError(f"{type(self).__name__} must define lr_at()")

    def step(self) -> None:
        """Advance one epoch and write the new lr into each group's lr tensor."""
        self.last_epoch += 1
        values = self.lr_at(self.last_epoch)
        with no_grad():
            for index, value in enumerate(values):
                ops.assign(self.optimizer.lr_tensor(index), value)
        self._last_lr = list(values)

    def get_last_lr(self) -> list[float]:
        """The lr of each group set by the last ``step()``, as Python floats."""
        return list(self._last_lr)

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer (whose own state dict holds the lr tensors' values)."""
        return {
            key: list(value) if isinstance(value, list) else value
            for key, value in self.__dict__.items()
            if key != "optimizer"
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore a ``state_dict()``; unknown keys raise ValueError and change nothing."""
        unknown = sorted(set(state_dict) - (set(self.__dict__) - {"optimizer"}))
        if unknown:
            raise ValueError(f"load_state_dict: unknown scheduler state keys {unknown}")
        self.__dict__.update(
            {k: list(v) if isinstance(v, list) else v for k, v in state_dict.items()}
        )


class StepLR(LRScheduler):
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
        if int(step_size) < 1:
            raise ValueError(f"StepLR: step_size must be >= 1, got {step_size}")
        self.step_size, self.gamma = int(step_size), float(gamma)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> list[float]:
        return [base * self.gamma ** (epoch // self.step_size) for base in self.base_lrs]


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
        if int(T_max) < 1:
            raise ValueError(f"CosineAnnealingLR: T_max must be >= 1, got {T_max}")
        self.T_max, self.eta_min = int(T_max), float(eta_min)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> list[float]:
        cosine = (1 + math.cos(math.pi * epoch / self.T_max)) / 2
        return [self.eta_min + (base - self.eta_min) * cosine for base in self.base_lrs]


class LinearLR(LRScheduler):
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
        if not 0.0 <= start_factor <= 1.0 or not 0.0 <= end_factor <= 1.0:
            raise ValueError("LinearLR: start_factor and end_factor must be in [0, 1]")
        if int(total_iters) < 1:
            raise ValueError(f"LinearLR: total_iters must be >= 1, got {total_iters}")
        self.start_factor, self.end_factor = float(start_factor), float(end_factor)
        self.total_iters = int(total_iters)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> list[float]:
        progress = min(epoch, self.total_iters) / self.total_iters
        factor = self.start_factor + (self.end_factor - self.start_factor) * progress
        return [base * factor for base in self.base_lrs]


class LinearWarmup(LinearLR):
    """Ramp the lr linearly from ``start_factor * base`` to ``base`` over ``warmup_steps``.

    ``LinearLR`` with ``end_factor=1`` and ``total_iters=warmup_steps``.

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
