"""Cyclic lr schedules: ``CosineAnnealingWarmRestarts`` (SGDR) and ``OneCycleLR`` (PyTorch's).

``OneCycleLR`` also cycles momentum (SGD/RMSprop ``momentum``, Adam-family ``beta1``); those
values are tensors of the optimizer's param groups (see ``optim.param_group``), so cycling them
does not retrace a compiled step either.
"""

from __future__ import annotations

import math
from typing import Any

from dualflow import arguments
from dualflow.optim.optimizer import Optimizer
from dualflow.optim.scheduler import LRScheduler


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing from the base lr to ``eta_min`` over ``T_i`` epochs, then a restart;
    ``T_i`` starts at ``T_0`` and is multiplied by ``T_mult`` at each restart.

    ``step(epoch)`` accepts fractional epochs (e.g. ``epoch + batch / batches``), as PyTorch.

    Example:
        >>> import numpy as np
        >>> from dualflow.nn import Parameter
        >>> from dualflow.optim import SGD
        >>> sched = CosineAnnealingWarmRestarts(SGD([Parameter(np.zeros(1))], lr=1.0), T_0=2)
        >>> lrs = [sched.get_last_lr()[0]]
        >>> for _ in range(3):
        ...     sched.step(); lrs.append(round(sched.get_last_lr()[0], 6))
        >>> lrs
        [1.0, 0.5, 1.0, 0.5]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        T_0: int,
        T_mult: int = 1,
        eta_min: float = 0.0,
        last_epoch: int = -1,
    ) -> None:
        if isinstance(T_0, bool) or not isinstance(T_0, int) or T_0 <= 0:
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if isinstance(T_mult, bool) or not isinstance(T_mult, int) or T_mult < 1:
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        eta_min = arguments.real("CosineAnnealingWarmRestarts", "eta_min", eta_min)
        self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, eta_min
        self.T_cur: float = last_epoch
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> list[float]:
        """The lrs at the current position in the cycle (``T_cur`` of ``T_i``)."""
        cosine = (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
        return [self.eta_min + (base - self.eta_min) * cosine for base in self.base_lrs]

    def _jump(self, epoch: float) -> None:
        if epoch < 0:
            raise ValueError(f"Expected non-negative epoch, but got {epoch}")
        if epoch < self.T_0:
            self.T_i, self.T_cur = self.T_0, epoch
        elif self.T_mult == 1:
            self.T_cur = epoch % self.T_0
        else:
            n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
            self.T_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
            self.T_i = self.T_0 * self.T_mult**n

    def step(self, epoch: float | None = None) -> None:
        """Advance one epoch, or go to (fractional) ``epoch``, and set the lrs."""
        self._step_count += 1
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur, self.T_i = self.T_cur % self.T_i, self.T_i * self.T_mult
        else:
            self._jump(epoch)
        self.last_epoch = math.floor(epoch)
        self._apply(self.get_lr())


def _per_group(name: str, optimizer: Optimizer, value: Any) -> list[float]:
    groups = len(optimizer.param_groups)
    if isinstance(value, list | tuple):
        if len(value) != groups:
            raise ValueError(f"expected {groups} values for {name}, got {len(value)}")
        return [arguments.real("OneCycleLR", name, v, 0.0) for v in value]
    return [arguments.real("OneCycleLR", name, value, 0.0)] * groups


_PHASE_KEYS = ("end_step", "start_lr", "end_lr", "start_momentum", "end_momentum")


def _phases(total: int, pct_start: float, three_phase: bool) -> list[dict[str, Any]]:
    """PyTorch's ``_schedule_phases``: where each phase ends and which group keys it joins."""
    up = float(pct_start * total) - 1
    if three_phase:
        rows = [
            (up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
            (float(2 * pct_start * total) - 2, "max_lr", "initial_lr", "base_momentum",
             "max_momentum"),
            (total - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
        ]  # fmt: skip
    else:
        rows = [
            (up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
            (total - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"),
        ]
    return [dict(zip(_PHASE_KEYS, row)) for row in rows]


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith): lr up from ``max_lr / div_factor`` to ``max_lr``, then down to
    ``initial_lr / final_div_factor``; momentum cycles the opposite way (``cycle_momentum``).

    Call ``step()`` after every batch; ``total_steps`` (or ``epochs * steps_per_epoch``) steps.

    Example:
        >>> import numpy as np
        >>> from dualflow.nn import Parameter
        >>> from dualflow.optim import SGD
        >>> opt = SGD([Parameter(np.zeros(1))], lr=0.1, momentum=0.9)
        >>> sched = OneCycleLR(opt, max_lr=1.0, total_steps=10)
        >>> sched.get_last_lr(), opt.param_groups[0]["momentum"]
        ([0.040000000000000036], 0.95)
    """

    def __init__(
        self,
        optimizer: Optimizer,
        max_lr: float | list[float],
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum: float | list[float] = 0.85,
        max_momentum: float | list[float] = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ) -> None:
        self.total_steps = _total_steps(total_steps, epochs, steps_per_epoch)
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
        self._schedule_phases = _phases(self.total_steps, pct_start, three_phase)
        self._anneal_func_type = anneal_strategy
        self.cycle_momentum = bool(cycle_momentum)
        div_factor = arguments.real("OneCycleLR", "div_factor", div_factor, 0.0, open_low=True)
        final_div_factor = arguments.real(
            "OneCycleLR", "final_div_factor", final_div_factor, 0.0, open_low=True
        )
        self._init_groups(optimizer, max_lr, div_factor, final_div_factor, last_epoch)
        if self.cycle_momentum:
            self._init_momentum(optimizer, base_momentum, max_momentum, last_epoch)
        super().__init__(optimizer, last_epoch)

    def _init_groups(self, optimizer: Optimizer, max_lr: Any, div: float, final: float,
                     last_epoch: int) -> None:  # fmt: skip
        if last_epoch != -1:
            return
        for group, top in zip(optimizer.param_groups, _per_group("max_lr", optimizer, max_lr)):
            group.restore("initial_lr", top / div)  # bookkeeping keys: no retrace
            group.restore("max_lr", top)
            group.restore("min_lr", top / div / final)

    def _init_momentum(self, optimizer: Optimizer, base: Any, top: Any, last_epoch: int) -> None:
        if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
            raise ValueError(
                "optimizer must support momentum or beta1 with `cycle_momentum` option enabled"
            )
        self.use_beta1 = "betas" in optimizer.defaults
        if last_epoch != -1:
            return
        tops = _per_group("max_momentum", optimizer, top)
        bases = _per_group("base_momentum", optimizer, base)
        for group, m_top, m_base in zip(optimizer.param_groups, tops, bases):
            self._set_momentum(group, m_top)
            group.restore("max_momentum", m_top)
            group.restore("base_momentum", m_base)

    def _set_momentum(self, group: Any, value: float) -> None:
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def _schedule(self, step: int, group: Any) -> tuple[float, float | None]:
        start_step = 0.0
        for i, phase in enumerate(self._schedule_phases):
            end_step = phase["end_step"]
            if step <= end_step or i == len(self._schedule_phases) - 1:
                pct = (step - start_step) / (end_step - start_step)
                momentum = None
                if self.cycle_momentum:
                    m0, m1 = group[phase["start_momentum"]], group[phase["end_momentum"]]
                    momentum = self._anneal(m0, m1, pct)
                return self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct), momentum
            start_step = end_step
        raise AssertionError("unreachable: the last phase always matches")

    def lr_at(self, epoch: int) -> list[float]:
        if epoch > self.total_steps:
            raise ValueError(
                f"Tried to step {epoch} times. The specified number of total steps is "
                f"{self.total_steps}"
            )
        return [self._schedule(epoch, group)[0] for group in self.optimizer.param_groups]

    def _apply(self, values: list[float]) -> None:
        if self.cycle_momentum:
            for group in self.optimizer.param_groups:
                self._set_momentum(group, self._schedule(self.last_epoch, group)[1])
        super()._apply(values)


def _total_steps(total_steps: Any, epochs: Any, steps_per_epoch: Any) -> int:
    if total_steps is not None:
        if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps <= 0:
            raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
        return total_steps
    if epochs is None or steps_per_epoch is None:
        raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
    for name, value in (("epochs", epochs), ("steps_per_epoch", steps_per_epoch)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"Expected positive integer {name}, but got {value}")
    return epochs * steps_per_epoch
