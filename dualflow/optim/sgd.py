"""``SGD``: stochastic gradient descent with optional momentum, dampening, Nesterov and L2 decay.

The update follows ``torch.optim.SGD`` exactly, including the first step's momentum buffer
(``buf = g``, not ``(1 - dampening) * g``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dualflow import ops
from dualflow.optim.flags import check_flags
from dualflow.optim.optimizer import Optimizer, zeros_like
from dualflow.optim.param_group import as_dtype
from dualflow.tensor.core import Tensor


class SGD(Optimizer):
    """Stochastic gradient descent (PyTorch's formulas).

    With ``g = grad + weight_decay * p``: if ``momentum`` is set, ``buf = g`` on the first step
    and ``buf = momentum * buf + (1 - dampening) * g`` after; the step direction is
    ``g + momentum * buf`` (Nesterov) or ``buf``. Then ``p = p - lr * direction``.

    Args:
        params: Parameters, or param-group dicts (``{"params": [...], "lr": ...}``).
        lr: Learning rate.
        momentum: Momentum factor (0 turns it off and keeps no state).
        dampening: Dampening of the gradient added to the momentum buffer.
        weight_decay: L2 penalty added to the gradient.
        nesterov: Use Nesterov momentum (needs ``momentum > 0`` and ``dampening == 0``).
        maximize: Maximize the objective instead of minimizing it.

    Example:
        >>> import numpy as np, dualflow
        >>> from dualflow.nn import Parameter
        >>> p = Parameter(np.array([1.0], np.float32))
        >>> opt = SGD([p], lr=0.5, momentum=0.5)
        >>> for _ in range(2):
        ...     p.grad = dualflow.tensor([1.0]); opt.step()
        >>> p.tolist()  # steps of 0.5 * 1 and 0.5 * (0.5 * 1 + 1)
        [-0.25]
    """

    _scheduled = ("momentum",)

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        check_flags("SGD", differentiable, foreach=foreach, fused=fused)
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "dampening": dampening,
            "weight_decay": weight_decay,
            "nesterov": nesterov,
            "maximize": maximize,
        }
        super().__init__(params, defaults)

    _ranges = (("momentum", 0.0, None), ("dampening", None, None), ("weight_decay", 0.0, None))

    def _check_hyperparameters(self, group: dict[str, Any]) -> None:
        super()._check_hyperparameters(group)
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("Nesterov momentum requires a momentum > 0 and zero dampening")

    def _update(
        self, p: Tensor, grad: Tensor, state: dict[str, Tensor], group: dict, lr: Tensor
    ) -> None:
        weight_decay, momentum = group["weight_decay"], group["momentum"]
        if group.get("maximize"):
            grad = -grad
        if weight_decay != 0:
            grad = grad + weight_decay * p
        if momentum != 0:
            m = as_dtype(group.value("momentum"), p.dtype)  # a tensor when traced (cycled)
            buf = state.get("momentum_buffer")
            if buf is None:  # PyTorch starts the buffer at the first gradient, undampened
                buf = state["momentum_buffer"] = zeros_like(p)
                ops.assign(buf, grad)
            else:
                dampening = group["dampening"]
                fresh = grad if dampening == 0 else (1 - dampening) * grad
                ops.assign(buf, buf * m + fresh)
            grad = grad + m * buf if group["nesterov"] else buf
        ops.assign(p, p - ops.cast(lr, p.dtype) * grad)
