"""Scheduler combinators: ``SequentialLR`` (one scheduler after another at milestones) and
``ChainedScheduler`` (several at once, their factors multiplied), as PyTorch's.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

from dualflow.optim.lr_plateau import ReduceLROnPlateau
from dualflow.optim.optimizer import Optimizer
from dualflow.optim.scheduler import LRScheduler, set_lr


def _check_schedulers(name: str, optimizer: Optimizer, schedulers: Sequence[Any]) -> None:
    if len(schedulers) < 1:
        raise ValueError(f"{name} expects at least one scheduler, but got no scheduler.")
    for index, scheduler in enumerate(schedulers):
        if not hasattr(scheduler, "optimizer"):
            raise TypeError(f"{name} at index {index} should have `optimizer` as its attribute.")
        if isinstance(scheduler, ReduceLROnPlateau):
            raise ValueError(
                f"{name} does not support `ReduceLROnPlateau` scheduler as it requires "
                f"additional kwargs to be specified when calling `step` (index {index})"
            )
        if scheduler.optimizer is not optimizer:
            raise ValueError(f"{name} expects all schedulers to belong to the same optimizer")


class _Composite(LRScheduler):
    """State dicts that nest the inner schedulers' (PyTorch's ``_schedulers`` key)."""

    _schedulers: list[LRScheduler]

    def state_dict(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        inner = state.pop("_schedulers")
        if len(inner) != len(self._schedulers):
            raise ValueError("load_state_dict: the number of inner schedulers differs")
        for scheduler, saved in zip(self._schedulers, inner):
            scheduler.load_state_dict(saved)
        self.__dict__.update({k: v for k, v in state.items() if k != "optimizer"})


class SequentialLR(_Composite):
    """Run ``schedulers[i]`` from ``milestones[i-1]`` on, restarted at epoch 0 there.

    Example:
        >>> import numpy as np
        >>> from dualflow.nn import Parameter
        >>> from dualflow.optim import SGD
        >>> from dualflow.optim.lr_scheduler import ExponentialLR, LinearLR
        >>> opt = SGD([Parameter(np.zeros(1))], lr=1.0)
        >>> warm = LinearLR(opt, start_factor=0.5, total_iters=2)
        >>> decay = ExponentialLR(opt, gamma=0.5)
        >>> sched = SequentialLR(opt, [warm, decay], milestones=[2])
        >>> lrs = [sched.get_last_lr()[0]]
        >>> for _ in range(4):
        ...     sched.step(); lrs.append(sched.get_last_lr()[0])
        >>> lrs
        [0.5, 0.75, 1.0, 0.5, 0.25]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        schedulers: list[LRScheduler],
        milestones: list[int],
        last_epoch: int = -1,
    ) -> None:
        _check_schedulers("SequentialLR", optimizer, schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                "SequentialLR expects one more scheduler than milestones, got "
                f"{len(schedulers)} schedulers and {len(milestones)} milestones"
            )
        self._schedulers, self._milestones = list(schedulers), list(milestones)
        self.last_epoch, self.optimizer = last_epoch + 1, optimizer
        for index, group in enumerate(optimizer.param_groups):
            set_lr(optimizer, index, group["initial_lr"])
        for scheduler in self._schedulers:  # undo the step each constructor made
            scheduler.last_epoch -= 1
        active = self._schedulers[bisect_right(self._milestones, 0)]
        active._initial_step()
        self._step_count = 0
        self._last_lr = active.get_last_lr()

    def step(self) -> None:  # type: ignore[override]
        """Advance the active scheduler (restarting the next one at its milestone)."""
        self._step_count += 1
        self.last_epoch += 1
        index = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[index]
        if index > 0 and self._milestones[index - 1] == self.last_epoch:
            scheduler.last_epoch = 0
            scheduler._apply(scheduler.get_lr())
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()


class ChainedScheduler(_Composite):
    """Step several schedulers together; their lr factors multiply (PyTorch's chaining).

    Every scheduler must be a pure factor of the base lr (StepLR, MultiStepLR, ConstantLR,
    LinearLR, ExponentialLR, PolynomialLR, CosineAnnealingLR with eta_min=0).

    Example:
        >>> import numpy as np
        >>> from dualflow.nn import Parameter
        >>> from dualflow.optim import SGD
        >>> from dualflow.optim.lr_scheduler import ConstantLR, ExponentialLR
        >>> opt = SGD([Parameter(np.zeros(1))], lr=1.0)
        >>> sched = ChainedScheduler([ConstantLR(opt, 0.5, total_iters=2), ExponentialLR(opt, 0.9)])
        >>> lrs = [sched.get_last_lr()[0]]
        >>> for _ in range(3):
        ...     sched.step(); lrs.append(round(sched.get_last_lr()[0], 6))
        >>> lrs
        [0.5, 0.45, 0.81, 0.729]
    """

    def __init__(
        self, schedulers: Sequence[LRScheduler], optimizer: Optimizer | None = None
    ) -> None:
        optimizer = optimizer or schedulers[0].optimizer
        _check_schedulers("ChainedScheduler", optimizer, schedulers)
        for scheduler in schedulers:
            scheduler.factor(0)  # raises for a scheduler that is not a pure factor
        self._schedulers, self.optimizer = list(schedulers), optimizer
        self._step_count, self.last_epoch = 0, 0
        self._chain()

    def _chain(self) -> None:
        base = self._schedulers[0].base_lrs
        product = 1.0
        for scheduler in self._schedulers:
            product *= scheduler.factor(scheduler.last_epoch)
        for index, b in enumerate(base):
            set_lr(self.optimizer, index, b * product)
        self._last_lr = [b * product for b in base]

    def step(self) -> None:  # type: ignore[override]
        """Step every scheduler, then set the product of their factors."""
        self._step_count += 1
        for scheduler in self._schedulers:
            scheduler.step()
        self._chain()
