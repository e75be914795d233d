"""PyTorch (eager) versions of the bench workloads, with the same definitions and shapes.

Imported only by ``child.py`` in a fresh process under the peers' interpreter: each builder
returns ``(step, sync)``; ``WORKLOADS`` maps dualflow's workload names to them. Threads follow
``OMP_NUM_THREADS`` (the runner sets 2), as in /work/shared/peers' reference scripts.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

try:  # a sibling module: imported from the package, or from this file's folder by child.py
    from .shape_sizes import BATCH_SIZES, INFER_BATCHES, SEQ_LENGTHS
except ImportError:
    from shape_sizes import BATCH_SIZES, INFER_BATCHES, SEQ_LENGTHS  # type: ignore[no-redef]

MODE = "torch eager"
VERSION = torch.__version__
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
torch.manual_seed(0)

Built = tuple[Callable[[], Any], Callable[[Any], None]]


def _no_sync(result: Any) -> None:
    return None  # eager torch on the CPU is synchronous


def _tiny_chain(x: Any, w: Any) -> Any:
    h = x
    for _ in range(10):
        h = torch.sigmoid(torch.tanh(h * 0.9 + 0.1) * w)
    return h.sum()


def tiny_ops() -> Built:
    """50 tiny ops on 16x16 and ``autograd.grad`` wrt both inputs."""
    x = torch.randn(16, 16, requires_grad=True)
    w = torch.randn(16, 16, requires_grad=True)
    return (lambda: torch.autograd.grad(_tiny_chain(x, w), (x, w))), _no_sync


def tiny_ops_fwd() -> Built:
    """The same chain, forward only under no_grad."""
    x, w = torch.randn(16, 16), torch.randn(16, 16)

    def step() -> Any:
        with torch.no_grad():
            return _tiny_chain(x, w)

    return step, _no_sync


def _mlp() -> nn.Module:
    layers = [nn.Linear(784, 1000), nn.ReLU(), nn.Linear(1000, 1000), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(1000, 10))


def _train_step(model: nn.Module, x: Any, y: Any) -> Built:
    sgd = torch.optim.SGD(model.parameters(), lr=0.01)

    def step() -> Any:
        sgd.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        sgd.step()
        return loss

    return step, _no_sync


def mlp() -> Built:
    """MLP 784-1000-1000-10 train step (softmax-CE, SGD lr 0.01), batch 64."""
    return _train_step(_mlp(), torch.randn(64, 784), torch.randint(0, 10, (64,)))


def elementwise() -> Built:
    """``tanh(x*0.5+1)*sigmoid(x) - x**2`` on 4M float32."""
    x = torch.randn(4 * 1024 * 1024)
    return (lambda: torch.tanh(x * 0.5 + 1) * torch.sigmoid(x) - x**2), _no_sync


def poly_chain() -> Built:
    """``(x*0.5+1)*(x-2) - x*x`` on 4M float32."""
    x = torch.randn(4 * 1024 * 1024)
    return (lambda: (x * 0.5 + 1) * (x - 2) - x * x), _no_sync


def _small_cnn(width: int = 32) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, width, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(width, 2 * width, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(2 * width, 2 * width, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(2 * width, 10),
    )


def small_cnn() -> Built:
    """The 3-conv CNN train step, batch 32 x 3x32x32 (convs with padding 1)."""
    return _train_step(_small_cnn(), torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,)))


class _Block(nn.Module):
    # torchvision's BasicBlock: two 3x3 convs with batch norm, a 1x1 projection when reshaped.
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.c2, self.b2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.short = nn.Sequential()
        if stride != 1 or cin != cout:
            conv = nn.Conv2d(cin, cout, 1, stride, bias=False)
            self.short = nn.Sequential(conv, nn.BatchNorm2d(cout))

    def forward(self, x: Any) -> Any:
        h = F.relu(self.b1(self.c1(x)))
        return F.relu(self.b2(self.c2(h)) + self.short(x))


def _resnet18() -> nn.Module:
    stem = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()]
    blocks, cin = [], 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        blocks += [_Block(cin, cout, stride), _Block(cout, cout, 1)]
        cin = cout
    pool = [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10)]
    return nn.Sequential(*stem, *blocks, *pool).train()


def resnet18() -> Built:
    """ResNet-18 (CIFAR stem, no max pool) train step, batch 16 x 3x32x32, SGD lr 0.01."""
    return _train_step(_resnet18(), torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,)))


def gradient_penalty_mlp() -> Built:
    """Double backward through the MLP at batch 64: grads of ``sum((d sum(f(x))/dx)**2)``."""
    model = _mlp()
    params = list(model.parameters())
    x = torch.randn(64, 784, requires_grad=True)

    def step() -> Any:
        (g,) = torch.autograd.grad(model(x).sum(), x, create_graph=True)
        return torch.autograd.grad((g**2).sum(), params, allow_unused=True)

    return step, _no_sync


def per_example_grads() -> Built:
    """torch.func's per-example gradients of the MLP 784-128-10 at batch 64: vmap(grad)."""
    from torch.func import functional_call, grad, vmap  # noqa: PLC0415 - torch >= 2.0 only

    model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = torch.randn(64, 784), torch.randint(0, 10, (64,))

    def loss(p: dict, xi: Any, yi: Any) -> Any:
        return F.cross_entropy(functional_call(model, p, (xi[None],)), yi[None])

    per_example = vmap(grad(loss), in_dims=(None, 0, 0))
    return (lambda: per_example(params, x, y)), _no_sync


