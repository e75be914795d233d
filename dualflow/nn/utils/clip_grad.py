"""Gradient clipping with PyTorch's names and results: ``clip_grad_norm_``, ``clip_grad_value_``.

Written with ops and without a data-dependent branch (the norm scale is ``min(1, max_norm /
(norm + 1e-6))``, always applied, as in PyTorch), so a compiled step traces it into one graph.
Gradients are **replaced**, not scaled in place: ``p.grad`` becomes a new Tensor, because a
gradient array may be shared (two parameters added together receive the same gradient tensor)
or be a read-only broadcast view.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from types import GeneratorType
from typing import Any

import numpy as np

from dualflow import ops
from dualflow._config import no_grad
from dualflow.errors import with_location
from dualflow.tensor.core import Tensor, tensor


def _param_list(parameters: Tensor | Iterable[Tensor]) -> list[Tensor]:
    if isinstance(parameters, Tensor):
        return [parameters]
    generator = isinstance(parameters, GeneratorType)
    params = list(parameters)
    if generator and not params:
        warnings.warn(
            "`parameters` is an empty generator, no gradient clipping will occur.", stacklevel=3
        )
    return params


def clip_grad_norm_(
    parameters: Tensor | Iterable[Tensor],
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """Scale the gradients so that their total ``norm_type``-norm is at most ``max_norm``.

    The norm is taken over all gradients together, as if concatenated into one vector
    (``norm_type`` may be ``inf``); each gradient is multiplied by
    ``min(1, max_norm / (total + 1e-6))``. Parameters without a gradient are ignored.
    ``foreach`` is accepted for compatibility (a compiled step fuses the loop anyway).

    Returns:
        The total norm before clipping, as a 0-d tensor (float32 when there is no gradient).

    Example:
        >>> import numpy as np, dualflow
        >>> from dualflow.nn import Parameter
        >>> p = Parameter(np.zeros(2, np.float32)); p.grad = dualflow.tensor([3.0, 4.0])
        >>> clip_grad_norm_([p], max_norm=1.0).item(), p.grad.numpy().round(4)
        (5.0, array([0.6, 0.8], dtype=float32))
    """
    params = _param_list(parameters)
    with_grad = [p for p in params if p.grad is not None]
    norm_type = float(norm_type)
    if not norm_type > 0:
        raise ValueError(f"clip_grad_norm_: norm_type must be > 0 or inf, got {norm_type}")
    if not with_grad:
        return tensor(0.0)
    dtype = np.result_type(*(p.grad.dtype for p in with_grad))
    with no_grad():
        total = _total_norm([p.grad for p in with_grad], norm_type, dtype)
        if error_if_nonfinite and not bool(ops.abs(total) < np.inf):  # a guard when compiled
            raise RuntimeError(
                with_location(
                    f"The total norm of order {norm_type} for gradients from `parameters` is "
                    "non-finite, so it cannot be clipped. To disable this error and scale the "
                    "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`"
                )
            )
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


def clip_grad_value_(
    parameters: Tensor | Iterable[Tensor], clip_value: float, foreach: bool | None = None
) -> None:
    """Clamp every gradient to ``[-clip_value, clip_value]``; returns None (as PyTorch).

    Example:
        >>> import numpy as np, dualflow
        >>> from dualflow.nn import Parameter
        >>> p = Parameter(np.zeros(3, np.float32)); p.grad = dualflow.tensor([-3.0, 0.5, 2.0])
        >>> clip_grad_value_(p, 1.0); p.grad.tolist()
        [-1.0, 0.5, 1.0]
    """
    clip_value = float(clip_value)
    with no_grad():
        for p in _param_list(parameters):
            if p.grad is not None:
                p.grad = ops.clip(p.grad, -clip_value, clip_value)


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """All parameters flattened and concatenated into one 1-D tensor (differentiable).

    Example:
        >>> import numpy as np
        >>> from dualflow.nn import Parameter
        >>> parameters_to_vector([Parameter(np.ones((2, 2))), Parameter(np.zeros(1))]).tolist()
        [1.0, 1.0, 1.0, 1.0, 0.0]
    """
    return ops.concat([ops.reshape(p, (-1,)) for p in parameters], axis=0)


def vector_to_parameters(vec: Any, parameters: Iterable[Tensor]) -> None:
    """Copy consecutive slices of the 1-D ``vec`` into the parameters, in place.

    Example:
        >>> import numpy as np
        >>> from dualflow.nn import Parameter
        >>> p = Parameter(np.zeros((2,)))
        >>> vector_to_parameters(np.array([3.0, 4.0]), [p]); p.tolist()
        [3.0, 4.0]
    """
    offset = 0
    with no_grad():
        for p in parameters:
            n = int(np.prod(p.shape))
            ops.assign(p, ops.reshape(vec[offset : offset + n], p.shape))
            offset += n
