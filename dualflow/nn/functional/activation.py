"""``nn.functional`` activations, softmax and dropout with PyTorch's signatures.

``inplace=True`` is accepted for compatibility; the result is always a new tensor (an in-place
activation inside an autograd graph is not recorded by dualflow), with the same values.
"""

from __future__ import annotations

import warnings
from typing import Any

from dualflow import ops
from dualflow.errors import ShapeError
from dualflow.ops.random_ops import next_key
from dualflow.ops.validate import require_float
from dualflow.tensor.core import Tensor, as_tensor

_SELU_ALPHA = 1.6732632423543772
_SELU_SCALE = 1.0507009873554805


def relu(input: Any, inplace: bool = False) -> Tensor:
    """``max(x, 0)``.

    Example:
        >>> relu(as_tensor([-1.0, 2.0])).tolist()
        [0.0, 2.0]
    """
    return ops.relu(input)


def relu6(input: Any, inplace: bool = False) -> Tensor:
    """``min(max(x, 0), 6)``.

    Example:
        >>> relu6(as_tensor([-1.0, 7.0])).tolist()
        [0.0, 6.0]
    """
    return ops.clip(input, 0.0, 6.0)


def hardtanh(
    input: Any, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False
) -> Tensor:
    """Clamp into ``[min_val, max_val]``.

    Example:
        >>> hardtanh(as_tensor([-2.0, 0.5])).tolist()
        [-1.0, 0.5]
    """
    return ops.clip(input, min_val, max_val)


