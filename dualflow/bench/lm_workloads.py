"""The bench's language-model training workloads: a Transformer encoder LM and an LSTM LM.

Both are the peers' ``w7_lm_steps.py`` models (issue 38): embedding (vocab 1000, width 256), two
layers (Transformer encoder layers with 4 heads and a 1024-wide feed-forward, no dropout; or
LSTM layers), a linear head back to the vocabulary, cross entropy over batch 16 x 64 tokens and
Adam lr 1e-3, written with ``dualflow.nn`` as a PyTorch user writes them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import dualflow
from dualflow import nn, optim
from dualflow.device import CPU, Device
from dualflow.nn import functional as F

VOCAB, WIDTH, BATCH, LENGTH = 1000, 256, 16, 64


class _TransformerLM(nn.Module):
    def __init__(self, vocab: int, width: int, layers: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        layer = nn.TransformerEncoderLayer(width, 4, 4 * width, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers)
        self.out = nn.Linear(width, vocab)

    def forward(self, x: Any) -> Any:
        return self.out(self.enc(self.emb(x)))


class _LSTMLM(nn.Module):
    def __init__(self, vocab: int, width: int, layers: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        self.rnn = nn.LSTM(width, width, layers, batch_first=True)
        self.out = nn.Linear(width, vocab)

    def forward(self, x: Any) -> Any:
        h, _ = self.rnn(self.emb(x))
        return self.out(h)


def _lm_step(
    rng: np.random.Generator,
    device: Device,
    factory: Callable[[int, int, int], nn.Module],
    shape: tuple[int, int, int, int],
) -> dict[str, Any]:
    vocab, width, batch, length = shape
    dualflow.random.seed(int(rng.integers(2**31)))  # the same weights in every mode
    model = factory(vocab, width, 2).to_device(device)
    opt = optim.Adam(model.parameters(), lr=1e-3)
    x = dualflow.tensor(rng.integers(0, vocab, (batch, length)), device=device)
    y = dualflow.tensor(rng.integers(0, vocab, (batch, length)), device=device)

    def step() -> Any:
        opt.zero_grad()
        loss = F.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    return {"step": step, "params": list(model.parameters())}


def build_transformer_lm(
    rng: np.random.Generator,
    device: Device = CPU,
    vocab: int = VOCAB,
    width: int = WIDTH,
    batch: int = BATCH,
    length: int = LENGTH,
) -> dict[str, Any]:
    """Transformer encoder LM train step (2 layers, 4 heads, feed-forward 4 x width), Adam.

    Example:
        >>> built = build_transformer_lm(np.random.default_rng(0), vocab=11, width=8, batch=2,
        ...                              length=3)
        >>> built["step"]().shape, len(built["params"])
        ((), 27)
    """
    return _lm_step(rng, device, _TransformerLM, (vocab, width, batch, length))


def build_lstm_lm(
    rng: np.random.Generator,
    device: Device = CPU,
    vocab: int = VOCAB,
    width: int = WIDTH,
    batch: int = BATCH,
    length: int = LENGTH,
) -> dict[str, Any]:
    """2-layer LSTM LM train step (hidden = width), Adam.

    Example:
        >>> built = build_lstm_lm(np.random.default_rng(0), vocab=11, width=8, batch=2, length=3)
        >>> built["step"]().shape, len(built["params"])
        ((), 11)
    """
    return _lm_step(rng, device, _LSTMLM, (vocab, width, batch, length))
