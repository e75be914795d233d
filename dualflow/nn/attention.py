"""``MultiheadAttention`` with PyTorch's parameters, masks and outputs (its slow path, exactly).

Masks follow PyTorch: a bool mask is True where attention is *not* allowed (it becomes -inf), a
float mask is added to the scores; ``attn_mask`` is (L, S) or (N*num_heads, L, S) and
``key_padding_mask`` (N, S). Everything is matmul/softmax composites: differentiable, traceable.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dualflow import arguments, ops
from dualflow._config import config
from dualflow.errors import DTypeError, ShapeError
from dualflow.nn import init
from dualflow.nn.linear import Linear
from dualflow.nn.module import Module
from dualflow.tensor.core import Tensor


def canonical_mask(mask: Any, name: str, dtype: Any) -> Any:
    """A float mask of ``dtype`` (bool True -> -inf, float kept), or None.

    Example:
        >>> canonical_mask(np.array([True, False]), "mask", np.float32).tolist()
        [-inf, 0.0]
    """
    if mask is None:
        return None
    kind = np.dtype(mask.dtype).kind if hasattr(mask, "dtype") else "O"
    if kind == "b":
        return ops.where(mask, ops.cast(-np.inf, dtype), ops.cast(0.0, dtype))
    if kind != "f":
        raise DTypeError(f"MultiheadAttention: {name} must be a bool or floating-point mask")
    return ops.cast(mask, dtype) if np.dtype(mask.dtype) != np.dtype(dtype) else mask


def _pad_last(mask: Any) -> Any:
    """Append one zero (allowed) column: the extra key of add_bias_kv / add_zero_attn."""
    if mask is None:
        return None
    return ops.pad(mask, ((0, 0),) * (len(mask.shape) - 1) + ((0, 1),))


class MultiheadAttention(Module):
    """Multi-head attention: ``output, weights = mha(query, key, value, ...)``.

    Inputs are (L, N, E) (``batch_first``: (N, L, E)) or unbatched (L, E). ``weights`` is
    (N, L, S) averaged over heads (``average_attn_weights=False``: (N, num_heads, L, S)), or
    None with ``need_weights=False``. Parameters as PyTorch: ``in_proj_weight`` (3E, E) (or
    ``q/k/v_proj_weight`` when kdim/vdim differ), ``in_proj_bias``, ``out_proj``, optional
    ``bias_k``/``bias_v``.

    Example:
        >>> mha = MultiheadAttention(8, 2, batch_first=True)
        >>> x = np.zeros((3, 5, 8), np.float32)
        >>> out, w = mha(x, x, x)
        >>> out.shape, w.shape
        ((3, 5, 8), (3, 5, 5))
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        _check_args(embed_dim, num_heads, dropout)
        for key, value in (("kdim", kdim), ("vdim", vdim)):
            if value is not None:
                arguments.integer("MultiheadAttention", key, value)
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, float(dropout)
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.batch_first, self.head_dim = bool(batch_first), embed_dim // num_heads
        self.add_zero_attn = bool(add_zero_attn)
        self._make_parameters(bias, add_bias_kv, device, dtype)
        self._reset_parameters()

    def _make_parameters(self, bias: bool, add_bias_kv: bool, device: Any, dtype: Any) -> None:
        e, names = self.embed_dim, ("q_proj_weight", "k_proj_weight", "v_proj_weight")
        if self._qkv_same_embed_dim:
            self.in_proj_weight = init.empty_parameter((3 * e, e), dtype, device)
            for name in names:
                self.register_parameter(name, None)
        else:
            for name, width in zip(names, (e, self.kdim, self.vdim)):
                setattr(self, name, init.empty_parameter((e, width), dtype, device))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = init.empty_parameter((3 * e,), dtype, device)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(e, e, bias=bias, device=device, dtype=dtype)
        if add_bias_kv:
            self.bias_k = init.empty_parameter((1, 1, e), dtype, device)
            self.bias_v = init.empty_parameter((1, 1, e), dtype, device)
        else:
            self.bias_k = self.bias_v = None

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        for b in (self.bias_k, self.bias_v):
            if b is not None:
                init.xavier_normal_(b)

    def _project(self, query: Any, key: Any, value: Any, packed: bool) -> tuple[Any, Any, Any]:
        if packed and self._qkv_same_embed_dim:  # self-attention: one GEMM for q, k and v
            qkv = ops.linear(query, self.in_proj_weight, self.in_proj_bias)
            return ops.split(qkv, 3, axis=-1)
        if self._qkv_same_embed_dim:
            weights = ops.split(self.in_proj_weight, 3, axis=0)
        else:
            weights = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
        biases = (None,) * 3 if self.in_proj_bias is None else ops.split(self.in_proj_bias, 3)
        return tuple(ops.linear(x, w, b) for x, w, b in zip((query, key, value), weights, biases))

    def forward(
        self,
        query: Any,
        key: Any,
        value: Any,
        key_padding_mask: Any = None,
        need_weights: bool = True,
        attn_mask: Any = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to ``key``/``value``; see the class docstring for shapes."""
        if is_causal and attn_mask is None:
            raise ValueError(
                "MultiheadAttention: need attn_mask if specifying the is_causal hint; create "
                "one with nn.Transformer.generate_square_subsequent_mask(L)"
            )
        batched, packed = len(query.shape) == 3, query is key and key is value
        if not batched:
            query, key, value = (ops.expand_dims(t, 1) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = ops.expand_dims(key_padding_mask, 0)
        elif self.batch_first:
            query, key, value = (ops.transpose(t, (1, 0, 2)) for t in (query, key, value))
        out, weights = self._attend(query, key, value, key_padding_mask, attn_mask, packed)
        if need_weights:
            n, heads, length, source = out.shape[1], self.num_heads, *weights.shape[1:]
            weights = ops.reshape(weights, (n, heads, length, source))
            weights = ops.mean(weights, axis=1) if average_attn_weights else weights
            weights = weights if batched else ops.squeeze(weights, 0)
        if not batched:
            out = ops.squeeze(out, 1)
        elif self.batch_first:
            out = ops.transpose(out, (1, 0, 2))
        return out, (weights if need_weights else None)

    def _check_shapes(self, q: Any, k: Any, v: Any, attn_mask: Any, kpm: Any) -> None:
        (length, n, e), source = tuple(q.shape), k.shape[0]
        if e != self.embed_dim or k.shape[-1] != self.kdim or v.shape[-1] != self.vdim:
            raise ShapeError(
                f"MultiheadAttention: expected query/key/value feature sizes "
                f"({self.embed_dim}, {self.kdim}, {self.vdim}), got {q.shape}, {k.shape}, "
                f"{v.shape}"
            )
        if tuple(k.shape[:2]) != (source, n) or tuple(v.shape[:2]) != (source, n):
            raise ShapeError(f"MultiheadAttention: key {k.shape} and value {v.shape} mismatch")
        allowed = ((length, source), (n * self.num_heads, length, source))
        if attn_mask is not None and tuple(attn_mask.shape) not in allowed:
            raise ShapeError(
                f"MultiheadAttention: attn_mask has shape {tuple(attn_mask.shape)}, expected "
                f"{allowed[0]} or {allowed[1]}"
            )
        if kpm is not None and tuple(kpm.shape) != (n, source):
            raise ShapeError(
                f"MultiheadAttention: key_padding_mask has shape {tuple(kpm.shape)}, expected "
                f"{(n, source)}"
            )

    def _attend(
        self, query: Any, key: Any, value: Any, kpm: Any, attn_mask: Any, packed: bool = False
    ) -> tuple:
        """Core on (L, N, E) inputs: returns ((L, N, E) output, (N*H, L, S) weights);
        ``packed``: query, key and value are one tensor (projected by one GEMM)."""
        self._check_shapes(query, key, value, attn_mask, kpm)
        dtype = query.dtype
        attn_mask = canonical_mask(attn_mask, "attn_mask", dtype)
        kpm = canonical_mask(kpm, "key_padding_mask", dtype)
        length, n, e = query.shape
        q, k, v = self._project(query, key, value, packed)
        if self.bias_k is not None:
            k = ops.concat([k, ops.broadcast_to(self.bias_k, (1, n, e))], axis=0)
            v = ops.concat([v, ops.broadcast_to(self.bias_v, (1, n, e))], axis=0)
            attn_mask, kpm = _pad_last(attn_mask), _pad_last(kpm)
        heads, hd = self.num_heads, self.head_dim
        q, k, v = (ops.transpose(ops.reshape(t, (t.shape[0], n * heads, hd)), (1, 0, 2))
                   for t in (q, k, v))  # fmt: skip
        if self.add_zero_attn:
            zeros = ops.zeros_like(k[:, :1])
            k, v = ops.concat([k, zeros], axis=1), ops.concat([v, zeros], axis=1)
            attn_mask, kpm = _pad_last(attn_mask), _pad_last(kpm)
        mask = attn_mask
        if kpm is not None:
            source = kpm.shape[1]
            kpm = ops.broadcast_to(ops.reshape(kpm, (n, 1, 1, source)), (n, heads, 1, source))
            kpm = ops.reshape(kpm, (n * heads, 1, source))
            mask = kpm if mask is None else mask + kpm
        scores = ops.matmul(q * math.sqrt(1.0 / hd), ops.transpose(k, (0, 2, 1)))
        weights = ops.softmax(scores if mask is None else scores + mask, axis=-1)
        if self.dropout > 0.0:
            weights = ops.dropout(weights, self.dropout, train=self.training and config.train)
        out = ops.reshape(ops.transpose(ops.matmul(weights, v), (1, 0, 2)), (length * n, e))
        return ops.reshape(self.out_proj(out), (length, n, e)), weights


def _check_args(embed_dim: Any, num_heads: Any, dropout: Any) -> None:
    for key, value in (("embed_dim", embed_dim), ("num_heads", num_heads)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"MultiheadAttention: {key} must be a positive integer, got {value!r}")
    if embed_dim % num_heads:
        raise ValueError(
            f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by num_heads "
            f"({num_heads})"
        )
    if isinstance(dropout, bool) or not 0.0 <= dropout <= 1.0:
        raise ValueError(f"MultiheadAttention: dropout must be in [0, 1], got {dropout!r}")