class _LM(nn.Module):
    # the peers' w7_lm_steps.py models: embedding, 2 Transformer encoder or LSTM layers, head
    def __init__(self, recurrent: bool, vocab: int = 1000, width: int = 256) -> None:
        super().__init__()
        self.emb, self.out, self.recurrent = (
            nn.Embedding(vocab, width),
            nn.Linear(width, vocab),
            recurrent,
        )
        if recurrent:
            self.body = nn.LSTM(width, width, 2, batch_first=True)
        else:
            layer = nn.TransformerEncoderLayer(width, 4, 4 * width, dropout=0.0, batch_first=True)
            self.body = nn.TransformerEncoder(layer, 2)

    def forward(self, x: Any) -> Any:
        h = self.body(self.emb(x))
        return self.out(h[0] if self.recurrent else h)


def _lm_step(recurrent: bool) -> Built:
    model, vocab = _LM(recurrent), 1000
    adam = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randint(0, vocab, (16, 64)), torch.randint(0, vocab, (16, 64))

    def step() -> Any:
        adam.zero_grad()
        loss = F.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
        loss.backward()
        adam.step()
        return loss

    return step, _no_sync


def transformer_lm() -> Built:
    """Transformer encoder LM train step (2 layers, d 256, 4 heads, 16 x 64 tokens), Adam."""
    return _lm_step(recurrent=False)


def lstm_lm() -> Built:
    """2-layer LSTM LM train step (hidden 256, 16 x 64 tokens, vocab 1000), Adam."""
    return _lm_step(recurrent=True)


def _passes(step: Callable[..., Any], calls: list[tuple]) -> Built:
    # issue 39's workloads: a step is one pass over the size sequence, one call per size
    return (lambda: [step(*args) for args in calls]), _no_sync


def variable_batch() -> Built:
    """MLP 784-256-10 train step (SGD lr 0.01) at the 40 batch sizes of ``BATCH_SIZES``."""
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    calls = [(torch.randn(b, 784), torch.randint(0, 10, (b,))) for b in BATCH_SIZES]
    sgd = torch.optim.SGD(model.parameters(), lr=0.01)

    def call(x: Any, y: Any) -> Any:
        sgd.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        sgd.step()
        return loss

    return _passes(call, calls)


def variable_seq() -> Built:
    """Transformer encoder LM (vocab 256, d 64, 1 layer, 2 heads) train step, Adam lr 1e-3,
    on 4 sequences of each of the 40 lengths of ``SEQ_LENGTHS``."""
    vocab, width = 256, 64
    layer = nn.TransformerEncoderLayer(width, 2, 4 * width, dropout=0.0, batch_first=True)
    emb, enc, out = (
        nn.Embedding(vocab, width),
        nn.TransformerEncoder(layer, 1),
        nn.Linear(width, vocab),
    )
    model = nn.Sequential(emb, enc, out)
    adam = torch.optim.Adam(model.parameters(), lr=1e-3)
    calls = [tuple(torch.randint(0, vocab, (4, n)) for _ in "xy") for n in SEQ_LENGTHS]

    def call(x: Any, y: Any) -> Any:
        adam.zero_grad()
        loss = F.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
        loss.backward()
        adam.step()
        return loss

    return _passes(call, calls)


def variable_batch_infer() -> Built:
    """The small CNN (first conv 16 channels) in eval mode under no_grad, 3x32x32 images at the
    40 batch sizes of ``INFER_BATCHES``."""
    model = _small_cnn(16).eval()

    def call(x: Any) -> Any:
        with torch.no_grad():
            return model(x)

    return _passes(call, [(torch.randn(b, 3, 32, 32),) for b in INFER_BATCHES])


WORKLOADS: dict[str, Callable[[], Built]] = {
    "tiny-ops": tiny_ops,
    "tiny-ops-fwd": tiny_ops_fwd,
    "mlp": mlp,
    "elementwise": elementwise,
    "poly-chain": poly_chain,
    "small-cnn": small_cnn,
    "resnet18": resnet18,
    "gradient-penalty-mlp": gradient_penalty_mlp,
    "per-example-grads": per_example_grads,
    "transformer-lm": transformer_lm,
    "lstm-lm": lstm_lm,
    "variable-batch": variable_batch,
    "variable-seq": variable_seq,
    "variable-batch-infer": variable_batch_infer,
}
