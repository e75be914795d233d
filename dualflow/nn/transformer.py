"""Transformer encoder: ``TransformerEncoderLayer``, ``TransformerEncoder`` and the causal mask.

Submodule and parameter names are PyTorch's (``self_attn``, ``linear1``, ``norm1``...), so state
dicts load. The math is PyTorch's slow path (post-norm, or pre-norm with ``norm_first``).
PyTorch's eval-mode "fast path" gives the same values except that, with a
``src_key_padding_mask``, it zeroes the outputs at padded positions; dualflow does not.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np

from dualflow import arguments, ops
from dualflow.nn.attention import MultiheadAttention
from dualflow.nn.containers import ModuleList
from dualflow.nn.dropout import Dropout
from dualflow.nn.linear import Linear
from dualflow.nn.module import Module
from dualflow.nn.normalization import LayerNorm
from dualflow.tensor.core import Tensor

_ACTIVATIONS: dict[str, Callable[[Any], Any]] = {"relu": ops.relu, "gelu": ops.gelu}


def activation_fn(activation: str | Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``"relu"``/``"gelu"`` as functions; a callable (function or Module) is kept."""
    if isinstance(activation, str):
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation should be relu/gelu, not {activation!r}")
        return _ACTIVATIONS[activation]
    if not callable(activation):
        raise TypeError(f"activation must be a string or a callable, got {activation!r}")
    return activation


def generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Tensor:
    """The (sz, sz) causal mask: -inf above the diagonal (future positions), 0 elsewhere.

    Example:
        >>> generate_square_subsequent_mask(3).tolist()
        [[0.0, -inf, -inf], [0.0, 0.0, -inf], [0.0, 0.0, 0.0]]
    """
    # built with ops, not numpy: inside a compiled step ``sz`` may be a size expression
    index = ops.arange(sz)
    future = ops.greater(ops.expand_dims(index, 0), ops.expand_dims(index, 1))
    mask = ops.cast(ops.where(future, -np.inf, 0.0), np.dtype(dtype or np.float32).name)
    return mask if device is None else mask.to_device(device)


def clones(module: Module, n: int) -> ModuleList:
    """``n`` deep copies of ``module`` (identical initial weights, as PyTorch's stacks)."""
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise ValueError(f"num_layers must be a positive integer, got {n!r}")
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


def check_layer_sizes(layer: Module, dim_feedforward: Any, layer_norm_eps: Any) -> None:
    """ArgumentError naming a transformer layer's bad feed-forward size or norm eps."""
    name = type(layer).__name__
    arguments.integer(name, "dim_feedforward", dim_feedforward)
    arguments.real(name, "layer_norm_eps", layer_norm_eps, 0.0)


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block, each with a residual and a LayerNorm.

    ``norm_first=False`` (post-norm): ``x = norm1(x + sa(x)); x = norm2(x + ff(x))``;
    ``norm_first=True``: ``x = x + sa(norm1(x)); x = x + ff(norm2(x))``.

    Example:
        >>> layer = TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True)
        >>> layer(np.zeros((3, 5, 8), np.float32)).shape
        (3, 5, 8)
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable[[Any], Any] = "relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        check_layer_sizes(self, dim_feedforward, layer_norm_eps)
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **kw
        )
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = bool(norm_first)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = activation_fn(activation)

    def forward(
        self,
        src: Any,
        src_mask: Any = None,
        src_key_padding_mask: Any = None,
        is_causal: bool = False,
    ) -> Tensor:
        """Encode ``src`` (L, N, E) (``batch_first``: (N, L, E))."""
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))

    def _sa_block(self, x: Any, attn_mask: Any, key_padding_mask: Any, is_causal: bool) -> Any:
        out = self.self_attn(
            x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
            need_weights=False, is_causal=is_causal,
        )[0]  # fmt: skip
        return self.dropout1(out)

    def _ff_block(self, x: Any) -> Any:
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """A stack of ``num_layers`` copies of ``encoder_layer``, then an optional ``norm``.

    Example:
        >>> layer = TransformerEncoderLayer(8, 2, dim_feedforward=16)
        >>> enc = TransformerEncoder(layer, 2)
        >>> mask = generate_square_subsequent_mask(5)
        >>> enc(np.zeros((5, 3, 8), np.float32), mask=mask, is_causal=True).shape
        (5, 3, 8)
    """

    def __init__(
        self,
        encoder_layer: Module,
        num_layers: int,
        norm: Module | None = None,
        enable_nested_tensor: bool = True,
        mask_check: bool = True,
    ) -> None:
        super().__init__()
        self.layers = clones(encoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm
        # accepted for compatibility: nested tensors are a PyTorch-internal speed-up
        self.enable_nested_tensor, self.mask_check = enable_nested_tensor, mask_check

    def forward(
        self,
        src: Any,
        mask: Any = None,
        src_key_padding_mask: Any = None,
        is_causal: bool | None = None,
    ) -> Tensor:
        """Run every layer on ``src`` with the same masks."""
        x = src
        for layer in self.layers:
            x = layer(
                x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                is_causal=bool(is_causal),
            )  # fmt: skip
        return x if self.norm is None else self.norm(x)
