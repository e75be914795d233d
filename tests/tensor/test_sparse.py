"""Sparse COO tensors beyond the PyTorch table (``tests/compat/apiops_cases.py``): the values'
gradient as a sparse ``.grad``, compiled ``to_dense``/``mm`` with the indices as an argument,
and the data-dependent conversions failing closed inside compiled functions."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow

INDICES = np.array([[0, 1, 1], [2, 0, 0]])


def test_grad_is_sparse_with_the_same_indices() -> None:
    s = dualflow.sparse_coo_tensor(INDICES, [1.0, 2.0, 3.0], (2, 3), requires_grad=True)
    (s.to_dense() * dualflow.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])).sum().backward()
    assert s.grad.is_sparse and s.grad._indices() is s._indices()
    assert s.grad._values().tolist() == [3.0, 4.0, 4.0]


def test_compiled_spmm_with_changing_indices_and_values() -> None:
    @dualflow.compile
    def f(indices, values, dense):
        return dualflow.sparse.mm(dualflow.sparse_coo_tensor(indices, values, (2, 3)), dense)

    rng = np.random.default_rng(0)
    for _ in range(3):
        indices = np.stack([rng.integers(0, 2, 3), rng.integers(0, 3, 3)])
        values, dense = rng.standard_normal(3), rng.standard_normal((3, 2))
        want = np.zeros((2, 3))
        np.add.at(want, tuple(indices), values)
        got = f(dualflow.tensor(indices), dualflow.tensor(values), dualflow.tensor(dense))
        np.testing.assert_allclose(got.numpy(), want @ dense, rtol=1e-12)
    assert f.stats().plan_runs == 2


def test_coalesce_and_to_sparse_fail_closed_when_compiled() -> None:
    @dualflow.compile
    def f(x):
        return x.to_sparse().coalesce()._values().sum()

    x = dualflow.tensor([[0.0, 2.0], [3.0, 0.0]])
    with pytest.warns(RuntimeWarning, match="to_sparse"):
        assert f(x).item() == 5.0
    assert f.stats().plan_runs == 0


def test_bad_shapes_are_shape_errors() -> None:
    with pytest.raises(dualflow.errors.ShapeError, match=r"\(ndim, nnz\)"):
        dualflow.sparse_coo_tensor([0, 1], [1.0, 2.0], (2,))
    with pytest.raises(dualflow.errors.ShapeError, match="2 dimensions"):
        dualflow.sparse_coo_tensor(INDICES, [1.0, 2.0, 3.0], (2, 3, 4))


def test_compiled_function_takes_and_returns_sparse_tensors() -> None:
    @dualflow.compile
    def f(s, scale):
        return s * scale + s

    for value in (1.0, 4.0, -2.0):
        s = dualflow.sparse_coo_tensor(INDICES, [value, 2.0, 3.0], (2, 3))
        out = f(s, 3.0)
        assert out.is_sparse and out._values().tolist() == [4 * value, 8.0, 12.0]
    assert f.stats().plan_runs == 2
