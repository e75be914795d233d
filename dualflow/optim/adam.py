"""``Adam`` and ``AdamW``: adaptive moment estimation, with L2 or decoupled weight decay.

Both follow ``torch.optim.Adam``/``AdamW``: the bias corrections are computed with ops from the
0-d float64 step tensor (so a compiled step does not bake the step number in), then cast to the
parameter's dtype so float32 parameters are updated in float32.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from dualflow import ops
from dualflow.optim.adam_family import RANGES, advance, betas, decayed, family_defaults, moments
from dualflow.optim.flags import check_flags
from dualflow.optim.optimizer import Optimizer, step_counter, zeros_like
from dualflow.optim.param_group import as_dtype
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
        # Scalars in float64 (PyTorch uses Python floats here), cast once to p's dtype.
        step_size = ops.cast(lr / (1 - beta1**step), p.dtype)
        bias_correction2_sqrt = ops.cast(ops.sqrt(1 - beta2**step), p.dtype)
        if not group["amsgrad"] and _one_pass(p, grad):  # one op: one pass over all four
            decay, grad = _decay(p, grad, group["weight_decay"], self._decoupled, lr)
            c1, c2 = as_dtype(1 - beta1, p.dtype), as_dtype(1 - beta2, p.dtype)
            results = ops.adam_update(
                p, grad, exp_avg, exp_avg_sq, decay, c1, as_dtype(beta2, p.dtype), c2,
                step_size, bias_correction2_sqrt, eps=group["eps"],
            )  # fmt: skip
            for target, value in zip((p, exp_avg, exp_avg_sq), results):
                ops.assign(target, value)
            return
        decayed_p, grad = decayed(p, grad, group["weight_decay"], self._decoupled, lr)
        moments(exp_avg, exp_avg_sq, grad, beta1, beta2, p.dtype)
        second = exp_avg_sq
        if group["amsgrad"]:
            second = state["max_exp_avg_sq"]
            ops.assign(second, ops.maximum(second, exp_avg_sq))
        denom = ops.sqrt(second) / bias_correction2_sqrt + group["eps"]
        ops.assign(p, decayed_p - step_size * exp_avg / denom)


def _one_pass(p: Tensor, grad: Tensor) -> bool:
    # ``ops.adam_update`` takes real floating parameters with a gradient of their own dtype
    dtype = np.dtype(p.dtype)
    return dtype.kind == "f" and np.dtype(grad.dtype) == dtype and grad.shape == p.shape


def _decay(
    p: Tensor, grad: Tensor, weight_decay: float, decoupled: bool, lr: Tensor
) -> tuple[Any, Tensor]:
    # (the factor p is multiplied by, the gradient): ``decayed``'s, the factor 1 (``p * 1`` is
    # ``p``) where nothing shrinks p
    if decoupled and weight_decay != 0:
        return ops.cast(1 - ops.cast(lr, "float64") * weight_decay, p.dtype), grad
    return 1.0, decayed(p, grad, weight_decay, decoupled, lr)[1]


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
