"""Fragments made of PyTorch-named layers: recurrent (RNN, GRU, LSTM over the batch as a
sequence), attention (MultiheadAttention, TransformerEncoderLayer), group and instance norm,
and an image path (1x1 conv to four channels, PixelShuffle, AvgPool2d, ConvTranspose2d).

Each statement maps an activation (batch, width) to the same shape. A batch change between
calls changes the sequence length, the image height or the norm's batch: a retrace.
"""

from __future__ import annotations

from typing import Any

from dualflow import nn, ops
from tests.tracer.fuzz.fragments import Fragment, Statement, draw_kind, register
from tests.tracer.fuzz.scope import Scope
from tests.tracer.fuzz.spec import Piece


def _recurrent(scope: Scope, piece: Piece) -> Statement:
    """The rows as one sequence through a one-layer RNN, GRU or LSTM (hidden size = width), or
    ("LSTM-batch", "GRU-batch") as a batch of sequences: two steps of half the rows each (one
    step of all of them for an odd count), which is how larger activations reach the lockstep
    halves (``kernels/linalg/lstm_lockstep.py``, ``gru_lockstep.py``: 8 rows or more, 32 units
    or more) and their rows form (whole vectors of sequences)."""
    kind, w = piece.get("kind"), scope.width
    batched = kind.endswith("-batch")
    layer = scope.module(getattr(nn, kind.removesuffix("-batch"))(w, w, batch_first=not batched))

    def statement(h: Any, env: Any) -> Any:
        rows = h.shape[0]
        steps = 2 if batched and rows % 2 == 0 else 1
        shape = (steps, rows // steps, h.shape[1]) if batched else (1, *h.shape)
        out, _ = layer(ops.reshape(h, shape))  # the last state (LSTM's a pair): dropped
        return h + ops.reshape(out, h.shape) * 0.5

    return statement


def _heads(width: int) -> int:
    return 2 if width % 2 == 0 else 1


def _attention(scope: Scope, piece: Piece) -> Statement:
    """Self-attention over the rows (a sequence of one batch): MultiheadAttention (its averaged
    weights feed back too) or a post-norm TransformerEncoderLayer without dropout."""
    w = scope.width
    if piece.get("kind") == "encoder":
        layer = nn.TransformerEncoderLayer(w, _heads(w), dim_feedforward=2 * w, dropout=0.0)
        encoder = scope.module(layer)
        return lambda h, env: ops.reshape(encoder(ops.reshape(h, (-1, 1, w))), h.shape)
    attention = scope.module(nn.MultiheadAttention(w, _heads(w)))

    def statement(h: Any, env: Any) -> Any:
        seq = ops.reshape(h, (-1, 1, w))
        out, weights = attention(seq, seq, seq)
        mixed = ops.reshape(weights, (h.shape[0], h.shape[0])) @ h  # (L, L) @ (L, W)
        return h + ops.reshape(out, h.shape) * 0.5 + mixed * 0.1

    return statement


def _norm(scope: Scope, piece: Piece) -> Statement:
    """GroupNorm over two channels of half the width, or InstanceNorm1d over one channel."""
    w = scope.width
    if piece.get("kind") == "group" and w % 2 == 0:
        norm = scope.module(nn.GroupNorm(2, 2))
        return lambda h, env: ops.reshape(norm(ops.reshape(h, (-1, 2, w // 2))), h.shape)
    norm = scope.module(nn.InstanceNorm1d(1, affine=True))
    return lambda h, env: ops.reshape(norm(ops.reshape(h, (-1, 1, w))), h.shape) + h * 0.5


def _image(scope: Scope, piece: Piece) -> Statement:
    """The activation as one image: a 1x1 conv to four channels, PixelShuffle(2) to twice the
    size and AvgPool2d(2) back; or a ConvTranspose2d that keeps the size."""
    if piece.get("kind") == "transpose":
        up = scope.module(nn.ConvTranspose2d(1, 1, 3, padding=1))
        return lambda h, env: ops.reshape(up(ops.reshape(h, (1, 1, *h.shape))), h.shape) + h
    lift = scope.module(nn.Conv2d(1, 4, 1))
    shuffle, pool = nn.PixelShuffle(2), nn.AvgPool2d(2)

    def statement(h: Any, env: Any) -> Any:
        image = pool(shuffle(ops.tanh(lift(ops.reshape(h, (1, 1, *h.shape))))))
        return h + ops.reshape(image, h.shape)

    return statement


def _register_all() -> None:
    for fragment in (
        Fragment(
            "recurrent", draw_kind("RNN", "GRU", "LSTM", "LSTM-batch", "GRU-batch"), _recurrent
        ),
        Fragment("attention", draw_kind("multihead", "encoder"), _attention),
        Fragment("norm", draw_kind("group", "instance"), _norm),
        Fragment("image", draw_kind("shuffle", "transpose"), _image),
    ):
        register(fragment)


_register_all()
