"""``RAdam`` (rectified Adam, Liu et al. 2019) with ``torch.optim.RAdam``'s formulas.

PyTorch branches on the variance-rectification term ``rho_t > 5`` with the step as a Python
number; here ``rho_t`` is a 0-d float64 tensor computed from the step tensor and the branch is an
``ops.where`` (PyTorch's own capturable form), so a compiled step neither guards nor retraces.
"""

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
    moments,
)
from dualflow.optim.flags import check_flags
from dualflow.optim.optimizer import Optimizer, step_counter, zeros_like
from dualflow.tensor.core import Tensor


class RAdam(Optimizer):
    """RAdam: Adam with a warm-up term that rectifies the adaptive learning rate's variance.

    With ``rho_inf = 2 / (1 - b2) - 1`` and ``rho_t = rho_inf - 2 t b2**t / (1 - b2**t)``:
    while ``rho_t <= 5`` the step is SGD with momentum, ``p -= lr * m / (1 - b1**t)``;
    after, ``p -= lr * m / (1 - b1**t) * sqrt(1 - b2**t) / (sqrt(v) + eps) * r_t`` with the
    rectification ``r_t = sqrt((rho_t-4)(rho_t-2) rho_inf / ((rho_inf-4)(rho_inf-2) rho_t))``.

    Args:
        params: Parameters, or param-group dicts.
        lr: Learning rate.
        betas: Decay rates ``(b1, b2)``.
        eps: Added to the denominator.
        weight_decay: Weight decay coefficient.
        decoupled_weight_decay: Decay the parameter directly (as AdamW) instead of the gradient.
        maximize: Maximize the objective instead of minimizing it.

    Example:
        >>> import numpy as np, dualflow
        >>> from dualflow.nn import Parameter
        >>> p = Parameter(np.array([1.0]))
        >>> opt = RAdam([p], lr=0.1)
        >>> p.grad = dualflow.tensor(np.array([2.0])); opt.step(); p.tolist()  # SGD-like start
        [0.8]
    """

    _scheduled = ("betas",)

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        check_flags("RAdam", differentiable, foreach=foreach, capturable=capturable)
        more = {"decoupled_weight_decay": decoupled_weight_decay}
        super().__init__(params, family_defaults(lr, betas, eps, weight_decay, maximize, **more))

    _ranges = RANGES

    def _update(
        self, p: Tensor, grad: Tensor, state: dict[str, Tensor], group: dict, lr: Tensor
    ) -> None:
        beta1, beta2 = betas(group)
        if not state:
            state.update(step=step_counter(p), exp_avg=zeros_like(p), exp_avg_sq=zeros_like(p))
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        step, grad = advance(state, grad, group)
        p_new, grad = decayed(p, grad, group["weight_decay"], group["decoupled_weight_decay"], lr)
        moments(exp_avg, exp_avg_sq, grad, beta1, beta2, p.dtype)
        bias_correction1, bias_correction2 = 1 - beta1**step, 1 - beta2**step
        momentum = exp_avg / ops.cast(bias_correction1, p.dtype) * ops.cast(lr, p.dtype)
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * beta2**step / bias_correction2
        ratio = (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)
        rect = ops.cast(ops.sqrt(ops.maximum(ratio, 0.0)), p.dtype)  # >= 0 where it is used
        adaptive = ops.cast(ops.sqrt(bias_correction2), p.dtype) / (
            ops.sqrt(exp_avg_sq) + group["eps"]
        )
        update = ops.where(rho_t > 5.0, momentum * adaptive * rect, momentum)
        ops.assign(p, p_new - update)
