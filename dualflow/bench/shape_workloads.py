"""The variable-shape workloads (issue 39): steps a user calls with a new size at every call.

Each builder returns the function a user would compile (it takes the batch as arguments), the
argument tuples of one pass over its fixed size sequence (``peers.shape_sizes``, shared with the
PyTorch peers) and the parameters compared across modes. ``dualflow.bench.shape_rows`` times
them: eager, compiled, compiled with ``passes="exact"`` and static-shape plans of the same sizes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import dualflow
from dualflow import nn, optim
from dualflow.bench.peers.shape_sizes import BATCH_SIZES, INFER_BATCHES, SEQ_LENGTHS
from dualflow.bench.vision_workloads import _small_cnn
from dualflow.device import CPU, Device
from dualflow.nn import functional as F

LM_VOCAB, LM_WIDTH, LM_BATCH = 256, 64, 4  # small: a trace per distinct length fits ~30 s


def _seed(rng: np.random.Generator) -> None:
    # Module init draws from dualflow's generator: the same weights in every mode.
    dualflow.random.seed(int(rng.integers(2**31)))


def _train_step(model: nn.Module, opt: Any, flatten_to: int | None = None) -> Any:
    def step(x: Any, y: Any) -> Any:
        opt.zero_grad()
        out = model(x)
        if flatten_to is not None:  # a language model: every position is a prediction
            out, y = out.reshape(-1, flatten_to), y.reshape(-1)
        loss = F.cross_entropy(out, y)
        loss.backward()
        opt.step()
        return loss

    return step


def build_variable_batch(
    rng: np.random.Generator,
    device: Device = CPU,
    sizes: Sequence[int] = BATCH_SIZES,
    hidden: int = 256,
) -> dict[str, Any]:
    """MLP 784-``hidden``-10 train step (cross entropy, SGD lr 0.01) at batch sizes ``sizes``.

    Example:
        >>> built = build_variable_batch(np.random.default_rng(0), sizes=[3, 5], hidden=8)
        >>> [x.shape for x, _ in built["calls"]], built["fn"](*built["calls"][0]).shape
        ([(3, 784), (5, 784)], ())
    """
    _seed(rng)
    model = nn.Sequential(nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, 10))
    model = model.to_device(device)
    calls = [
        (
            dualflow.tensor(rng.standard_normal((b, 784), dtype=np.float32), device=device),
            dualflow.tensor(rng.integers(0, 10, b), device=device),
        )
        for b in sizes
    ]
    opt = optim.SGD(model.parameters(), lr=0.01)
    return {"fn": _train_step(model, opt), "calls": calls, "params": list(model.parameters())}


class _LM(nn.Module):
    # embedding, a 1-layer Transformer encoder (2 heads, no dropout), a head to the vocabulary
    def __init__(self, vocab: int, width: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        layer = nn.TransformerEncoderLayer(width, 2, 4 * width, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 1)
        self.out = nn.Linear(width, vocab)

    def forward(self, x: Any) -> Any:
        return self.out(self.enc(self.emb(x)))


def build_variable_seq(
    rng: np.random.Generator,
    device: Device = CPU,
    lengths: Sequence[int] = SEQ_LENGTHS,
    vocab: int = LM_VOCAB,
    width: int = LM_WIDTH,
    batch: int = LM_BATCH,
) -> dict[str, Any]:
    """Transformer encoder LM train step (Adam lr 1e-3) on ``batch`` sequences of each length.

    Example:
        >>> built = build_variable_seq(np.random.default_rng(0), lengths=[5, 7], width=8)
        >>> [x.shape for x, _ in built["calls"]], built["fn"](*built["calls"][1]).shape
        ([(4, 5), (4, 7)], ())
    """
    _seed(rng)
    model = _LM(vocab, width).to_device(device)
    calls = [
        tuple(dualflow.tensor(rng.integers(0, vocab, (batch, n)), device=device) for _ in "xy")
        for n in lengths
    ]
    opt = optim.Adam(model.parameters(), lr=1e-3)
    step = _train_step(model, opt, flatten_to=vocab)
    return {"fn": step, "calls": calls, "params": list(model.parameters())}


def build_variable_batch_infer(
    rng: np.random.Generator,
    device: Device = CPU,
    sizes: Sequence[int] = INFER_BATCHES,
    width: int = 16,
) -> dict[str, Any]:
    """The small CNN (``width`` first-conv channels, 3x32x32 inputs) in eval mode, no_grad
    forward at batch sizes ``sizes``.

    Example:
        >>> built = build_variable_batch_infer(np.random.default_rng(0), sizes=[1, 2], width=2)
        >>> built["fn"](*built["calls"][1]).shape
        (2, 10)
    """
    _seed(rng)
    model = _small_cnn(width).to_device(device).eval()
    calls = [
        (dualflow.tensor(rng.standard_normal((b, 3, 32, 32), dtype=np.float32), device=device),)
        for b in sizes
    ]

    def infer(x: Any) -> Any:
        with dualflow.no_grad():
            return model(x)

    return {"fn": infer, "calls": calls, "params": list(model.parameters())}
