"""``Adadelta`` (Zeiler 2012) with ``torch.optim.Adadelta``'s formulas, defaults and state names."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dualflow import ops
from dualflow.optim.flags import check_flags
from dualflow.optim.optimizer import Optimizer, step_counter, zeros_like
from dualflow.tensor.core import Tensor


class Adadelta(Optimizer):
    """Adadelta: step sizes from running averages of squared gradients and squared updates.

    With ``g = grad (+ weight_decay * p)`` (negated when ``maximize``):
    ``s = rho * s + (1 - rho) * g²``, ``delta = sqrt(u + eps) / sqrt(s + eps) * g``,
    ``u = rho * u + (1 - rho) * delta²``, ``p = p - lr * delta``.

    Args:
        params: Parameters, or param-group dicts.
        lr: Scale applied to the update (PyTorch's default 1.0).
        rho: Decay rate of the running averages.
        eps: Added inside the square roots.
        weight_decay: L2 penalty added to the gradient.
        maximize: Maximize the objective instead of minimizing it.

    Example:
        >>> import numpy as np, dualflow
        >>> from dualflow.nn import Parameter
        >>> p = Parameter(np.array([1.0]))
        >>> opt = Adadelta([p], rho=0.0, eps=1.0)
        >>> p.grad = dualflow.tensor(np.array([3.0])); opt.step(); p.tolist()  # 1 - 1/sqrt(10)*3
        [0.05131670194948623]
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        foreach: bool | None = None,
        *,
        capturable: bool = False,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        check_flags("Adadelta", differentiable, foreach=foreach, capturable=capturable)
        defaults = {
            "lr": lr,
            "rho": rho,
            "eps": eps,
            "weight_decay": weight_decay,
            "maximize": maximize,
        }
        super().__init__(params, defaults)

    _ranges = (("rho", 0.0, 1.0), ("eps", 0.0, None), ("weight_decay", 0.0, None))

    def _update(
        self, p: Tensor, grad: Tensor, state: dict[str, Tensor], group: dict, lr: Tensor
    ) -> None:
        rho, eps = group["rho"], group["eps"]
        if not state:
            state.update(step=step_counter(p), square_avg=zeros_like(p), acc_delta=zeros_like(p))
        step, square_avg, acc_delta = state["step"], state["square_avg"], state["acc_delta"]
        ops.assign(step, step + 1)
        if group["maximize"]:
            grad = -grad
        if group["weight_decay"] != 0:
            grad = grad + group["weight_decay"] * p
        ops.assign(square_avg, square_avg * rho + (1 - rho) * grad * grad)
        delta = ops.sqrt(acc_delta + eps) / ops.sqrt(square_avg + eps) * grad
        ops.assign(acc_delta, acc_delta * rho + (1 - rho) * delta * delta)
        ops.assign(p, p - ops.cast(lr, p.dtype) * delta)
