"""``ReduceLROnPlateau``: cut the lr by ``factor`` when a metric stops improving (PyTorch's).

The metric is a Python number (call ``step(float(loss))`` outside a compiled step); the new lr is
written into the optimizer's lr tensors, so compiled steps see it without retracing.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from dualflow import arguments
from dualflow.optim.optimizer import Optimizer
from dualflow.optim.scheduler import LRScheduler, set_lr


class ReduceLROnPlateau(LRScheduler):
    """Multiply the lr by ``factor`` after ``patience`` epochs without improvement.

    ``mode`` is ``"min"`` or ``"max"``; an improvement beats the best value by ``threshold``
    (relative or absolute, ``threshold_mode``). After a cut, ``cooldown`` epochs are skipped;
    lrs never go below ``min_lr`` and changes smaller than ``eps`` are ignored.

    Example:
        >>> import numpy as np
        >>> from dualflow.nn import Parameter
        >>> from dualflow.optim import SGD
        >>> sched = ReduceLROnPlateau(SGD([Parameter(np.zeros(1))], lr=1.0), patience=1)
        >>> for loss in [1.0, 1.0, 1.0, 1.0]:
        ...     sched.step(loss)
        >>> sched.get_last_lr()
        [0.1]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr: list[float] | float = 0,
        eps: float = 1e-8,
    ) -> None:
        name = "ReduceLROnPlateau"
        factor = arguments.real(name, "factor", factor, 0.0, 1.0, open_high=True)
        patience = arguments.integer(name, "patience", patience, minimum=0)
        cooldown = arguments.integer(name, "cooldown", cooldown, minimum=0)
        eps = arguments.real(name, "eps", eps, 0.0)
        threshold = arguments.real(name, "threshold", threshold, 0.0)
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.factor, self.optimizer = factor, optimizer
        groups = len(optimizer.param_groups)
        if isinstance(min_lr, list | tuple):
            if len(min_lr) != groups:
                raise ValueError(f"expected {groups} min_lrs, got {len(min_lr)}")
            self.default_min_lr = None
            self.min_lrs = [arguments.real(name, "min_lr", m, 0.0) for m in min_lr]
        else:
            self.default_min_lr = arguments.real(name, "min_lr", min_lr, 0.0)
            self.min_lrs = [self.default_min_lr] * groups
        self.patience, self.cooldown, self.eps = patience, cooldown, eps
        self.last_epoch = 0
        self._step_count = 0
        self._last_lr = [group.initial_lr() for group in optimizer.param_groups]
        self._init_is_better(mode, threshold, threshold_mode)
        self._reset()

    def _reset(self) -> None:
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def _init_is_better(self, mode: str, threshold: float, threshold_mode: str) -> None:
        if mode not in ("min", "max"):
            raise ValueError(f"mode {mode} is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"threshold mode {threshold_mode} is unknown!")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode

    def _is_better(self, a: float, best: float) -> bool:
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min":
            return a < best - self.threshold
        if self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    @property
    def in_cooldown(self) -> bool:
        """Whether epochs after a cut are still being skipped."""
        return self.cooldown_counter > 0

    def step(self, metrics: Any, epoch: int | None = None) -> None:  # type: ignore[override]
        """Record this epoch's ``metrics`` and cut the lrs after a plateau."""
        current = float(metrics)
        if epoch is not None:
            warnings.warn("The epoch parameter of step() is deprecated", UserWarning, stacklevel=2)
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self._is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [group.initial_lr() for group in self.optimizer.param_groups]

    def _reduce_lr(self) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"The number of param groups in the optimizer ({len(groups)}) differs from "
                    f"when ReduceLROnPlateau was initialized ({len(self.min_lrs)}); update min_lrs"
                )
            self.min_lrs = [self.default_min_lr] * len(groups)
        for index, group in enumerate(groups):
            old = group.initial_lr()
            new = max(old * self.factor, self.min_lrs[index])
            if old - new > self.eps:
                set_lr(self.optimizer, index, new)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore a ``state_dict()`` (also PyTorch's)."""
        super().load_state_dict(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)
