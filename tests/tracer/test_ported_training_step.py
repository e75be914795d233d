"""Compiled training steps through issue 40's names equal eager ones: padding layers, PReLU,
Dropout2d on a 2-D input, EmbeddingBag, scaled_dot_product_attention, atan2/tan/outer/diag, and
in-step randomness (multinomial, randperm, random_) drawn from the captured default generator.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

import dualflow
import dualflow.nn.functional as F
from dualflow import nn
from tests.tracer.helpers import assert_same, check_all_traces, tol

STEPS = 4


def _twin(make: Callable[[], nn.Module]) -> Callable[[], nn.Module]:
    reference = make()

    def build() -> nn.Module:
        model = make()
        model.load_state_dict({k: v.numpy() for k, v in reference.state_dict().items()})
        return model

    return build


def _run_both(make: Callable[[], nn.Module], loss_of: Callable, batches: list) -> Any:
    results = []
    for compiled in (False, True):
        model = make()
        opt = dualflow.optim.Adam(model.parameters(), lr=0.01)

        def step(*inputs: Any, model: nn.Module = model, opt: Any = opt) -> Any:
            opt.zero_grad()
            loss, extra = loss_of(model, *inputs)
            loss.backward()
            opt.step()
            return loss.detach(), extra

        fn = dualflow.compile(step, fallback="error") if compiled else step
        dualflow.random.seed(11)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # Dropout2d's 2-D input warning
            outs = [fn(*[dualflow.tensor(b) for b in batch]) for batch in batches]
        state = [v.numpy().copy() for v in model.state_dict().values()]
        results.append((outs, state, fn))
    (eager, eager_state, _), (outs, state, fn) = results
    for i, (got, want) in enumerate(zip(outs, eager)):
        assert_same(got, want, **tol(np.float32), msg=f"step {i}")
    assert_same(state, eager_state, **tol(np.float32), msg="final state")
    check_all_traces(fn)
    assert fn.stats().plan_runs == STEPS - 2  # the first trace creates the Adam state
    return fn


def test_image_model_with_padding_prelu_and_dropout2d() -> None:
    make = _twin(
        lambda: nn.Sequential(
            nn.ReflectionPad2d(1),
            nn.Conv2d(2, 3, 3),
            nn.PReLU(3),
            nn.ReplicationPad2d((0, 1, 1, 0)),
            nn.CircularPad2d(1),
            nn.ZeroPad2d(1),
            nn.ConstantPad2d((1, 0, 0, 1), 0.5),
            nn.Flatten(),
            nn.Linear(3 * 11 * 11, 6),
            nn.Dropout2d(0.3),  # a 2-D input: elementwise, as PyTorch
            nn.PReLU(),
            nn.Linear(6, 3),
        )
    )
    rng = np.random.default_rng(0)
    batches = [
        (rng.normal(size=(4, 2, 5, 5)).astype(np.float32), rng.integers(0, 3, 4))
        for _ in range(STEPS)
    ]

    def loss_of(model: nn.Module, x: Any, t: Any) -> Any:
        return F.cross_entropy(model(x), t), ()

    fn = _run_both(make, loss_of, batches)
    updated = {v.name for v, _ in fn.history[0].graph.updates}
    assert "rng_state" in updated  # the dropout masks advance the generator inside the graph


class _BagAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(20, 8, mode="sum")
        self.bag_max = nn.EmbeddingBag(20, 8, mode="max", padding_idx=0)
        self.proj = nn.Linear(8, 24)
        self.head = nn.Linear(8, 5)

    def forward(self, ids: Any, offsets: Any, weights: Any) -> Any:
        h = self.bag(ids, offsets, per_sample_weights=weights)  # (4, 8)
        h = h + self.bag_max(ids.reshape(4, 3))
        q, k, v = self.proj(h).reshape(1, 4, 24).chunk(3, dim=-1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=0.2)
        angle = dualflow.atan2(a, h.reshape(1, 4, 8) + 2.0).tan()
        return self.head(angle[0] + dualflow.outer(h[:, 0], h[0]).diag().reshape(4, 1))


def test_text_model_with_embedding_bag_attention_and_sampling() -> None:
    make = _twin(_BagAttention)
    rng = np.random.default_rng(1)
    offsets = np.array([0, 3, 5, 9], np.int64)
    batches = [
        (
            rng.integers(0, 20, 12).astype(np.int64),
            offsets,
            rng.uniform(0.5, 1.5, 12).astype(np.float32),
            rng.integers(0, 5, 4),
        )
        for _ in range(STEPS)
    ]

    def loss_of(model: nn.Module, ids: Any, offsets: Any, weights: Any, t: Any) -> Any:
        logits = model(ids, offsets, weights)
        order = dualflow.randperm(4)  # shuffle the batch inside the step
        drawn = dualflow.multinomial(logits.detach().softmax(-1), 2, replacement=True)
        noise = dualflow.zeros(4, 5).random_(0, 3)
        shuffled = logits.index_select(0, order) + noise * 0.01
        loss = F.cross_entropy(shuffled, t.index_select(0, order))
        return loss, (order, drawn, noise)

    _run_both(make, loss_of, batches)


def test_set_grad_enabled_inside_a_compiled_step() -> None:
    results = []
    for compiled in (False, True):
        w = nn.Parameter(np.array([1.0, 2.0, 3.0], np.float32))

        def step(x: Any, w: Any = w) -> Any:
            with dualflow.set_grad_enabled(False):
                frozen = x * w  # no tape: no gradient through this term
            loss = (x * w + frozen).square().sum()
            w.grad = None
            loss.backward()
            return loss.detach(), frozen.requires_grad

        fn = dualflow.compile(step, fallback="error") if compiled else step
        outs = [fn(dualflow.tensor(np.full(3, i + 1.0, np.float32))) for i in range(3)]
        results.append((outs, w.grad.numpy().copy()))
        assert dualflow.is_grad_enabled()
    (eager, eager_grad), (outs, grad) = results
    assert_same(outs, eager, msg="outputs")
    np.testing.assert_array_equal(grad, eager_grad)
    np.testing.assert_array_equal(grad, 2 * (2 * 3.0 * np.array([1.0, 2.0, 3.0])) * 3.0)
