"""``F.prelu``, ``F.embedding_bag``, ``F.scaled_dot_product_attention``, ``F.dropout1d`` and
``F.dropout3d`` with PyTorch's signatures and meanings, as composites of existing ops (their
gradients come from those ops and they trace inside ``@dualflow.compile``).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from dualflow import ops
from dualflow.errors import DTypeError, ShapeError, user_frame, with_location
from dualflow.nn.functional.activation import _check_p, dropout, softmax
from dualflow.nn.functional.layers import embedding
from dualflow.ops.autocast import lower_inputs
from dualflow.ops.random_ops import next_key
from dualflow.ops.validate import require_float
from dualflow.tensor.core import Tensor, as_tensor

_BAG_MODES = ("sum", "mean", "max")


def _fail(message: str) -> ShapeError:
    return ShapeError(with_location(message, user_frame()))


def prelu(input: Any, weight: Any) -> Tensor:
    """``x`` where ``x > 0``, else ``weight * x``; a ``weight`` of C values applies per channel
    (dim 1; an input of under 2 dims has one channel, as PyTorch).

    Example:
        >>> prelu(as_tensor([-2.0, 3.0]), as_tensor([0.25])).tolist()
        [-0.5, 3.0]
    """
    x, w = lower_inputs(as_tensor(input), as_tensor(weight))  # on PyTorch's autocast list
    if w.ndim != 1:
        raise _fail(f"prelu: weight must be 1-D, got shape {w.shape}")
    channels = w.shape[0]
    if channels != 1:
        found = x.shape[1] if x.ndim >= 2 else 1
        if found != channels:
            raise _fail(
                f"prelu: weight has {channels} values but input of shape {x.shape} has "
                f"{found} channels"
            )
        w = w.reshape((channels,) + (1,) * (x.ndim - 2))
    return ops.where(ops.greater(x, 0), x, w * x)


def check_pad(shape: tuple, widths: list[int], mode: str) -> None:
    """PyTorch's checks of a non-constant ``F.pad``: ``2k`` widths pad a (k + 1)- or
    (k + 2)-D input, a reflection is narrower than its dim, a wrap goes around at most once.

    Example:
        >>> check_pad((1, 1, 3), [2, 2], "reflect")
        >>> try:
        ...     check_pad((1, 1, 3), [3, 0], "reflect")
        ... except ShapeError as error:
        ...     print(str(error).splitlines()[0])
        pad: reflect padding (3, 0) must be narrower than dim 2 of size 3 (input shape (1, 1, 3))
    """
    if mode == "constant":
        return
    dims = len(widths) // 2
    if len(shape) not in (dims + 1, dims + 2):
        raise _fail(
            f"pad: {len(widths)} pad values in mode {mode!r} pad a {dims + 1}-D or {dims + 2}-D "
            f"input, got shape {shape}"
        )
    for i in range(dims):
        axis, pair = len(shape) - 1 - i, (widths[2 * i], widths[2 * i + 1])
        size = shape[axis]
        if (mode == "reflect" and max(pair) >= size) or (mode == "circular" and max(pair) > size):
            limit = "narrower than" if mode == "reflect" else "at most"
            raise _fail(
                f"pad: {mode} padding {pair} must be {limit} dim {axis} of size {size} "
                f"(input shape {shape})"
            )


def _bag_ids(input: Tensor, offsets: Any, include_last_offset: bool) -> tuple[Any, int]:
    """For 1-D ``input`` with ``offsets``: each id's bag index and the number of bags."""
    if offsets is None:
        raise _fail("embedding_bag: offsets has to be given when input is 1-D")
    starts = as_tensor(offsets)
    if starts.ndim != 1:
        raise _fail(f"embedding_bag: offsets must be 1-D, got shape {starts.shape}")
    bags = starts.shape[0] - (1 if include_last_offset else 0)
    starts = starts[:bags]
    positions = ops.arange(0, input.shape[0], 1, np.int64, input.device)
    # an id belongs to the last bag whose start is at or before its position
    started = ops.greater_equal(positions.reshape(-1, 1), starts.reshape(1, -1))
    return ops.cast(started, np.int64).sum(1) - 1, bags


