"""Several threads calling one compiled function get their own results: calls are serialized per
compiled function (a plan's buffers serve one call at a time), also on the first call and for the
backward of its outputs (issue 13, hole 9). A trace in progress is seen only by the thread that
runs it: another thread's eager code never reports to it (issue 17, one interpreter slot)."""

from __future__ import annotations

import threading

import numpy as np

import dualflow
from dualflow import ops
from dualflow.ops.dispatch import tracing


def _hammer(fn, inputs, rounds: int = 30) -> dict[int, list]:
    results: dict[int, list] = {i: [] for i in range(len(inputs))}
    barrier = threading.Barrier(len(inputs))

    def work(i: int) -> None:
        barrier.wait()  # all threads race on the first call too
        for _ in range(rounds):
            results[i].append(fn(inputs[i]).numpy().copy())

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_concurrent_calls_get_their_own_buffers() -> None:
    def f(x):
        h = ops.tanh(x) * 2.0 + ops.sin(x)
        return (h * h).sum(axis=1) + x.mean()

    compiled = dualflow.compile(f)
    rng = np.random.default_rng(0)
    inputs = [dualflow.tensor(rng.normal(size=(64, 128)).astype(np.float32)) for _ in range(4)]
    results = _hammer(compiled, inputs)
    for i, x in enumerate(inputs):
        expected = f(x).numpy()
        for got in results[i]:
            np.testing.assert_array_equal(got, expected)
    assert compiled.stats().traces == 1


def test_concurrent_backward_through_compiled_outputs() -> None:
    w = dualflow.tensor(np.linspace(-1, 1, 32, dtype=np.float32), requires_grad=True)
    model = dualflow.compile(lambda x: ops.tanh(x * w).sum())
    rng = np.random.default_rng(1)
    xs = [dualflow.tensor(rng.normal(size=32).astype(np.float32)) for _ in range(4)]
    expected = {i: dualflow.grad(ops.tanh(x * w).sum(), w)[0].numpy() for i, x in enumerate(xs)}

    def grad_of(x):
        return dualflow.grad(model(x), w)[0]

    results = _hammer(grad_of, xs, rounds=20)
    for i in results:
        for got in results[i]:
            np.testing.assert_allclose(got, expected[i], rtol=1e-6)


def _eager_work() -> list:
    """Eager code touching every tracer hook: new tensors, .grad, .item(), module attributes."""
    seen = [tracing()]
    w = dualflow.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (w * w).sum().backward()
    made = dualflow.tensor(np.arange(3.0, dtype=np.float32))
    layer = dualflow.nn.Linear(3, 2)
    layer.scale = 2.0  # fails closed inside a trace (raises, with fallback="error")
    w.grad = w.grad * layer.scale
    total = float((made * w).sum().item())
    return [seen, w.grad.numpy().copy(), made.numpy().copy(), total, layer(made).shape]


def test_eager_thread_beside_a_trace_is_not_traced() -> None:
    inside, release = threading.Event(), threading.Event()

    def step(x):
        y = ops.tanh(x) * 2.0
        inside.set()
        release.wait(60)  # thread B runs while this trace is in progress
        return (y * x).sum()

    compiled = dualflow.compile(step, fallback="error")
    x = dualflow.tensor(np.linspace(-1, 1, 8, dtype=np.float32))
    expected_b = _eager_work()
    traced: list = []
    a = threading.Thread(target=lambda: traced.append(compiled(x).numpy().copy()))
    a.start()
    try:
        assert inside.wait(60)
        got_b = _eager_work()  # thread B (this one), while A is blocked inside its trace
    finally:
        release.set()
        a.join(60)
    assert got_b[0] == [None]  # A's trace is not this thread's
    for got, want in zip(got_b[1:], expected_b[1:]):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(traced[0], step(x).numpy())
    np.testing.assert_array_equal(compiled(x).numpy(), step(x).numpy())
    stats = compiled.stats()
    assert (stats.traces, stats.plan_runs, stats.guard_failures) == (1, 1, 0)
    assert stats.eager_fallbacks == 0
