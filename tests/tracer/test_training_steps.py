"""Whole training steps (forward, backward, optimizer, running stats, dropout) compiled vs eager:
after five steps parameters, optimizer state and buffers equal the eager run's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import nn, ops, optim
from dualflow.nn import Parameter
from tests.tracer.helpers import assert_same, check_all_traces, tol

STEPS = 5
DTYPES = pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
OPTIMIZERS: dict[str, Callable[[list], Any]] = {
    "sgd": lambda ps: optim.SGD(ps, lr=0.1),
    "momentum": lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=1e-3),
    "nesterov": lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True),
    "adam": lambda ps: optim.Adam(ps, lr=0.01),
}


def _batches(dtype: Any, shape: tuple[int, ...], classes: int) -> list[tuple[Any, Any]]:
    rng = np.random.default_rng(42)
    return [
        (rng.normal(size=shape).astype(dtype), rng.integers(0, classes, size=shape[0]))
        for _ in range(STEPS)
    ]


def _optimizer_state(opt: Any) -> list[np.ndarray]:
    return [
        t.raw_array.copy()
        for group in opt.param_groups
        for p in group["params"]
        for _, t in sorted(opt.state.get(p, {}).items())
    ]


def run_both(
    build: Callable[[], tuple[Callable, Callable[[], list]]],
    batches: list,
    dtype: Any,
    warmup: int = 0,
    seed: int | None = None,
) -> Any:
    """Run ``build()``'s step eagerly and compiled on the same batches; compare every loss and the
    final state. The first ``warmup`` compiled-side steps run eagerly. Returns the compiled fn."""
    results = []
    for compiled_side in (False, True):
        step, state = build()
        fn = dualflow.compile(step, fallback="error") if compiled_side else step
        if seed is not None:
            dualflow.random.seed(seed)
        losses = [
            (step if i < warmup else fn)(dualflow.tensor(x), dualflow.tensor(t))
            for i, (x, t) in enumerate(batches)
        ]
        results.append((losses, state(), fn))
    (eager_losses, eager_state, _), (losses, state_after, fn) = results
    for i, (got, want) in enumerate(zip(losses, eager_losses)):
        assert_same(got, want, **tol(dtype), msg=f"loss of step {i}")
    assert len(state_after) == len(eager_state)
    assert_same(state_after, eager_state, **tol(dtype), msg="final state")
    check_all_traces(fn)
    return fn


def _mlp(dtype: Any, make_opt: Callable, clip: float | None = None) -> tuple[Callable, Callable]:
    rng = np.random.default_rng(0)
    shapes = [(8, 4), (8,), (3, 8), (3,)]
    params = [Parameter((rng.normal(size=s) * 0.5).astype(dtype)) for s in shapes]
    opt = make_opt(params)
    w1, b1, w2, b2 = params

    def step(x: Any, t: Any) -> Any:
        opt.zero_grad()
        h = ops.relu(ops.linear(x, w1, b1))
        loss = ops.softmax_cross_entropy(ops.linear(h, w2, b2), t)
        loss.backward()
        if clip is not None:
            optim.clip_grad_norm(params, clip)
        opt.step()
        return loss.detach()

    return step, lambda: [p.raw_array.copy() for p in params] + _optimizer_state(opt)


@DTYPES
@pytest.mark.parametrize("name", ["sgd", "momentum", "nesterov", "adam"])
def test_mlp_after_one_eager_step(name: str, dtype: Any) -> None:
    """Optimizer state exists before the first compiled call: every compiled step is a plan."""
    batches = _batches(dtype, (6, 4), 3)
    fn = run_both(lambda: _mlp(dtype, OPTIMIZERS[name]), batches, dtype, warmup=1)
    assert fn.stats().plan_runs == STEPS - 2 and fn.stats().traces == 1


@DTYPES
@pytest.mark.parametrize("name", ["sgd", "momentum", "nesterov", "adam"])
def test_mlp_compiled_from_the_first_step(name: str, dtype: Any) -> None:
    batches = _batches(dtype, (6, 4), 3)
    fn = run_both(lambda: _mlp(dtype, OPTIMIZERS[name]), batches, dtype)
    # the first call may be single-use (optimizer state is born in it); the rest run plans
    assert fn.stats().plan_runs >= STEPS - 2, fn.stats()
    assert fn.stats().eager_fallbacks == 0


@DTYPES
def test_mlp_with_gradient_clipping(dtype: Any) -> None:
    batches = _batches(dtype, (6, 4), 3)
    fn = run_both(lambda: _mlp(dtype, OPTIMIZERS["sgd"], clip=0.1), batches, dtype)
    assert fn.stats().plan_runs == STEPS - 1


def _cnn(dtype: Any) -> tuple[Callable, Callable]:
    rng = np.random.default_rng(1)
    shapes = [(3, 2, 3, 3), (3,), (3,), (3,), (4, 3), (4,)]
    params = [Parameter((rng.normal(size=s) * 0.5).astype(dtype)) for s in shapes]
    running = [dualflow.tensor(np.zeros(3, dtype)), dualflow.tensor(np.ones(3, dtype))]
    opt = optim.SGD(params, lr=0.1)
    w, b, gamma, beta, w2, b2 = params

    def step(x: Any, t: Any) -> Any:
        opt.zero_grad()
        h = ops.conv2d(x, w, b, pad=1)
        h = ops.batch_norm(h, gamma, beta, running[0], running[1], train=True)
        h = ops.dropout(ops.relu(h), 0.3, train=True)
        logits = ops.linear(ops.global_avg_pool2d(h), w2, b2)
        loss = ops.softmax_cross_entropy(logits, t)
        loss.backward()
        opt.step()
        return loss.detach()

    return step, lambda: [t.raw_array.copy() for t in (*params, *running)]


@DTYPES
def test_cnn_with_batch_norm_and_dropout(dtype: Any) -> None:
    batches = _batches(dtype, (4, 2, 5, 5), 4)
    fn = run_both(lambda: _cnn(dtype), batches, dtype, seed=7)
    assert fn.stats().plan_runs == STEPS - 1
    (trace,) = fn.history
    updated = {v.name for v, _ in trace.graph.updates}
    assert "rng_state" in updated, updated  # the dropout generator advances in the graph
    assert len(trace.graph.updates) == 6 + 2 + 1  # params, running stats, RNG


def _module_step(model: Any, make_opt: Callable) -> Callable:
    opt = make_opt(list(model.params()))

    def step(x: Any, t: Any) -> Any:
        opt.zero_grad()
        loss = ops.softmax_cross_entropy(model(x), t)
        loss.backward()
        opt.step()
        return loss.detach()

    return step, opt


def _twin(make_model: Callable) -> Callable:
    """A builder that returns identical fresh models (same initial state) at every call."""
    reference = make_model()

    def build() -> Any:
        model = make_model()
        model.load_state_dict({k: v.raw_array for k, v in reference.state_dict().items()})
        return model

    return build


def test_cnn_modules_with_momentum() -> None:
    make = _twin(
        lambda: nn.Sequential(
            nn.Conv2d(2, 3, 3, padding=1),
            nn.BatchNorm2d(3),
            nn.ReLU(),
            nn.Dropout(0.25),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(3, 4),
        )
    )

    def build() -> tuple[Callable, Callable]:
        model = make()
        step, opt = _module_step(model, OPTIMIZERS["momentum"])
        state = [t for _, t in model.state_dict().items()]
        return step, lambda: [t.raw_array.copy() for t in state] + _optimizer_state(opt)

    run_both(build, _batches(np.float32, (4, 2, 5, 5), 4), np.float32, warmup=1, seed=3)


def test_lstm_module_with_adam() -> None:
    lstm_make = _twin(lambda: nn.LSTM(3, 5))
    head_make = _twin(lambda: nn.Linear(5, 2))

    def build() -> tuple[Callable, Callable]:
        lstm, head = lstm_make(), head_make()
        opt = OPTIMIZERS["adam"]([*lstm.params(), *head.params()])

        def step(x: Any, t: Any) -> Any:
            opt.zero_grad()
            out, _ = lstm(x)
            loss = ops.softmax_cross_entropy(head(out[-1]), t)
            loss.backward()
            opt.step()
            return loss.detach()

        tensors = [*lstm.params(), *head.params()]
        return step, lambda: [t.raw_array.copy() for t in tensors] + _optimizer_state(opt)

    batches = [(x.reshape(4, 2, 3), t[:2]) for x, t in _batches(np.float32, (8, 3), 2)]
    run_both(build, batches, np.float32, warmup=1)


def test_compiled_forward_with_eager_backward_and_step() -> None:
    """``compiled_model(x)`` returns tensors connected to autograd (its backward is a plan)."""
    make = _twin(lambda: nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)))
    results = []
    for compiled_side in (False, True):
        model = make()
        opt = OPTIMIZERS["momentum"](list(model.params()))
        forward = dualflow.compile(model, fallback="error") if compiled_side else model
        losses = []
        for x, t in _batches(np.float32, (6, 4), 3):
            opt.zero_grad()
            loss = ops.softmax_cross_entropy(forward(dualflow.tensor(x)), dualflow.tensor(t))
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        results.append((losses, [p.raw_array.copy() for p in model.params()]))
    assert_same(results[1], results[0], **tol(np.float32))
    assert forward.stats().plan_runs == STEPS - 1
