"""``Adagrad`` (Duchi et al. 2011) with ``torch.optim.Adagrad``'s formulas, defaults and state."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dualflow import ops
from dualflow.optim.flags import check_flags
from dualflow.optim.optimizer import Optimizer, step_counter, zeros_like
from dualflow.tensor.core import Tensor


class Adagrad(Optimizer):
    """Adagrad: divide by the root of the running sum of squared gradients.

    With ``g = grad (+ weight_decay * p)`` (negated when ``maximize``), at step ``t``:
    ``clr = lr / (1 + (t - 1) * lr_decay)``, ``s = s + g²``, ``p = p - clr * g / (sqrt(s) + eps)``.
    ``s`` starts at ``initial_accumulator_value``.

    Args:
        params: Parameters, or param-group dicts.
        lr: Learning rate.
        lr_decay: Learning-rate decay per step.
        weight_decay: L2 penalty added to the gradient.
        initial_accumulator_value: Starting value of the sum of squares.
        eps: Added to the denominator.
        maximize: Maximize the objective instead of minimizing it.

    Example:
        >>> import numpy as np, dualflow
        >>> from dualflow.nn import Parameter
        >>> p = Parameter(np.array([1.0]))
        >>> opt = Adagrad([p], lr=0.5, eps=0.0)
        >>> p.grad = dualflow.tensor(np.array([4.0])); opt.step(); p.tolist()  # 1 - 0.5 * 4/4
        [0.5]
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        check_flags("Adagrad", differentiable, foreach=foreach, fused=fused)
        defaults = {
            "lr": lr,
            "lr_decay": lr_decay,
            "weight_decay": weight_decay,
            "initial_accumulator_value": initial_accumulator_value,
            "eps": eps,
            "maximize": maximize,
        }
        super().__init__(params, defaults)

    _ranges = tuple(
        (name, 0.0, None)
        for name in ("lr_decay", "weight_decay", "initial_accumulator_value", "eps")
    )

    def _update(
        self, p: Tensor, grad: Tensor, state: dict[str, Tensor], group: dict, lr: Tensor
    ) -> None:
        if not state:
            state.update(step=step_counter(p), sum=zeros_like(p))
            if group["initial_accumulator_value"] != 0:
                ops.assign(state["sum"], group["initial_accumulator_value"])
        step, total = state["step"], state["sum"]
        ops.assign(step, step + 1)
        if group["maximize"]:
            grad = -grad
        if group["weight_decay"] != 0:
            grad = grad + group["weight_decay"] * p
        # In float64 from the step and lr tensors (PyTorch uses Python floats), then cast.
        clr = ops.cast(ops.cast(lr, "float64") / (1 + (step - 1) * group["lr_decay"]), p.dtype)
        ops.assign(total, total + grad * grad)
        ops.assign(p, p - clr * (grad / (ops.sqrt(total) + group["eps"])))
