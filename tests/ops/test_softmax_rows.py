"""Softmax's numpy form (dtypes the row kernels do not take: float16) split by rows over the
kernel threads: the same bits as the one-call form for any shape, dtype, thread count and
special values; float32 and float64 take the row kernels (tests/kernels/test_softmax_rows_cpu.py);
compiled still equals eager."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dualflow
from dualflow.background.process import using_threads
from dualflow.ops.softmax import Softmax, _split_rows

softmax_module = sys.modules["dualflow.ops.softmax"]  # the attribute is the function


def _one_call(x: np.ndarray) -> np.ndarray:
    e = x - x.max(axis=-1, keepdims=True)
    np.exp(e, out=e)
    e /= e.sum(axis=-1, keepdims=True)
    return e


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # a worker thread's errstate is its own
@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(1, 9), min_size=2, max_size=3).map(tuple),
    dtype=st.sampled_from(["float32", "float64", "float16"]),
    parts=st.integers(2, 4),
    special=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_split_rows_have_the_one_calls_bits(shape, dtype, parts, special, seed) -> None:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 30).astype(dtype)
    if special:
        x.reshape(-1)[rng.integers(0, x.size, 3)] = rng.choice([np.inf, -np.inf, np.nan], 3)
    want, got = _one_call(x), _split_rows(x, parts)
    assert got.dtype == want.dtype and got.flags.c_contiguous
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


def test_the_forward_splits_only_a_c_ordered_last_axis(monkeypatch) -> None:
    monkeypatch.setattr(softmax_module, "PART_MIN", 1)
    calls = []
    monkeypatch.setattr(softmax_module, "_split_rows", lambda x, n: calls.append(n) or x)
    x = np.ones((4, 6), np.float16)  # float32/float64: the row kernels, never this split
    with using_threads(2):
        Softmax.forward(np, x, axis=-1)
        Softmax.forward(np, x, axis=1)
        assert calls == [2, 2]
        Softmax.forward(np, x, axis=0)  # another axis: the one call
        Softmax.forward(np, x.T, axis=-1)  # not C-ordered
        Softmax.forward(np, x[0], axis=-1)  # one row
    with using_threads(1):
        Softmax.forward(np, x, axis=-1)
    assert calls == [2, 2]


def test_an_attention_like_step_compiled_equals_eager_on_two_threads(monkeypatch) -> None:
    monkeypatch.setattr(softmax_module, "PART_MIN", 1)

    def step(q, k):
        w = dualflow.nn.functional.softmax(q @ k.transpose(1, 2), dim=-1)
        loss = (w * w).sum()
        loss.backward()
        return loss

    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((3, 5, 4)).astype(np.float32) for _ in range(2)]
    with using_threads(2):
        results = []
        for fn in (step, dualflow.compile(step)):
            for _ in range(2):
                q, k = (dualflow.tensor(a, requires_grad=True) for a in arrays)
                loss = fn(q, k)
            results.append((loss.numpy(), q.grad.numpy(), k.grad.numpy()))
    for got, want in zip(results[1], results[0], strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("threads", [1, 2])
def test_float16_softmax_matches_the_one_call_on_each_thread_count(threads, monkeypatch) -> None:
    monkeypatch.setattr(softmax_module, "PART_MIN", 1024)
    x = np.random.default_rng(1).standard_normal((300, 257)).astype(np.float16)
    with using_threads(threads):
        got = dualflow.nn.functional.softmax(dualflow.tensor(x), dim=-1).numpy()
    np.testing.assert_array_equal(got, _one_call(x))
