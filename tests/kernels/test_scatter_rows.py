"""``add_rows`` (embedding_grad's numba scatter-add) equals ``np.add.at`` bit for bit, repeated
ids included, and declines what it does not run."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dualflow import ops
from dualflow.kernels.linalg.scatter_rows import add_rows


@settings(max_examples=30, deadline=None)
@given(
    num=st.integers(1, 12),
    count=st.integers(0, 40),
    tail=st.sampled_from([(), (1,), (5,), (3, 4)]),
    dtype=st.sampled_from(["float32", "float64"]),
    seed=st.integers(0, 2**16),
)
def test_add_rows_equals_add_at(num: int, count: int, tail: tuple, dtype: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, num, count)  # few rows: ids repeat, sums depend on the order
    rows = rng.standard_normal((count, *tail)) * 10.0 ** rng.integers(-3, 4, (count, *tail))
    rows = rows.astype(dtype)
    expected = np.zeros((num, *tail), dtype)
    np.add.at(expected, ids, rows)
    out = np.zeros((num, *tail), dtype)
    assert add_rows(out, ids, rows)
    assert np.array_equal(out, expected)


def test_declines_other_dtypes_and_layouts() -> None:
    ids, rows = np.array([0, 1]), np.ones((2, 3), np.float16)
    assert not add_rows(np.zeros((2, 3), np.float16), ids, rows)
    assert not add_rows(np.zeros((3, 2), np.float32).T, ids, rows.astype(np.float32))
    assert not add_rows(np.zeros((2, 3)), ids, rows.astype(np.float32))  # mixed dtypes


def test_embedding_grad_op_takes_it() -> None:
    ids = np.array([[3, 1], [3, 3]], np.int32)
    gy = np.arange(12, dtype=np.float32).reshape(2, 2, 3)
    expected = np.zeros((5, 3), np.float32)
    np.add.at(expected, ids.reshape(-1), gy.reshape(4, 3))
    assert np.array_equal(ops.embedding_grad(gy, ids, 5).numpy(), expected)
