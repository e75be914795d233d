"""Transformer decoder and the full encoder-decoder: ``TransformerDecoderLayer``,
``TransformerDecoder`` and ``Transformer`` (PyTorch's names, math and init).

``Transformer.generate_square_subsequent_mask`` is PyTorch's causal-mask helper.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dualflow.errors import ShapeError
from dualflow.nn import init
from dualflow.nn.attention import MultiheadAttention
from dualflow.nn.dropout import Dropout
from dualflow.nn.linear import Linear
from dualflow.nn.module import Module
from dualflow.nn.normalization import LayerNorm
from dualflow.nn.transformer import (
    TransformerEncoder,
    TransformerEncoderLayer,
    activation_fn,
    check_layer_sizes,
    clones,
    generate_square_subsequent_mask,
)
from dualflow.tensor.core import Tensor


class TransformerDecoderLayer(Module):
    """Self-attention, attention over ``memory``, then a feed-forward block (each residual).

    Example:
        >>> import numpy as np
        >>> layer = TransformerDecoderLayer(8, 2, dim_feedforward=16)
        >>> layer(np.zeros((4, 2, 8), np.float32), np.zeros((6, 2, 8), np.float32)).shape
        (4, 2, 8)
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
        attn = {"dropout": dropout, "bias": bias, "batch_first": batch_first, **kw}
        self.self_attn = MultiheadAttention(d_model, nhead, **attn)
        self.multihead_attn = MultiheadAttention(d_model, nhead, **attn)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = bool(norm_first)
        for k in (1, 2, 3):
            setattr(self, f"norm{k}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        for k in (1, 2, 3):
            setattr(self, f"dropout{k}", Dropout(dropout))
        self.activation = activation_fn(activation)

    def forward(
        self,
        tgt: Any,
        memory: Any,
        tgt_mask: Any = None,
        memory_mask: Any = None,
        tgt_key_padding_mask: Any = None,
        memory_key_padding_mask: Any = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ) -> Tensor:
        """Decode ``tgt`` (T, N, E) attending to ``memory`` (S, N, E)."""
        x = tgt
        sa = (tgt_mask, tgt_key_padding_mask, tgt_is_causal)
        mha = (memory, memory_mask, memory_key_padding_mask, memory_is_causal)
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), *sa)
            x = x + self._mha_block(self.norm2(x), *mha)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, *sa))
        x = self.norm2(x + self._mha_block(x, *mha))
        return self.norm3(x + self._ff_block(x))

    def _sa_block(self, x: Any, mask: Any, padding: Any, is_causal: bool) -> Any:
        out = self.self_attn(
            x, x, x, attn_mask=mask, key_padding_mask=padding, is_causal=is_causal,
            need_weights=False,
        )[0]  # fmt: skip
        return self.dropout1(out)

    def _mha_block(self, x: Any, mem: Any, mask: Any, padding: Any, is_causal: bool) -> Any:
        out = self.multihead_attn(
            x, mem, mem, attn_mask=mask, key_padding_mask=padding, is_causal=is_causal,
            need_weights=False,
        )[0]  # fmt: skip
        return self.dropout2(out)

    def _ff_block(self, x: Any) -> Any:
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoder(Module):
    """A stack of ``num_layers`` copies of ``decoder_layer``, then an optional ``norm``.

    Example:
        >>> import numpy as np
        >>> dec = TransformerDecoder(TransformerDecoderLayer(8, 2, dim_feedforward=16), 2)
        >>> dec(np.zeros((4, 2, 8), np.float32), np.zeros((6, 2, 8), np.float32)).shape
        (4, 2, 8)
    """

    def __init__(self, decoder_layer: Module, num_layers: int, norm: Module | None = None) -> None:
        super().__init__()
        self.layers = clones(decoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm

    def forward(
        self,
        tgt: Any,
        memory: Any,
        tgt_mask: Any = None,
        memory_mask: Any = None,
        tgt_key_padding_mask: Any = None,
        memory_key_padding_mask: Any = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        """Run every layer on ``tgt`` with ``memory`` and the same masks."""
        x = tgt
        for layer in self.layers:
            x = layer(
                x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                tgt_key_padding_mask=tgt_key_padding_mask,
                memory_key_padding_mask=memory_key_padding_mask,
                tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal,
            )  # fmt: skip
        return x if self.norm is None else self.norm(x)


class Transformer(Module):
    """The encoder-decoder Transformer (Vaswani et al.), PyTorch's ``nn.Transformer``.

    Weight matrices are re-initialized with ``xavier_uniform_`` (PyTorch's ``_reset_parameters``).

    Example:
        >>> import numpy as np
        >>> model = Transformer(8, 2, 1, 1, dim_feedforward=16)
        >>> src, tgt = np.zeros((6, 2, 8), np.float32), np.zeros((4, 2, 8), np.float32)
        >>> mask = Transformer.generate_square_subsequent_mask(4)
        >>> model(src, tgt, tgt_mask=mask).shape
        (4, 2, 8)
    """

    def __init__(
        self,
        d_model: int = 512,
        nhead: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable[[Any], Any] = "relu",
        custom_encoder: Module | None = None,
        custom_decoder: Module | None = None,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        layer_kw = {
            "dim_feedforward": dim_feedforward, "dropout": dropout, "activation": activation,
            "layer_norm_eps": layer_norm_eps, "batch_first": batch_first,
            "norm_first": norm_first, "bias": bias, **kw,
        }  # fmt: skip
        norm_kw = {"eps": layer_norm_eps, "bias": bias, **kw}
        self.encoder = custom_encoder or TransformerEncoder(
            TransformerEncoderLayer(d_model, nhead, **layer_kw),
            num_encoder_layers,
            LayerNorm(d_model, **norm_kw),
        )
        self.decoder = custom_decoder or TransformerDecoder(
            TransformerDecoderLayer(d_model, nhead, **layer_kw),
            num_decoder_layers,
            LayerNorm(d_model, **norm_kw),
        )
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    generate_square_subsequent_mask = staticmethod(generate_square_subsequent_mask)

    def forward(
        self,
        src: Any,
        tgt: Any,
        src_mask: Any = None,
        tgt_mask: Any = None,
        memory_mask: Any = None,
        src_key_padding_mask: Any = None,
        tgt_key_padding_mask: Any = None,
        memory_key_padding_mask: Any = None,
        src_is_causal: bool | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        """Encode ``src`` and decode ``tgt`` against it."""
        batch_axis = 0 if self.batch_first else 1
        if len(src.shape) == 3 and src.shape[batch_axis] != tgt.shape[batch_axis]:
            raise ShapeError("Transformer: the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ShapeError("Transformer: the feature number of src and tgt must equal d_model")
        memory = self.encoder(
            src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
            is_causal=src_is_causal,
        )  # fmt: skip
        return self.decoder(
            tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal,
        )  # fmt: skip