def _check_bag_args(mode: str, per_sample_weights: Any, input: Tensor) -> None:
    if mode not in _BAG_MODES:
        raise ValueError(with_location(f"embedding_bag: mode {mode!r} is not one of {_BAG_MODES}"))
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(
                with_location(
                    "embedding_bag: per_sample_weights is only supported for mode='sum' "
                    f"(got mode={mode!r}), as PyTorch"
                )
            )
        if tuple(as_tensor(per_sample_weights).shape) != tuple(input.shape):
            raise _fail(
                f"embedding_bag: per_sample_weights shape {as_tensor(per_sample_weights).shape} "
                f"must match input shape {input.shape}"
            )
    if input.ndim not in (1, 2) or np.dtype(input.dtype).kind not in "iu":
        raise DTypeError(
            with_location(
                f"embedding_bag: input must be 1-D or 2-D integer ids, got {input.shape} "
                f"{input.dtype}"
            )
        )


def _reduce_bags(rows: Tensor, member: Tensor, mode: str) -> Tensor:
    """Reduce ``rows`` (T, D) into bags: ``member`` (B, T) is 1 where row t is in bag b."""
    count = member.sum(1, keepdim=True)
    if mode == "max":
        inside = ops.expand_dims(ops.greater(member, 0), -1)  # (B, T, 1)
        lowest = ops.full_like(rows, -np.inf)
        best = ops.where(inside, ops.expand_dims(rows, 0), ops.expand_dims(lowest, 0)).amax(1)
        return ops.where(ops.greater(count, 0), best, ops.zeros_like(best))  # empty bag: 0
    total = member @ rows
    if mode == "sum":
        return total
    return total / ops.maximum(count, 1)  # an empty bag's mean is 0, as PyTorch


def embedding_bag(
    input: Any,
    weight: Any,
    offsets: Any = None,
    max_norm: float | None = None,
    norm_type: float = 2,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    sparse: bool = False,
    per_sample_weights: Any = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
) -> Tensor:
    """Sums, means or maxima of bags of embeddings: rows of a 2-D ``input`` are bags, or a 1-D
    ``input`` is cut into bags starting at ``offsets``; ``padding_idx`` ids are left out.

    Example:
        >>> w = as_tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]])
        >>> embedding_bag(as_tensor([0, 1, 2]), w, as_tensor([0, 2]), mode="sum").tolist()
        [[1.0, 1.0], [2.0, 2.0]]
    """
    if max_norm is not None or scale_grad_by_freq:
        raise NotImplementedError(
            with_location("embedding_bag: max_norm and scale_grad_by_freq are not supported")
        )
    ids = as_tensor(input)
    _check_bag_args(mode, per_sample_weights, ids)
    w = as_tensor(weight)
    if ids.ndim == 2:
        if offsets is not None:
            raise _fail("embedding_bag: offsets must be None when input is 2-D")
        bags, length = ids.shape
        bag = ops.arange(0, bags, 1, np.int64, ids.device).reshape(bags, 1)
        bag = ops.broadcast_to(bag, (bags, length)).reshape(-1)
        ids, weights = ids.reshape(-1), per_sample_weights
        weights = None if weights is None else as_tensor(weights).reshape(-1)
    else:
        bag, bags = _bag_ids(ids, offsets, include_last_offset)
        weights = per_sample_weights
    rows = embedding(ids, w)
    if weights is not None:
        rows = rows * as_tensor(weights).reshape(-1, 1)
    member = ops.one_hot(bag, bags, dtype=w.dtype).transpose(1, 0)  # (B, T)
    if padding_idx is not None:
        member = member * ops.cast(ops.not_equal(ids, padding_idx % w.shape[0]), w.dtype)
    return _reduce_bags(rows, member, mode)


def _attention_bias(mask: Any, is_causal: bool, scores: Tensor) -> Tensor | None:
    """The additive bias (0 or -inf where a bool mask is False) of ``attn_mask``/``is_causal``."""
    length, source = scores.shape[-2], scores.shape[-1]
    bias = None
    if is_causal:
        if mask is not None:
            raise ValueError(
                with_location(
                    "scaled_dot_product_attention: pass attn_mask or is_causal=True, not both"
                )
            )
        rows = ops.arange(0, length, 1, np.int64, scores.device).reshape(length, 1)
        cols = ops.arange(0, source, 1, np.int64, scores.device).reshape(1, source)
        mask = ops.greater_equal(rows, cols)
    if mask is not None:
        mask = as_tensor(mask)
        if np.dtype(mask.dtype).kind == "b":
            zero = ops.zeros_like(scores)
            bias = ops.where(mask, zero, ops.full_like(scores, -np.inf))
        else:
            bias = ops.cast(mask, scores.dtype)
    return bias


