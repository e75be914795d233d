"""``unique`` and tensor-count ``repeat_interleave`` inside compiled functions: their output
shape depends on the data, so the trace fails closed (a warning naming the op) and every call
gives the eager result, never a shape baked in from an earlier call."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow


def _compiled_calls(fn, inputs):
    compiled = dualflow.compile(fn)
    with pytest.warns(RuntimeWarning, match="output shape depends on the values"):
        results = [compiled(x) for x in inputs]
    return results, compiled


def test_unique_in_compiled_function_runs_eagerly() -> None:
    def fn(x):
        values, counts = (x * 2).unique(return_counts=True)
        return values.float().sum() + counts.sum()

    inputs = [dualflow.tensor([1, 1, 2]), dualflow.tensor([1, 2, 3, 4]), dualflow.tensor([5, 5])]
    results, compiled = _compiled_calls(fn, inputs)
    for x, got in zip(inputs, results):
        assert got.item() == fn(x).item()
    assert compiled.stats().plan_runs == 0


def test_repeat_interleave_tensor_counts_in_compiled_function_runs_eagerly() -> None:
    def fn(x, r):
        return x.repeat_interleave(r).sum() * x.repeat_interleave(r).shape[0]

    x = dualflow.tensor([1.0, 2.0, 3.0])
    counts = [dualflow.tensor([1, 0, 2]), dualflow.tensor([3, 3, 3])]
    compiled = dualflow.compile(fn)
    with pytest.warns(RuntimeWarning, match="repeat_interleave with tensor repeats"):
        got = [compiled(x, r).item() for r in counts]
    assert got == [fn(x, r).item() for r in counts] == [21.0, 162.0]


def test_unique_matches_numpy_on_random_data() -> None:
    rng = np.random.default_rng(0)
    data = rng.integers(0, 6, (5, 7))
    values, inverse, counts = dualflow.tensor(data).unique(return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(values.numpy()[inverse.numpy()], data)
    np.testing.assert_array_equal(counts.numpy(), np.unique(data, return_counts=True)[1])
