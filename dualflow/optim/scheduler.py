"""``LRScheduler``: the base of every lr scheduler (PyTorch's attributes, step and state dicts).

A scheduler computes each group's lr and assigns it to ``group["lr"]``, which writes the
optimizer's 0-d lr tensor with ``ops.assign``: a compiled training step that reads the lr by
reference sees the new value without retracing. Subclasses give ``lr_at(epoch)`` in closed form
(the same values as PyTorch's chainable updates, up to float rounding).
"""

from __future__ import annotations

import warnings
from typing import Any

from dualflow import arguments
from dualflow.optim.optimizer import Optimizer

# Bookkeeping attributes of PyTorch schedulers that dualflow's do not need; a PyTorch state dict
# carrying them still loads.
_TORCH_ONLY = {"_get_lr_called_within_step", "_is_initial", "verbose", "_initial_step_done"}


def set_lr(optimizer: Optimizer, index: int, value: float) -> None:
    """Write ``value`` into group ``index``'s lr tensor (no retrace; a state write if traced)."""
    optimizer.lr_tensor(index)  # first sync a float the user assigned
    optimizer.param_groups[index]["lr"] = value


class LRScheduler:
    """Base class: ``step()`` advances ``last_epoch`` and sets every group's lr.

    As in PyTorch, constructing a scheduler records each group's ``initial_lr`` and applies the
    epoch-0 lr at once; call ``step()`` after each ``optimizer.step()``.

    Example:
        >>> import numpy as np
        >>> from dualflow.nn import Parameter
        >>> from dualflow.optim import SGD
        >>> from dualflow.optim.lr_scheduler import StepLR
        >>> opt = SGD([Parameter(np.zeros(1))], lr=1.0)
        >>> sched = StepLR(opt, step_size=1, gamma=0.5); sched.step(); sched.get_last_lr()
        [0.5]
    """

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        last_epoch = arguments.integer(type(self).__name__, "last_epoch", last_epoch, minimum=-1)
        self.optimizer = optimizer
        for index, group in enumerate(optimizer.param_groups):
            if last_epoch == -1:
                optimizer.lr_tensor(index)
                group.setdefault("initial_lr", group.initial_lr())  # bookkeeping: no retrace
            elif "initial_lr" not in group:
                raise KeyError(
                    f"param 'initial_lr' is not specified in param_groups[{index}] when resuming "
                    f"a scheduler with last_epoch={last_epoch}; load the optimizer's state first"
                )
        self.base_lrs = [float(group["initial_lr"]) for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._last_lr: list[float] = []
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        self.step()

    def lr_at(self, epoch: int) -> list[float]:
        """Each group's lr at ``epoch`` (closed form; subclasses define it)."""
        raise NotImplementedError(f"{type(self).__name__} must define lr_at()")

    def get_lr(self) -> list[float]:
        """Each group's lr at the current ``last_epoch``."""
        return self.lr_at(self.last_epoch)

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch (or jump to ``epoch``, deprecated as in PyTorch) and set the lrs."""
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
        else:
            warnings.warn(
                "The epoch parameter in `scheduler.step()` is deprecated (as in PyTorch); call "
                "step() without it",
                UserWarning,
                stacklevel=2,
            )
            self.last_epoch = epoch
        self._apply(self.get_lr())

    def _apply(self, values: list[float]) -> None:
        for index, value in enumerate(values):
            set_lr(self.optimizer, index, value)
        self._last_lr = [float(v) for v in values]

    def get_last_lr(self) -> list[float]:
        """The lr of each group set by the last ``step()``, as Python floats."""
        return list(self._last_lr)

    def state_dict(self) -> dict[str, Any]:
        """Every attribute but the optimizer (whose own state dict holds the lr values)."""
        return {
            key: list(value) if isinstance(value, list) else value
            for key, value in self.__dict__.items()
            if key != "optimizer"
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore a ``state_dict()`` (also PyTorch's); unknown keys raise, changing nothing."""
        known = set(self.__dict__) - {"optimizer"}
        unknown = sorted(set(state_dict) - known - _TORCH_ONLY)
        if unknown:
            raise ValueError(f"load_state_dict: unknown scheduler state keys {unknown}")
        self.__dict__.update(
            {
                k: list(v) if isinstance(v, list) else v
                for k, v in state_dict.items()
                if k not in _TORCH_ONLY
            }
        )


class MultiplicativeScheduler(LRScheduler):
    """A scheduler whose lr is ``base_lr * factor(epoch)`` (chainable: ``ChainedScheduler``)."""

    def factor(self, epoch: int) -> float:
        """The multiplier of every base lr at ``epoch``."""
        raise NotImplementedError(f"{type(self).__name__} must define factor()")

    def lr_at(self, epoch: int) -> list[float]:
        factor = self.factor(epoch)
        return [base * factor for base in self.base_lrs]
