"""Dynamic shapes (issue 39): the user situations that feed a compiled function new sizes.

An MLP training step fed 12 batch sizes, an embedding classifier fed 40 sequence lengths and CNN
inference over batch 1..16 must equal eager bit for bit (``passes="exact"`` and the default
pipeline) at every call, with a trace per size as with symbolic dimensions; with them, at most
two traces (three with a batch of 1) and plans for the other calls; ``dynamic=``,
``mark_dynamic`` and ``mark_static``. Random leading dimensions between calls are drawn by
hypothesis. Shape semantics are in ``test_dynamic_shape_semantics``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dualflow
from dualflow import nn, optim
from dualflow.nn import functional as F
from tests.tracer.helpers import assert_same, tol

PASSES = ["exact", None]  # the bit-exact pipeline and the default one
Maker = Callable[[], tuple[Callable[..., Any], nn.Module]]


def _train_step(model: nn.Module, lr: float = 0.1) -> Callable[..., Any]:
    opt = optim.SGD(model.parameters(), lr=lr)

    def step(x: Any, y: Any) -> Any:
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def make_mlp() -> tuple[Callable[..., Any], nn.Module]:
    dualflow.random.seed(0)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))
    return _train_step(model), model


class _Bag(nn.Module):
    # an embedding classifier: the mean of a sequence's embeddings, then a linear layer
    def __init__(self) -> None:
        super().__init__()
        self.emb, self.out = nn.Embedding(50, 16), nn.Linear(16, 4)

    def forward(self, tokens: Any) -> Any:
        return self.out(self.emb(tokens).mean(1))


def make_bag() -> tuple[Callable[..., Any], nn.Module]:
    dualflow.random.seed(0)
    model = _Bag()
    return _train_step(model, lr=0.5), model


def make_cnn() -> tuple[Callable[..., Any], nn.Module]:
    dualflow.random.seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(4, 8, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 3),
    ).eval()

    def infer(x: Any) -> Any:
        with dualflow.no_grad():
            return model(x)

    return infer, model


_rng = np.random.default_rng(39)
MLP_SIZES = [16, 3, 32, 1, 9, 64, 5, 12, 2, 40, 7, 25]
MLP_CALLS = [
    (
        dualflow.tensor(_rng.standard_normal((b, 20), dtype=np.float32)),
        dualflow.tensor(_rng.integers(0, 5, b)),
    )
    for b in MLP_SIZES * 2  # 12 sizes, twice
]
BAG_LENGTHS = [int(n) for n in _rng.permutation(np.arange(3, 43))]  # 40 lengths, twice
BAG_CALLS = [
    (dualflow.tensor(_rng.integers(0, 50, (6, n))), dualflow.tensor(_rng.integers(0, 4, 6)))
    for n in BAG_LENGTHS * 2
]
CNN_CALLS = [
    (dualflow.tensor(_rng.standard_normal((b, 3, 8, 8), dtype=np.float32)),)
    for b in [*range(1, 17)] * 2
]
SITUATIONS = {
    "mlp": (make_mlp, MLP_CALLS),
    "bag": (make_bag, BAG_CALLS),
    "cnn": (make_cnn, CNN_CALLS),
}


def run_calls(make: Maker, calls: list[tuple], **compile_kwargs: Any) -> tuple[list, list, Any]:
    """Every call's output and the model's final state (parameters and buffers), eagerly (no
    ``compile_kwargs``) or compiled with them; and the function called."""
    fn, model = make()
    if compile_kwargs:
        fn = dualflow.compile(fn, **compile_kwargs)
    with warnings.catch_warnings():  # leaving the fast path after max_traces (today)
        warnings.filterwarnings("ignore", "dualflow.compile: ", RuntimeWarning)
        outputs = [fn(*args).numpy().copy() for args in calls]
    return outputs, [v.numpy().copy() for v in model.state_dict().values()], fn


@pytest.mark.parametrize("passes", PASSES)
@pytest.mark.parametrize("situation", list(SITUATIONS))
def test_compiled_equals_eager_bit_for_bit_at_every_size(situation: str, passes: Any) -> None:
    make, calls = SITUATIONS[situation]
    eager_outputs, eager_state, _ = run_calls(make, calls)
    # room for a trace per size: today the second round of sizes runs static plans
    outputs, state, fn = run_calls(make, calls, passes=passes, max_traces=64)
    assert_same(outputs, eager_outputs, msg="outputs")
    assert_same(state, eager_state, msg="parameters and buffers")
    stats = fn.stats()
    assert stats.calls == len(calls) and stats.plan_runs >= len(calls) // 2, stats


@pytest.mark.parametrize("situation", list(SITUATIONS))
def test_at_most_two_traces_then_plans(situation: str) -> None:
    # two traces: the first call, and the first call at other sizes (witnessed by the first);
    # a batch of 1 (mlp and cnn have one) is served too: nothing the traces decided differs there
    make, calls = SITUATIONS[situation]
    _, _, fn = run_calls(make, calls, passes="exact")
    stats = fn.stats()
    assert stats.traces <= 2 and stats.plan_runs >= len(calls) - 2, stats
    assert stats.eager_fallbacks == 0 and stats.lazy_calls == 0, stats


def _rows_mean(x: Any) -> Any:
    return (x * 2.0).sum(1) / x.shape[0]


SIZES = [3, 7, 1, 12, 5]


def _calls(sizes: list[int], width: int = 4) -> list[tuple]:
    rng = np.random.default_rng(0)
    return [(dualflow.tensor(rng.standard_normal((n, width), dtype=np.float32)),) for n in sizes]


def test_dynamic_false_retraces_every_size() -> None:
    fn = dualflow.compile(_rows_mean, dynamic=False, max_traces=16)
    outs = [fn(*args) for args in _calls(SIZES * 2)]
    assert fn.stats().traces == len(SIZES) and fn.stats().plan_runs == len(SIZES)
    assert [o.shape for o in outs] == [(n,) for n in SIZES * 2]


def test_dynamic_true_traces_once_for_every_size() -> None:
    # 3 and 7 (which witnesses the trace at 3); 1, 12 and 5 run plans (no decision of the
    # trace took the rows >= 2, so the template serves 1 too)
    fn = dualflow.compile(_rows_mean, dynamic=True)
    for (x,) in _calls(SIZES):
        assert_same(fn(x), _rows_mean(x))
    assert fn.stats().traces == 2 and fn.stats().plan_runs == len(SIZES) - 2


def test_mark_dynamic_makes_the_first_trace_symbolic() -> None:
    fn = dualflow.compile(_rows_mean)
    for (x,) in _calls(SIZES):
        dualflow.mark_dynamic(x, 0)
        assert_same(fn(x), _rows_mean(x))
    assert fn.stats().traces == 2 and fn.stats().plan_runs == len(SIZES) - 2
    (family,) = fn.dynamic.families.values()
    assert {"s0": 3} in [t.hints for t in family.templates]  # the first call's trace: symbolic


def test_mark_static_keeps_a_dimension_concrete() -> None:
    fn = dualflow.compile(_rows_mean, dynamic=True)
    for (x,) in _calls(SIZES):
        dualflow.mark_static(x, 0)
        assert_same(fn(x), _rows_mean(x))
    assert fn.stats().traces == len(SIZES) and fn.stats().plan_runs == 0


def _program(x: Any, y: Any, z: Any) -> Any:
    # x and y share their leading dimension (a broadcast relation), z has its own; shape ints
    # flow into a divisor, a reshape and an arange
    h = F.relu(x @ dualflow.ones(x.shape[1], 3) + y)
    scale = dualflow.arange(x.shape[0]).float().reshape(-1, 1) / x.shape[0]
    joined = (h * scale).reshape(-1).sum() + z.mean(0).sum() * len(z)
    return joined, (h.sum(0) / x.numel(), z.reshape(z.shape[0], -1)[:, :1] * 2)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.tuples(st.integers(1, 9), st.integers(1, 6)), min_size=2, max_size=6),
    passes=st.sampled_from(PASSES),
)
def test_random_leading_dims_between_calls_equal_eager(sizes: list, passes: Any) -> None:
    rng = np.random.default_rng(len(sizes))
    fn = dualflow.compile(_program, passes=passes)
    for n, m in sizes:
        args = [rng.standard_normal(shape, dtype=np.float32) for shape in ((n, 2), (n, 3), (m, 2))]
        want = _program(*map(dualflow.tensor, args))
        got = fn(*map(dualflow.tensor, args))
        assert_same(got, want, **({} if passes == "exact" else tol(np.float32)), msg=f"{n},{m}")
    assert fn.stats().calls == len(sizes)