def _share_heads(q: Tensor, kv: Tensor) -> Tensor:
    """Grouped-query attention: each of the Hkv key/value heads (dim -3) serves Hq / Hkv
    consecutive query heads (PyTorch's ``repeat_interleave``), as an expand and a reshape."""
    if q.ndim < 3 or kv.ndim < 3:
        raise _fail(
            f"scaled_dot_product_attention: enable_gqa needs heads at dim -3, got {q.shape}"
        )
    heads, shared = q.shape[-3], kv.shape[-3]
    if heads % shared:
        raise _fail(
            f"scaled_dot_product_attention: {heads} query heads are not a multiple of {shared} "
            "key/value heads"
        )
    lead, (length, width) = tuple(kv.shape[:-3]), tuple(kv.shape[-2:])
    grouped = ops.expand_dims(kv, -3)
    grouped = ops.broadcast_to(grouped, lead + (shared, heads // shared, length, width))
    return grouped.reshape(lead + (heads, length, width))


def _safe_softmax(scores: Tensor) -> Tensor:
    """Softmax over the last dim whose fully masked rows (all -inf) are 0, as PyTorch's SDPA."""
    empty = ops.equal(scores.amax(-1, keepdim=True), -np.inf)
    zeros = ops.zeros_like(scores)
    weights = softmax(ops.where(empty, zeros, scores), dim=-1)
    return ops.where(empty, zeros, weights)


def scaled_dot_product_attention(
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    """``softmax(q @ k^T * scale + bias) @ v`` over (..., L, E) queries and (..., S, E) keys;
    ``attn_mask`` is bool (True takes part) or float (added), ``is_causal`` masks the upper
    triangle, ``scale`` defaults to ``1 / sqrt(E)``; dropout on the weights with ``dropout_p``.
    A query whose keys are all masked out gets zeros, as PyTorch 2.x.

    Example:
        >>> q = as_tensor([[[1.0, 0.0], [0.0, 1.0]]])
        >>> scaled_dot_product_attention(q, q, q, is_causal=True).tolist()[0][0]
        [1.0, 0.0]
    """
    # on PyTorch's lower-precision autocast list: every float input, a float mask too
    q, k, v = lower_inputs(as_tensor(query), as_tensor(key), as_tensor(value))
    if isinstance(attn_mask, Tensor):
        (attn_mask,) = lower_inputs(attn_mask)
    if enable_gqa:
        k, v = _share_heads(q, k), _share_heads(q, v)
    if q.ndim < 2 or k.ndim < 2 or q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise _fail(
            f"scaled_dot_product_attention: query {q.shape}, key {k.shape} and value "
            f"{v.shape} must be (..., L, E), (..., S, E) and (..., S, Ev)"
        )
    factor = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    scores = (q @ k.transpose(-2, -1)) * factor
    bias = _attention_bias(attn_mask, is_causal, scores)
    weights = softmax(scores, dim=-1) if bias is None else _safe_softmax(scores + bias)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, training=True)
    return weights @ v


def _channel_dropout(name: str, x: Tensor, p: float, batched: bool) -> Tensor:
    """Zero whole channels: dim 1 of a batched input, dim 0 of an unbatched one."""
    dtype = require_float(name, x, "input")
    lead = 2 if batched else 1
    shape = tuple(x.shape[:lead]) + (1,) * (x.ndim - lead)
    return x * ops.dropout_mask(next_key(None, x), shape, p, dtype)


def dropout1d(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, L) or unbatched (C, L) input with probability ``p``.

    Example:
        >>> x = as_tensor([[1.0, 1.0], [1.0, 1.0]])
        >>> dropout1d(x, 0.5, training=False) is x
        True
    """
    p = _check_p(p)
    x = as_tensor(input)
    if x.ndim not in (2, 3):
        raise _fail(f"dropout1d: expected a 2-D or 3-D input, got shape {x.shape}")
    if not training or p == 0.0:
        return input
    return _channel_dropout("dropout1d", x, p, batched=x.ndim == 3)


def dropout3d(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, D, H, W) or unbatched (C, D, H, W) input with probability
    ``p``; other ranks warn and are taken as unbatched (channels on dim 0), as PyTorch.

    Example:
        >>> x = as_tensor([[[[[1.0]]]]])
        >>> dropout3d(x, 0.5, training=False) is x
        True
    """
    p = _check_p(p)
    if not training or p == 0.0:
        return input
    x = as_tensor(input)
    if x.ndim == 0:
        raise _fail("dropout3d: expected an input with a channel dim, got a 0-D tensor")
    if x.ndim not in (4, 5):
        warnings.warn(
            f"dropout3d: received a {x.ndim}-D input; taking dim 0 as the channels", stacklevel=2
        )
    return _channel_dropout("dropout3d", x, p, batched=x.ndim == 5)
