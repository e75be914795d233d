"""``Adamax`` (Adam with the infinity norm) with ``torch.optim.Adamax``'s formulas and state."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dualflow import ops
from dualflow.optim.adam_family import (
    RANGES,
    advance,
    betas,
    decayed,
    family_defaults,
    first_moment,
)
from dualflow.optim.flags import check_flags
from dualflow.optim.optimizer import Optimizer, step_counter, zeros_like
from dualflow.optim.param_group import as_dtype
from dualflow.tensor.core import Tensor


class Adamax(Optimizer):
    """Adamax (Kingma & Ba, section 7): the second moment becomes a running maximum.

    With ``g = grad (+ weight_decay * p)`` (negated when ``maximize``), at step ``t``:
    ``m = m + (1 - b1) * (g - m)``, ``u = max(b2 * u, |g| + eps)``,
    ``p = p - lr / (1 - b1**t) * m / u``.

    Args:
        params: Parameters, or param-group dicts.
        lr: Learning rate (PyTorch's default 2e-3).
        betas: Decay rates ``(b1, b2)``.
        eps: Added to ``|g|``.
        weight_decay: L2 penalty added to the gradient.
        maximize: Maximize the objective instead of minimizing it.

    Example:
        >>> import numpy as np, dualflow
        >>> from dualflow.nn import Parameter
        >>> p = Parameter(np.array([1.0]))
        >>> opt = Adamax([p], lr=0.1, eps=0.0)
        >>> p.grad = dualflow.tensor(np.array([-2.0])); opt.step(); p.tolist()  # moves by lr
        [1.1]
    """

    _scheduled = ("betas",)

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        check_flags("Adamax", differentiable, foreach=foreach, capturable=capturable)
        super().__init__(params, family_defaults(lr, betas, eps, weight_decay, maximize))

    _ranges = RANGES

    def _update(
        self, p: Tensor, grad: Tensor, state: dict[str, Tensor], group: dict, lr: Tensor
    ) -> None:
        beta1, beta2 = betas(group)
        if not state:
            state.update(step=step_counter(p), exp_avg=zeros_like(p), exp_inf=zeros_like(p))
        exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
        step, grad = advance(state, grad, group)
        _, grad = decayed(p, grad, group["weight_decay"], False, lr)  # L2 only
        first_moment(exp_avg, grad, beta1, p.dtype)
        decayed_inf = exp_inf * as_dtype(beta2, p.dtype)
        ops.assign(exp_inf, ops.maximum(decayed_inf, ops.abs(grad) + group["eps"]))
        clr = ops.cast(ops.cast(lr, "float64") / (1 - beta1**step), p.dtype)
        ops.assign(p, p - clr * (exp_avg / exp_inf))
