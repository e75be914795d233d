"""Raw-field reads and writes from user code inside a compiled function are seen (fail closed)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualflow as df
from dualflow.tensor.core import Tensor


def _calls(fn, values):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [fn(df.tensor(np.full((2, 2), v, np.float32))).numpy() for v in values]
    return results, [str(w.message) for w in caught]


def test_reading_raw_array_inside_a_compiled_function_is_not_baked_in() -> None:
    def f(x):  # the first call's sum would be baked into the graph as a constant
        return x * float(x.raw_array.sum())

    compiled, messages = _calls(df.compile(f), [1.0, 2.0, 3.0])
    eager, _ = _calls(f, [1.0, 2.0, 3.0])
    for got, want in zip(compiled, eager):
        np.testing.assert_array_equal(got, want)
    assert any("reading .raw_array" in m for m in messages)


def test_raw_grad_and_writes_are_seen_too() -> None:
    w = df.tensor(np.ones(2, np.float32), requires_grad=True)

    def reads_grad(x):
        (x * w).sum().backward()
        return x + float(w.raw_grad.raw_array.sum())

    g = df.compile(reads_grad, fallback="error")
    with pytest.raises(df.errors.TracingError, match=r"reading \.raw_grad"):
        g(df.ones(2))
    assert w.raw_grad is None  # the failed trace left the parameter untouched

    def writes(x):
        y = x * 2
        y.raw_array = np.zeros(2, np.float32)
        return y

    h = df.compile(writes, fallback="error")
    with pytest.raises(df.errors.TracingError, match=r"writing \.raw_array"):
        h(df.ones(2))


def test_the_slots_are_restored_after_a_trace_even_when_it_raises() -> None:
    def bad(x):
        raise ValueError("user error")

    with pytest.raises(ValueError):
        df.compile(bad)(df.ones(2))
    assert type(Tensor.__dict__["raw_array"]).__name__ == "member_descriptor"
    assert type(Tensor.__dict__["raw_grad"]).__name__ == "member_descriptor"


def test_a_tape_node_s_saved_arrays_are_watched_too() -> None:
    w = df.tensor(np.ones(2, np.float32), requires_grad=True)

    def f(x):
        y = x * w
        return y + float(np.sum(y.creator.saved_inputs[0]))

    g = df.compile(f, fallback="error")
    with pytest.raises(df.errors.TracingError, match="saved_inputs"):
        g(df.ones(2))
