"""numpy functions on Tensors (issue 19): ``np.sum(t)`` used to fail with a TypeError about
``out=``; now every numpy function computes on the values (NEP 18), and inside a compiled function
it fails closed with a TracingError naming the function and the user's line."""

from __future__ import annotations

import os

import numpy as np
import pytest

import dualflow
from dualflow.errors import TracingError

HERE = os.path.abspath(__file__)


def test_numpy_functions_compute_on_the_values() -> None:
    t = dualflow.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    assert np.sum(t) == 10.0 and isinstance(np.sum(t), np.floating)
    np.testing.assert_array_equal(np.mean(t, axis=0), [2.0, 3.0])
    assert np.max(t) == 4.0 and np.argmax(t) == 3
    np.testing.assert_array_equal(np.transpose(t), [[1.0, 3.0], [2.0, 4.0]])
    assert np.concatenate([t, t]).shape == (4, 2) and np.allclose(t, t.numpy())
    assert (np.shape(t), np.ndim(t), np.size(t), np.size(t, 1)) == ((2, 2), 2, 4, 2)
    assert t.sum().requires_grad  # the Tensor method stays differentiable


def test_out_into_a_tensor_is_refused() -> None:
    with pytest.raises(TypeError, match=r"np.sum\(\.\.\., out=<Tensor>\)"):
        np.sum(dualflow.tensor([1.0, 2.0]), out=dualflow.tensor(0.0))


def _uses_numpy(x):
    return x * np.sum(x)


def test_numpy_function_inside_a_compiled_function_fails_closed_naming_it() -> None:
    fn = dualflow.compile(_uses_numpy, fallback="error")
    with pytest.raises(TracingError) as info:
        fn(dualflow.tensor([1.0, 2.0]))
    message = str(info.value)
    assert message.startswith("np.sum() (dualflow.ops.sum would stay in the graph) of a tensor")
    assert message.endswith(f"at {HERE}:{_uses_numpy.__code__.co_firstlineno + 1}")


def test_shape_queries_inside_a_compiled_function_read_no_values() -> None:
    fn = dualflow.compile(lambda x: x * np.shape(x)[0], fallback="error")
    for _ in range(2):
        assert fn(dualflow.tensor([1.0, 2.0])).tolist() == [2.0, 4.0]
    assert fn.stats().plan_runs == 1
