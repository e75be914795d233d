"""What the Adam family (Adam, AdamW, Adamax, NAdam, RAdam) computes alike, written once.

Each optimizer keeps its own state layout and final step formula; the pieces here are the ones
PyTorch's implementations share: the group's defaults and ``betas``, counting the step and
negating for ``maximize``, L2 or decoupled weight decay, and the moment updates
``m = m + (1 - b1) * (g - m)`` and ``v = b2 * v + (1 - b2) * g * g``. The betas meet the moments
in the moments' dtype (``as_dtype``), so float32 parameters are updated in float32 eagerly and
compiled alike.
"""

from __future__ import annotations

from typing import Any

from dualflow import ops
from dualflow.optim.param_group import as_dtype
from dualflow.tensor.core import Tensor

# The hyperparameters every member checks the same way (``Optimizer._ranges``)
RANGES = (("eps", 0.0, None), ("weight_decay", 0.0, None))


def family_defaults(
    lr: float, betas: Any, eps: float, weight_decay: float, maximize: bool, **more: Any
) -> dict[str, Any]:
    """A member's param-group defaults, in PyTorch's key order (``maximize`` last).

    Example:
        >>> list(family_defaults(1e-3, (0.9, 0.999), 1e-8, 0.0, False, amsgrad=True))
        ['lr', 'betas', 'eps', 'weight_decay', 'amsgrad', 'maximize']
    """
    return {
        "lr": lr,
        "betas": tuple(betas),
        "eps": eps,
        "weight_decay": weight_decay,
        **more,
        "maximize": maximize,
    }


def betas(group: Any) -> tuple[Any, Any]:
    """The group's ``(beta1, beta2)``: Python floats eagerly, mirror tensors when traced (a
    scheduler such as OneCycleLR may cycle beta1)."""
    return group.value("betas", 0), group.value("betas", 1)


def advance(state: dict[str, Tensor], grad: Tensor, group: Any) -> tuple[Tensor, Tensor]:
    """Count one more step in ``state["step"]``; returns (the step, the gradient to follow:
    negated when the group maximizes).

    Example:
        >>> import numpy as np, dualflow
        >>> state = {"step": dualflow.tensor(np.float64(0.0))}
        >>> step, g = advance(state, dualflow.tensor([2.0]), {"maximize": True})
        >>> step.item(), g.tolist()
        (1.0, [-2.0])
    """
    step = state["step"]
    ops.assign(step, step + 1)
    return step, (-grad if group.get("maximize") else grad)


def decayed(
    p: Tensor, grad: Tensor, weight_decay: float, decoupled: bool, lr: Tensor
) -> tuple[Tensor, Tensor]:
    """``(p', g')`` after weight decay: decoupled shrinks ``p`` by ``1 - lr * weight_decay``
    (in float64 from the lr tensor, as PyTorch multiplies Python floats, then cast), else the
    L2 term is added to ``g``.

    Example:
        >>> import numpy as np, dualflow
        >>> p, g, lr = dualflow.tensor([2.0]), dualflow.tensor([1.0]), dualflow.tensor(0.1)
        >>> [t.tolist() for t in decayed(p, g, 0.5, False, lr)]
        [[2.0], [2.0]]
        >>> [round(v, 6) for v in decayed(p, g, 0.5, True, lr)[0].tolist()]
        [1.9]
    """
    if weight_decay == 0:
        return p, grad
    if decoupled:
        return p * ops.cast(1 - ops.cast(lr, "float64") * weight_decay, p.dtype), grad
    return p, grad + weight_decay * p


def first_moment(exp_avg: Tensor, grad: Tensor, beta1: Any, dtype: Any) -> None:
    """``m = m + (1 - b1) * (g - m)`` in place (PyTorch's ``lerp``), ``1 - b1`` in ``dtype``
    (the parameter's).

    Example:
        >>> import numpy as np, dualflow
        >>> m, g = dualflow.tensor([1.0]), dualflow.tensor([3.0])
        >>> first_moment(m, g, 0.5, m.dtype); m.tolist()
        [2.0]
    """
    ops.assign(exp_avg, exp_avg + as_dtype(1 - beta1, dtype) * (grad - exp_avg))


def moments(
    exp_avg: Tensor, exp_avg_sq: Tensor, grad: Tensor, beta1: Any, beta2: Any, dtype: Any
) -> None:
    """Both moments in place: ``first_moment``, then ``v = b2 * v + (1 - b2) * g * g``, the
    betas in ``dtype`` (the parameter's).

    Example:
        >>> import numpy as np, dualflow
        >>> m, v, g = dualflow.tensor([0.0]), dualflow.tensor([1.0]), dualflow.tensor([2.0])
        >>> moments(m, v, g, 0.5, 0.75, m.dtype); m.tolist(), v.tolist()
        ([1.0], [1.75])
    """
    first_moment(exp_avg, grad, beta1, dtype)
    b2, one_minus_b2 = as_dtype(beta2, dtype), as_dtype(1 - beta2, dtype)
    ops.assign(exp_avg_sq, exp_avg_sq * b2 + one_minus_b2 * grad * grad)
