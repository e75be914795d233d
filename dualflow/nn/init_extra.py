"""More of PyTorch's ``nn.init``: ``trunc_normal_``, ``orthogonal_``, ``dirac_``, ``eye_`` and
``sparse_``, with PyTorch's signatures and formulas (``nn.init`` re-exports them).

Like the rest of ``nn.init`` each writes through ``ops.assign`` under ``no_grad`` and returns the
tensor. ``trunc_normal_`` is PyTorch's inverse-CDF method with ``erfinv`` written over ops
(Giles' approximation), so it needs no new op; ``orthogonal_`` takes the QR decomposition of a
normal sample on the tensor's array module (numpy or cupy).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dualflow import ops
from dualflow._config import no_grad
from dualflow.device import send
from dualflow.tensor.core import Tensor, as_tensor
from dualflow.tensor.random import Generator, normal, uniform

# Giles (2010), "Approximating the erfinv function": w = -log(1 - x²), p(w) * x.
_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087)
_CENTRAL += (-0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773)
_TAIL += (-0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _write(tensor: Tensor, value: Any) -> Tensor:
    with no_grad():
        ops.assign(tensor, value)
    return tensor


def _horner(coefficients: tuple, w: Any) -> Any:
    p = coefficients[0]
    for c in coefficients[1:]:
        p = p * w + c
    return p


def erfinv(x: Any) -> Any:
    """The inverse error function on (-1, 1), float64, to about 1e-7 relative error.

    Example:
        >>> import math
        >>> round(float(erfinv(as_tensor(np.float64(math.erf(0.7))))), 6)
        0.7
    """
    x = as_tensor(x)
    w = -ops.log((1.0 - x) * (1.0 + x))
    central = _horner(_CENTRAL, w - 2.5)
    tail = _horner(_TAIL, ops.sqrt(ops.maximum(w, 5.0)) - 3.0)
    return ops.where(ops.less(w, 5.0), central, tail) * x


def _normal_cdf(x: float) -> float:
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


def trunc_normal_(
    tensor: Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    generator: Generator | None = None,
) -> Tensor:
    """Fill with N(mean, std²) samples truncated to ``[a, b]`` (PyTorch's inverse-CDF method).

    Example:
        >>> from dualflow.nn.init import empty_parameter
        >>> w = trunc_normal_(empty_parameter((5000,)), std=0.02, a=-0.03, b=0.03,
        ...                   generator=Generator(0)).numpy()
        >>> bool(abs(w).max() <= 0.03), 0.013 < float(w.std()) < 0.016
        (True, True)
    """
    if math.prod(tensor.shape) == 0:
        return tensor
    low, high = _normal_cdf((a - mean) / std), _normal_cdf((b - mean) / std)
    u = uniform(tensor.shape, 2 * low - 1, 2 * high - 1, "float64", generator, tensor.device)
    # keep u inside (-1, 1): erfinv(+-1) is infinite, and the clamp below restores the bounds
    u = ops.clip(u, -1 + 1e-15, 1 - 1e-15)
    sample = erfinv(u) * (std * math.sqrt(2.0)) + mean
    return _write(tensor, ops.cast(ops.clip(sample, a, b), tensor.dtype))


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    """Fill with a (semi-)orthogonal matrix: Q of the QR decomposition of a normal sample,
    its columns' signs fixed by R's diagonal, times ``gain``; dims after the first are
    flattened, as PyTorch.

    Example:
        >>> import numpy as np
        >>> from dualflow.nn.init import empty_parameter
        >>> q = orthogonal_(empty_parameter((3, 5)), generator=Generator(0)).numpy()
        >>> bool(np.allclose(q @ q.T, np.eye(3), atol=1e-5))
        True
    """
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if math.prod(tensor.shape) == 0:
        return tensor
    rows = tensor.shape[0]
    cols = math.prod(tensor.shape) // rows
    sample = normal((rows, cols), 0.0, 1.0, "float64", generator, tensor.device).array
    xp = tensor.device.xp
    flat = sample.T if rows < cols else sample
    q, r = xp.linalg.qr(flat)
    q = q * xp.sign(xp.diagonal(r))
    q = q.T if rows < cols else q
    value = (q * gain).reshape(tuple(tensor.shape)).astype(np.dtype(tensor.dtype))
    return _write(tensor, as_tensor(value))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill a 3-, 4- or 5-D conv weight with the Dirac delta: each of the first
    ``min(out_channels // groups, in_channels)`` output channels of each group passes its
    input channel through unchanged.

    Example:
        >>> from dualflow.nn.init import empty_parameter
        >>> w = dirac_(empty_parameter((2, 2, 3))).numpy()
        >>> w[:, :, 1].tolist(), float(w.sum())
        ([[1.0, 0.0], [0.0, 1.0]], 2.0)
    """
    shape = tuple(tensor.shape)
    if len(shape) not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    if shape[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = shape[0] // groups
    value = np.zeros(shape, np.dtype(tensor.dtype))
    center = tuple(n // 2 for n in shape[2:])
    for g in range(groups):
        for d in range(min(per_group, shape[1])):
            value[(g * per_group + d, d) + center] = 1
    return _write(tensor, as_tensor(send(value, tensor.device)))


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D tensor with the identity matrix (ones on the main diagonal).

    Example:
        >>> from dualflow.nn.init import empty_parameter
        >>> eye_(empty_parameter((2, 3))).tolist()
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    """
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    rows_index = ops.arange(0, rows, 1, np.int64, tensor.device).reshape(rows, 1)
    cols_index = ops.arange(0, cols, 1, np.int64, tensor.device).reshape(1, cols)
    return _write(tensor, ops.cast(ops.equal(rows_index, cols_index), tensor.dtype))


def sparse_(
    tensor: Tensor, sparsity: float, std: float = 0.01, generator: Generator | None = None
) -> Tensor:
    """Fill a 2-D tensor with N(0, std²) samples and zero ``ceil(sparsity * rows)`` random
    entries of each column.

    Example:
        >>> from dualflow.nn.init import empty_parameter
        >>> w = sparse_(empty_parameter((10, 4)), 0.3, generator=Generator(0)).numpy()
        >>> (w == 0).sum(axis=0).tolist()
        [3, 3, 3, 3]
    """
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    zeros = math.ceil(sparsity * rows)
    sample = normal((rows, cols), 0.0, std, tensor.dtype, generator, tensor.device)
    draws = uniform((rows, cols), 0.0, 1.0, "float64", generator, tensor.device)
    rank = ops.argsort(ops.argsort(draws, axis=0), axis=0)  # a random permutation per column
    return _write(tensor, ops.where(ops.less(rank, zeros), ops.zeros_like(sample), sample))
