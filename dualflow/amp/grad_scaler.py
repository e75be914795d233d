"""``GradScaler``: PyTorch's dynamic loss scaling. ``scale(loss)`` multiplies by the scale;
``step(opt)`` unscales the gradients and runs ``opt.step()`` only when all are finite;
``update()`` halves the scale after an overflow and doubles it after ``growth_interval`` clean
steps.

The scale and the growth tracker are tensors changed only with ``ops.assign`` and ``where``, so a
compiled step captures them as state. ``step`` decides with ``bool(found_inf)``: inside
``@dualflow.compile`` that is a guard, so a step whose gradients overflow fails the guard before
anything is committed and re-runs eagerly, skipping ``opt.step()``: a skipped step commits
nothing in either mode.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow import functions, ops
from dualflow._config import no_grad
from dualflow.device import Device
from dualflow.tensor.core import Tensor, tensor

_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"


class GradScaler:
    """Dynamic loss scaling with PyTorch's API and defaults.

    Example:
        >>> import dualflow
        >>> p = dualflow.nn.Parameter(dualflow.ones(2))
        >>> opt = dualflow.optim.SGD([p], lr=0.1)
        >>> scaler = GradScaler(init_scale=4.0, growth_interval=1)
        >>> scaler.scale((p * p).sum()).backward()
        >>> scaler.step(opt); scaler.update()
        >>> p.tolist(), scaler.get_scale()
        ([0.800000011920929, 0.800000011920929], 8.0)
    """

    def __init__(
        self,
        device: str | Device = "cpu",
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        if growth_factor <= 1.0:
            raise ValueError(f"GradScaler: growth_factor must be > 1, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"GradScaler: backoff_factor must be in (0, 1), got {backoff_factor}")
        if int(growth_interval) <= 0:
            raise ValueError(f"GradScaler: growth_interval must be > 0, got {growth_interval}")
        self._device = Device(str(device))
        self._enabled = bool(enabled)
        self._init_scale, self._growth_factor = float(init_scale), float(growth_factor)
        self._backoff_factor, self._growth_interval = float(backoff_factor), int(growth_interval)
        self._scale: Tensor | None = None
        self._growth_tracker: Tensor | None = None
        self._per_optimizer: dict[int, dict[str, Any]] = {}

    def _lazy_init(self) -> None:
        if self._scale is None:
            self._scale = tensor(np.float32(self._init_scale), device=self._device)
            self._growth_tracker = tensor(np.int32(0), device=self._device)
            self._scale.name, self._growth_tracker.name = "amp_scale", "amp_growth_tracker"

    def is_enabled(self) -> bool:
        """Whether scaling is on (``enabled=False`` makes every method a pass-through)."""
        return self._enabled

    def scale(self, outputs: Any) -> Any:
        """``outputs`` (a tensor, or tuples/lists of them) times the current scale."""
        if not self._enabled:
            return outputs
        self._lazy_init()
        if isinstance(outputs, Tensor):
            return outputs * self._scale
        if isinstance(outputs, (tuple, list)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise TypeError(f"GradScaler.scale: outputs must be a Tensor or a sequence of them, got "
                        f"{type(outputs).__name__}")  # fmt: skip

    def _state(self, optimizer: Any) -> dict[str, Any]:
        return self._per_optimizer.setdefault(id(optimizer), {"stage": _READY, "found_inf": None})

    def unscale_(self, optimizer: Any) -> None:
        """Divide ``optimizer``'s gradients by the scale (in place of ``p.grad``) and record
        whether any is inf/NaN. Once per optimizer between ``update()`` calls."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["stage"] == _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the "
                               "last update().")  # fmt: skip
        if state["stage"] == _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        self._lazy_init()
        with no_grad():
            inv_scale = ops.cast(1.0 / ops.cast(self._scale, np.float64), np.float32)
            found = ops.cast(ops.zeros_like(self._scale), np.bool_)
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    if p.grad.dtype == np.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    grad = p.grad * ops.cast(inv_scale, p.grad.dtype)
                    found = functions.logical_or(
                        found, functions.logical_not(functions.isfinite(grad).all())
                    )
                    p.grad = grad
        state["found_inf"] = found
        state["stage"] = _UNSCALED

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """Unscale (unless ``unscale_`` did) and run ``optimizer.step()`` if every gradient is
        finite; returns what it returned, None when skipped."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        state = self._state(optimizer)
        if state["stage"] == _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] == _READY:
            self.unscale_(optimizer)
        result = None
        if not bool(state["found_inf"]):  # compiled: a guard (see the module docstring)
            result = optimizer.step(*args, **kwargs)
        state["stage"] = _STEPPED
        return result

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Back the scale off after an overflow (resetting the tracker), grow it after
        ``growth_interval`` clean steps (if still finite), or set it to ``new_scale``."""
        if not self._enabled or self._scale is None:
            return
        with no_grad():
            if new_scale is not None:
                value = new_scale if isinstance(new_scale, Tensor) else float(new_scale)
                ops.assign(self._scale, ops.cast(ops.zeros_like(self._scale) + value, np.float32))
            else:
                self._update_scale()
        self._per_optimizer = {}

    def _update_scale(self) -> None:
        found = [s["found_inf"] for s in self._per_optimizer.values() if s["found_inf"] is not None]
        if not found:
            raise RuntimeError("No inf checks were recorded prior to update.")
        overflow = found[0]
        for f in found[1:]:
            overflow = functions.logical_or(overflow, f)
        scale, tracker = self._scale, self._growth_tracker
        successful = tracker + 1
        grow = functions.logical_and(
            functions.logical_not(overflow), successful >= self._growth_interval
        )
        grown = scale * self._growth_factor
        grown = ops.where(functions.isfinite(grown), grown, scale)
        new_scale = ops.where(overflow, scale * self._backoff_factor, ops.where(grow, grown, scale))
        new_tracker = ops.where(functions.logical_or(overflow, grow), 0, successful)
        ops.assign(scale, ops.cast(new_scale, np.float32))
        ops.assign(tracker, ops.cast(new_tracker, np.int32))

    def get_scale(self) -> float:
        """The current scale as a Python float (1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale.item())

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = int(new_interval)

    def state_dict(self) -> dict[str, Any]:
        """PyTorch's keys: scale, growth_factor, backoff_factor, growth_interval,
        _growth_tracker ({} when disabled)."""
        if not self._enabled:
            return {}
        tracker = 0 if self._growth_tracker is None else int(self._growth_tracker.item())
        return {
            "scale": self.get_scale(),
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": tracker,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned (the scale and tracker in place)."""
        if not self._enabled:
            return
        if not state_dict:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")  # fmt: skip
        self._init_scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._lazy_init()
        with no_grad():
            ops.assign(self._scale, ops.full_like(self._scale, self._init_scale))
            value = int(state_dict["_growth_tracker"])
            ops.assign(self._growth_tracker, ops.full_like(self._growth_tracker, value))
