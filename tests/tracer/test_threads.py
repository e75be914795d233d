"""Several threads calling one compiled function get their own results: calls are serialized per
compiled function (a plan's buffers serve one call at a time), also on the first call and for the
backward of its outputs (issue 13, hole 9)."""

from __future__ import annotations

import threading

import numpy as np

import dualflow
from dualflow import ops


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
