"""``nn.functional`` forms of the parameterized layers: linear, embedding, batch_norm,
layer_norm, group_norm, plus one_hot, with PyTorch's signatures.

``linear`` refuses an input whose float dtype differs from the weight's (PyTorch raises too);
``one_hot`` returns int64 as PyTorch does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow import ops
from dualflow.errors import ShapeError, with_location
from dualflow.tensor.core import Tensor, as_tensor


def linear(input: Any, weight: Any, bias: Any = None) -> Tensor:
    """``input @ weight.T + bias`` with weight (out_features, in_features).

    Example:
        >>> linear(as_tensor([[1.0, 1.0]]), as_tensor([[1.0, 2.0], [3.0, 4.0]])).tolist()
        [[3.0, 7.0]]
    """
    return ops.linear(input, weight, bias)


def embedding(
    input: Any,
    weight: Any,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """Rows of ``weight`` picked by integer ``input``; no gradient reaches row ``padding_idx``.

    Example:
        >>> w = as_tensor([[0.0, 1.0], [2.0, 3.0]])
        >>> embedding(as_tensor([[1, 0]]), w).tolist()
        [[[2.0, 3.0], [0.0, 1.0]]]
    """
    if max_norm is not None or scale_grad_by_freq:
        raise NotImplementedError(
            with_location("embedding: max_norm and scale_grad_by_freq are not supported")
        )
    w = as_tensor(weight)
    if padding_idx is not None:
        rows = w.shape[0]
        keep = np.ones((rows, 1), w.dtype)
        keep[padding_idx % rows] = 0
        keep = w.device.xp.asarray(keep)  # same values, no gradient into the padding row
        w = w * keep + ops.stop_gradient(w) * (1 - keep)
    return ops.embedding(input, w)


def one_hot(tensor: Any, num_classes: int = -1) -> Tensor:
    """int64 one-hot vectors of integer labels along a new last dim (``num_classes=-1``: one
    more than the largest label, read from the data: a guard when compiled).

    Example:
        >>> one_hot(as_tensor([2, 0])).tolist()
        [[0, 0, 1], [1, 0, 0]]
    """
    labels = as_tensor(tensor)
    if num_classes < 0:
        num_classes = int(ops.max(labels).item()) + 1 if labels.numel() else 0
    return ops.one_hot(labels, num_classes, "int64")


def batch_norm(
    input: Any,
    running_mean: Any,
    running_var: Any,
    weight: Any = None,
    bias: Any = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Batch norm over all dims but 1: batch statistics when ``training`` (updating the running
    ones in place), else the running statistics.

    Example:
        >>> x = as_tensor([[1.0], [3.0]])
        >>> batch_norm(x, None, None, training=True, eps=0.0).tolist()
        [[-1.0], [1.0]]
    """
    x = as_tensor(input)
    if x.ndim < 2:
        raise ShapeError(with_location(f"batch_norm: expected (N, C, ...), got {x.shape}"))
    channels = (x.shape[1],)
    gamma = ops.ones(channels, x.dtype) if weight is None else weight
    beta = ops.zeros(channels, x.dtype) if bias is None else bias
    if not training and running_mean is None:
        raise ValueError(with_location("batch_norm: running statistics are needed in eval mode"))
    return ops.batch_norm(
        x, gamma, beta, running_mean, running_var, train=bool(training),
        momentum=momentum, eps=eps,
    )  # fmt: skip


def layer_norm(
    input: Any,
    normalized_shape: Any,
    weight: Any = None,
    bias: Any = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize over the trailing ``normalized_shape`` dims, then scale and shift.

    Example:
        >>> layer_norm(as_tensor([[1.0, 3.0]]), (2,), eps=0.0).tolist()
        [[-1.0, 1.0]]
    """
    x = as_tensor(input)
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    gamma = ops.ones(shape, x.dtype) if weight is None else weight
    beta = ops.zeros(shape, x.dtype) if bias is None else bias
    return ops.layer_norm(x, gamma, beta, eps)


def group_norm(
    input: Any, num_groups: int, weight: Any = None, bias: Any = None, eps: float = 1e-5
) -> Tensor:
    """Normalize (N, C, ...) over each group of ``C / num_groups`` channels and the other dims.

    Example:
        >>> group_norm(as_tensor([[[1.0], [3.0]]]), 1, eps=0.0).tolist()
        [[[-1.0], [1.0]]]
    """
    x = as_tensor(input)
    n, c = x.shape[0], x.shape[1]
    if c % num_groups:
        raise ShapeError(
            with_location(f"group_norm: {c} channels are not divisible by {num_groups} groups")
        )
    groups = x.reshape(n, num_groups, -1)
    centered = groups - groups.mean(-1, keepdim=True)
    variance = (centered * centered).mean(-1, keepdim=True)
    y = (centered * ops.rsqrt(variance + eps)).reshape(x.shape)
    spread = (1, c) + (1,) * (x.ndim - 2)
    if weight is not None:
        y = y * ops.reshape(weight, spread)
    if bias is not None:
        y = y + ops.reshape(bias, spread)
    return y
