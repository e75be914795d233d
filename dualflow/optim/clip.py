"""``clip_grad_norm``: rescale gradients so that their total norm is at most ``max_norm``.

Written with ops and without a data-dependent branch (the scale is ``min(1, max_norm / norm)``,
always applied, as in PyTorch), so a compiled step traces it into one graph.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from dualflow import ops
from dualflow._config import no_grad
from dualflow.tensor import Tensor, tensor


def clip_grad_norm(
    params: Tensor | Iterable[Tensor], max_norm: float, norm_type: float = 2.0
) -> Tensor:
    """Scale the gradients of ``params`` so their total ``norm_type``-norm is ``<= max_norm``.

    The total norm is taken over all gradients together, as if concatenated into one vector;
    ``norm_type`` may be ``inf`` (largest absolute entry). Each gradient is multiplied by
    ``min(1, max_norm / (total + 1e-6))``. Gradients are **replaced**, not scaled in place:
    ``p.grad`` becomes a new Tensor, because a gradient array may be shared (two parameters
    added together receive the same gradient tensor) or be a read-only broadcast view.
    Parameters without a gradient are ignored.

    Args:
        params: A parameter or an iterable of parameters.
        max_norm: The largest total norm allowed.
        norm_type: The order ``p > 0`` of the norm, or ``float("inf")``.

    Returns:
        The total norm before clipping, as a 0-d tensor (float32 when there is no gradient).

    Example:
        >>> import numpy as np, dualflow
        >>> from dualflow.nn import Parameter
        >>> p = Parameter(np.zeros(2, np.float32)); p.grad = dualflow.tensor([3.0, 4.0])
        >>> clip_grad_norm([p], max_norm=1.0).item(), p.grad.numpy().round(4)
        (5.0, array([0.6, 0.8], dtype=float32))
    """
    params = [params] if isinstance(params, Tensor) else list(params)
    with_grad = [p for p in params if p.grad is not None]
    norm_type = float(norm_type)
    if not norm_type > 0:
        raise ValueError(f"clip_grad_norm: norm_type must be > 0 or inf, got {norm_type}")
    if not with_grad:
        return tensor(0.0)
    dtype = np.result_type(*(p.grad.dtype for p in with_grad))
    with no_grad():
        total = _total_norm([p.grad for p in with_grad], norm_type, dtype)
        scale = ops.minimum(float(max_norm) / (total + 1e-6), 1.0)
        for p in with_grad:
            p.grad = p.grad * ops.cast(scale, p.grad.dtype)
    return total


def _total_norm(grads: list[Tensor], norm_type: float, dtype: np.dtype) -> Tensor:
    """The norm of all ``grads`` taken together, computed in ``dtype``."""
    if math.isinf(norm_type):
        partial = [ops.cast(ops.max(ops.abs(g)), dtype) for g in grads]
        total = partial[0]
        for part in partial[1:]:
            total = ops.maximum(total, part)
        return total
    if norm_type == 2.0:
        partial = [ops.cast(ops.sum(g * g), dtype) for g in grads]
    else:
        partial = [ops.cast(ops.sum(ops.abs(g) ** norm_type), dtype) for g in grads]
    total = partial[0]
    for part in partial[1:]:
        total = total + part
    return ops.sqrt(total) if norm_type == 2.0 else total ** (1.0 / norm_type)