def leaky_relu(input: Any, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``x`` for ``x > 0``, else ``negative_slope * x`` (default slope 0.01, as PyTorch).

    Example:
        >>> leaky_relu(as_tensor([-100.0, 3.0])).tolist()
        [-1.0, 3.0]
    """
    return ops.leaky_relu(input, slope=float(negative_slope))


def elu(input: Any, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` for ``x > 0``, else ``alpha * (exp(x) - 1)``.

    Example:
        >>> elu(as_tensor([0.0, 2.0])).tolist()
        [0.0, 2.0]
    """
    return ops.elu(input, alpha=float(alpha))


def selu(input: Any, inplace: bool = False) -> Tensor:
    """``scale * elu(x, alpha)`` with the self-normalizing constants.

    Example:
        >>> round(selu(as_tensor([1.0])).item(), 4)
        1.0507
    """
    return ops.elu(input, alpha=_SELU_ALPHA) * _SELU_SCALE


def gelu(input: Any, approximate: str = "none") -> Tensor:
    """Gaussian error linear unit; ``approximate="tanh"`` uses the tanh form.

    Example:
        >>> round(gelu(as_tensor([1.0])).item(), 4)
        0.8413
    """
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return ops.gelu(input, approximate=approximate == "tanh")


def silu(input: Any, inplace: bool = False) -> Tensor:
    """``x * sigmoid(x)``.

    Example:
        >>> round(silu(as_tensor([1.0])).item(), 4)
        0.7311
    """
    return ops.silu(input)


def sigmoid(input: Any) -> Tensor:
    """``1 / (1 + exp(-x))``.

    Example:
        >>> sigmoid(as_tensor([0.0])).tolist()
        [0.5]
    """
    return ops.sigmoid(input)


def tanh(input: Any) -> Tensor:
    """Hyperbolic tangent.

    Example:
        >>> tanh(as_tensor([0.0])).tolist()
        [0.0]
    """
    return ops.tanh(input)


def softplus(input: Any, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta``, and ``x`` where ``beta * x > threshold``.

    Example:
        >>> [round(v, 4) for v in softplus(as_tensor([0.0, 30.0])).tolist()]
        [0.6931, 30.0]
    """
    scaled = ops.multiply(input, beta) if beta != 1.0 else input
    soft = ops.softplus(scaled)
    soft = soft / beta if beta != 1.0 else soft
    return ops.where(ops.greater(scaled, threshold), input, soft)


def logsigmoid(input: Any) -> Tensor:
    """``log(sigmoid(x))``, stable for large ``|x|``.

    Example:
        >>> round(logsigmoid(as_tensor([0.0])).item(), 4)
        -0.6931
    """
    return -ops.softplus(-as_tensor(input))


def _dim(name: str, input: Any, dim: int | None, stacklevel: int = 4) -> int:
    if dim is not None:
        return int(dim)
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to include "
        "dim=X as an argument.",
        stacklevel=stacklevel,
    )
    return 0 if len(input.shape) in (0, 1, 3) else 1


def softmax(input: Any, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """Softmax along ``dim`` (None: PyTorch's deprecated implicit choice, with a warning).

    Example:
        >>> softmax(as_tensor([[0.0, 0.0]]), dim=1).tolist()
        [[0.5, 0.5]]
    """
    x = input if dtype is None else ops.cast(input, dtype)
    return ops.softmax(x, axis=_dim("softmax", x, dim))


def log_softmax(
    input: Any,
    dim: int | None = None,
    _stacklevel: int = 3,
    dtype: Any = None,
) -> Tensor:
    """Log-softmax along ``dim``.

    Example:
        >>> round(log_softmax(as_tensor([[0.0, 0.0]]), dim=1).tolist()[0][0], 4)
        -0.6931
    """
    x = input if dtype is None else ops.cast(input, dtype)
    return ops.log_softmax(x, axis=_dim("log_softmax", x, dim))


def _check_p(p: float) -> float:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return float(p)


def dropout(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)`` when
    ``training`` (PyTorch's default is ``training=True``; modules pass ``self.training``).

    Example:
        >>> x = as_tensor([1.0, 2.0])
        >>> dropout(x, 0.5, training=False) is x
        True
    """
    return ops.dropout(input, _check_p(p), train=bool(training))


def dropout2d(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels (N, C) of a 4-D input with probability ``p``; other ranks warn and
    drop each (N, C) entry, as PyTorch (a 3-D input is (N, C, L), a 2-D one drops elements).

    Example:
        >>> x = as_tensor([[[[1.0, 1.0]], [[1.0, 1.0]]]])
        >>> dropout2d(x, 0.5, training=False) is x
        True
    """
    p = _check_p(p)
    if not training or p == 0.0:
        return input
    x = as_tensor(input)
    dtype = require_float("dropout2d", x, "input")
    if x.ndim < 2:
        raise ShapeError(f"dropout2d: feature dropout needs at least 2 dims, got {x.shape}")
    if x.ndim != 4:  # PyTorch: 3-D is (N, C, L) with a warning, other ranks warn (2-D: elements)
        warnings.warn(
            f"dropout2d: received a {x.ndim}-D input; dropping (N, C) entries", stacklevel=2
        )
    shape = tuple(x.shape[:2]) + (1,) * (x.ndim - 2)
    return x * ops.dropout_mask(next_key(None, x), shape, p, dtype)


def normalize(input: Any, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """``x / max(||x||_p, eps)`` along ``dim``.

    Example:
        >>> normalize(as_tensor([[3.0, 4.0]])).tolist()
        [[0.6, 0.8]]
    """
    x = as_tensor(input)
    norm = x.norm(p, dim=dim, keepdim=True)
    return x / ops.maximum(norm, eps)


def cosine_similarity(x1: Any, x2: Any, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """``x1 . x2 / max(||x1|| * ||x2||, eps)`` along ``dim``.

    Example:
        >>> a, b = as_tensor([[1.0, 0.0]]), as_tensor([[1.0, 1.0]])
        >>> [round(v, 4) for v in cosine_similarity(a, b).tolist()]
        [0.7071]
    """
    a, b = as_tensor(x1), as_tensor(x2)
    dot = (a * b).sum(dim)
    norms = a.norm(dim=dim) * b.norm(dim=dim)
    return dot / ops.maximum(norms, eps)
