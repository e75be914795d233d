"""``NAdam`` (Adam with Nesterov momentum, Dozat 2016) with ``torch.optim.NAdam``'s formulas.

The momentum schedule ``mu_t = b1 * (1 - 0.5 * 0.96**(t * momentum_decay))`` and its running
product (state ``mu_product``) are 0-d float64 tensors computed with ops from the step tensor,
so a compiled step does not bake the step number in.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dualflow import ops
from dualflow.optim.adam_family import RANGES, advance, betas, decayed, family_defaults, moments
from dualflow.optim.flags import check_flags
from dualflow.optim.optimizer import Optimizer, step_counter, zeros_like
from dualflow.tensor.core import Tensor


class NAdam(Optimizer):
    """NAdam: Adam whose update looks one momentum step ahead.

    With ``g = grad`` (negated when ``maximize``; L2 or decoupled weight decay as ``AdamW``):
    ``m = m + (1 - b1)(g - m)``, ``v = b2 v + (1 - b2) g²``, ``d = sqrt(v / (1 - b2**t)) + eps``,
    ``p = p - lr (1 - mu_t) / (1 - prod mu) g / d - lr mu_{t+1} / (1 - prod mu * mu_{t+1}) m / d``.

    Args:
        params: Parameters, or param-group dicts.
        lr: Learning rate (PyTorch's default 2e-3).
        betas: Decay rates ``(b1, b2)``.
        eps: Added to the denominator.
        weight_decay: Weight decay coefficient.
        momentum_decay: The ``psi`` of the momentum schedule.
        decoupled_weight_decay: Decay the parameter directly (NAdamW) instead of the gradient.
        maximize: Maximize the objective instead of minimizing it.

    Example:
        >>> import numpy as np, dualflow
        >>> from dualflow.nn import Parameter
        >>> p = Parameter(np.array([1.0]))
        >>> opt = NAdam([p], lr=0.1)
        >>> p.grad = dualflow.tensor(np.array([2.0])); opt.step(); round(p.item(), 6)
        0.894355
    """

    _scheduled = ("betas",)

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum_decay: float = 4e-3,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        check_flags("NAdam", differentiable, foreach=foreach, capturable=capturable)
        more = {"momentum_decay": momentum_decay, "decoupled_weight_decay": decoupled_weight_decay}
        super().__init__(params, family_defaults(lr, betas, eps, weight_decay, maximize, **more))

    _ranges = (*RANGES, ("momentum_decay", 0.0, None))

    def _update(
        self, p: Tensor, grad: Tensor, state: dict[str, Tensor], group: dict, lr: Tensor
    ) -> None:
        beta1, beta2 = betas(group)
        if not state:
            mu_product = step_counter(p)
            ops.assign(mu_product, 1.0)
            state.update(
                step=step_counter(p),
                mu_product=mu_product,
                exp_avg=zeros_like(p),
                exp_avg_sq=zeros_like(p),
            )
        mu_product, exp_avg, exp_avg_sq = state["mu_product"], state["exp_avg"], state["exp_avg_sq"]
        step, grad = advance(state, grad, group)
        p_new, grad = decayed(p, grad, group["weight_decay"], group["decoupled_weight_decay"], lr)
        decay = group["momentum_decay"]
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * decay))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * decay))
        ops.assign(mu_product, mu_product * mu)
        moments(exp_avg, exp_avg_sq, grad, beta1, beta2, p.dtype)
        bias_correction2 = ops.cast(1 - beta2**step, p.dtype)
        denom = ops.sqrt(exp_avg_sq / bias_correction2) + group["eps"]
        lr64 = ops.cast(lr, "float64")
        c_grad = ops.cast(-lr64 * (1.0 - mu) / (1.0 - mu_product), p.dtype)
        c_avg = ops.cast(-lr64 * mu_next / (1.0 - mu_product * mu_next), p.dtype)
        ops.assign(p, p_new + c_grad * (grad / denom) + c_avg * (exp_avg / denom))
