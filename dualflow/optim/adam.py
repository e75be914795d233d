"""``Adam`` and ``AdamW``: adaptive moment estimation, with L2 or decoupled weight decay.

Both follow ``torch.optim.Adam``/``AdamW``: the bias corrections are computed with ops from the
0-d float64 step tensor (so a compiled step does not bake the step number in), then cast to the
parameter's dtype so float32 parameters are updated in float32.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dualflow import ops
from dualflow.optim.adam_family import RANGES, advance, betas, decayed, family_defaults, moments
from dualflow.optim.flags import check_flags
from dualflow.optim.optimizer import Optimizer, step_counter, zeros_like
from dualflow.tensor.core import Tensor


class Adam(Optimizer):
    """Adam (Kingma & Ba), with PyTorch's formulas and optional AMSGrad.

    Per step ``t`` (with ``g = grad + weight_decay * p``): ``m = m + (1 - b1) * (g - m)``,
    ``v = b2 * v + (1 - b2) * g * g`` (AMSGrad: ``vmax = max(vmax, v)`` is used for ``v``),
    ``p = p - lr / (1 - b1**t) * m / (sqrt(v) / sqrt(1 - b2**t) + eps)``.

    Args:
        params: Parameters, or param-group dicts.
        lr: Learning rate.
        betas: Decay rates ``(b1, b2)`` of the first and second moment averages.
        eps: Added to the denominator for numerical stability.
        weight_decay: L2 penalty added to the gradient.
        amsgrad: Use the running maximum of the second moment (Reddi et al.).
        maximize: Maximize the objective instead of minimizing it.

    Example:
        >>> import numpy as np, dualflow
        >>> from dualflow.nn import Parameter
        >>> p = Parameter(np.array([1.0, -1.0], np.float32))
        >>> opt = Adam([p], lr=0.1)
        >>> p.grad = dualflow.tensor([3.0, -0.5]); opt.step()
        >>> np.round(p.numpy(), 4)  # the first step moves each entry by about lr
        array([ 0.9, -0.9], dtype=float32)
    """

    _decoupled = False
    _scheduled = ("betas",)

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        check_flags(
            type(self).__name__, differentiable, foreach=foreach, capturable=capturable, fused=fused
        )
        defaults = family_defaults(lr, betas, eps, weight_decay, maximize, amsgrad=amsgrad)
        super().__init__(params, defaults)

    _ranges = RANGES

    def _update(
        self, p: Tensor, grad: Tensor, state: dict[str, Tensor], group: dict, lr: Tensor
    ) -> None:
        beta1, beta2 = betas(group)
        if not state:
            state.update(step=step_counter(p), exp_avg=zeros_like(p), exp_avg_sq=zeros_like(p))
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = zeros_like(p)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        step, grad = advance(state, grad, group)
        decayed_p, grad = decayed(p, grad, group["weight_decay"], self._decoupled, lr)
        # Scalars in float64 (PyTorch uses Python floats here), cast once to p's dtype.
        step_size = ops.cast(lr / (1 - beta1**step), p.dtype)
        bias_correction2_sqrt = ops.cast(ops.sqrt(1 - beta2**step), p.dtype)
        moments(exp_avg, exp_avg_sq, grad, beta1, beta2, p.dtype)
        second = exp_avg_sq
        if group["amsgrad"]:
            second = state["max_exp_avg_sq"]
            ops.assign(second, ops.maximum(second, exp_avg_sq))
        denom = ops.sqrt(second) / bias_correction2_sqrt + group["eps"]
        ops.assign(p, decayed_p - step_size * exp_avg / denom)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter), as ``torch.optim.AdamW``.

    The decay shrinks the parameter directly, ``p = p * (1 - lr * weight_decay)``, before the
    Adam step instead of being added to the gradient.

    Args:
        params: Parameters, or param-group dicts.
        lr: Learning rate.
        betas: Decay rates ``(b1, b2)`` of the first and second moment averages.
        eps: Added to the denominator for numerical stability.
        weight_decay: Decoupled weight decay coefficient.
        amsgrad: Use the running maximum of the second moment.
        maximize: Maximize the objective instead of minimizing it.

    Example:
        >>> import numpy as np, dualflow
        >>> from dualflow.nn import Parameter
        >>> p = Parameter(np.array([2.0], np.float32))
        >>> opt = AdamW([p], lr=0.1, weight_decay=0.5)
        >>> p.grad = dualflow.tensor([0.0]); opt.step(); p.tolist()  # 2 * (1 - 0.1 * 0.5)
        [1.899999976158142]
    """

    _decoupled = True

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        super().__init__(
            params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize, foreach=foreach,
            capturable=capturable, differentiable=differentiable, fused=fused,
        )  # fmt: skip
