"""``RMSprop``: divide the gradient by a running root mean square, with optional momentum.

Follows ``torch.optim.RMSprop``, including the centered variant (which subtracts the squared
running mean of the gradient) and ``eps`` added outside the square root.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dualflow import ops
from dualflow.optim.flags import check_flags
from dualflow.optim.optimizer import Optimizer, step_counter, zeros_like
from dualflow.optim.param_group import as_dtype
from dualflow.tensor.core import Tensor


class RMSprop(Optimizer):
    """RMSprop (Hinton), with PyTorch's formulas.

    With ``g = grad + weight_decay * p``: ``s = alpha * s + (1 - alpha) * g * g``; centered:
    ``a = a + (1 - alpha) * (g - a)`` and ``avg = sqrt(s - a * a) + eps``, else
    ``avg = sqrt(s) + eps``. With momentum: ``buf = momentum * buf + g / avg`` and
    ``p = p - lr * buf``; without: ``p = p - lr * g / avg``.

    Args:
        params: Parameters, or param-group dicts.
        lr: Learning rate.
        alpha: Smoothing constant of the squared-gradient average.
        eps: Added to the denominator for numerical stability.
        weight_decay: L2 penalty added to the gradient.
        momentum: Momentum factor (0 turns it off).
        centered: Normalize by an estimate of the gradient's variance instead.
        maximize: Maximize the objective instead of minimizing it.

    Example:
        >>> import numpy as np, dualflow
        >>> from dualflow.nn import Parameter
        >>> p = Parameter(np.array([1.0], np.float32))
        >>> opt = RMSprop([p], lr=0.01, alpha=0.75, eps=0.0)
        >>> p.grad = dualflow.tensor([2.0]); opt.step()
        >>> p.tolist()  # 1 - 0.01 * 2 / sqrt(0.25 * 4)
        [0.9800000190734863]
    """

    _scheduled = ("momentum",)

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        check_flags("RMSprop", differentiable, foreach=foreach, capturable=capturable)
        defaults = {
            "lr": lr,
            "alpha": alpha,
            "eps": eps,
            "weight_decay": weight_decay,
            "momentum": momentum,
            "centered": centered,
            "maximize": maximize,
        }
        super().__init__(params, defaults)

    _ranges = tuple((name, 0.0, None) for name in ("alpha", "eps", "weight_decay", "momentum"))

    def _init_state(self, p: Tensor, group: dict) -> dict[str, Tensor]:
        state = {"step": step_counter(p), "square_avg": zeros_like(p)}
        if group["momentum"] > 0:
            state["momentum_buffer"] = zeros_like(p)
        if group["centered"]:
            state["grad_avg"] = zeros_like(p)
        return state

    def _update(
        self, p: Tensor, grad: Tensor, state: dict[str, Tensor], group: dict, lr: Tensor
    ) -> None:
        alpha, momentum = group["alpha"], group["momentum"]
        if not state:
            state.update(self._init_state(p, group))
        step, square_avg = state["step"], state["square_avg"]
        ops.assign(step, step + 1)
        if group.get("maximize"):
            grad = -grad
        if group["weight_decay"] != 0:
            grad = grad + group["weight_decay"] * p
        ops.assign(square_avg, square_avg * alpha + (1 - alpha) * grad * grad)
        if group["centered"]:
            grad_avg = state["grad_avg"]
            ops.assign(grad_avg, grad_avg + (1 - alpha) * (grad - grad_avg))
            avg = ops.sqrt(square_avg - grad_avg * grad_avg) + group["eps"]
        else:
            avg = ops.sqrt(square_avg) + group["eps"]
        lr = ops.cast(lr, p.dtype)
        if momentum > 0:
            buf = state["momentum_buffer"]
            m = as_dtype(group.value("momentum"), p.dtype)  # a tensor when traced (cycled)
            ops.assign(buf, buf * m + grad / avg)
            ops.assign(p, p - lr * buf)
        else:
            ops.assign(p, p - lr * grad / avg)
