"""embedding_grad's scatter-add on numpy: one vectorized add per repeat rank, with ``np.add.at``'s
bits for any ids, repeats, dtypes and row shapes (signed zeros and NaN included)."""

from __future__ import annotations

import sys

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dualflow import ops
from dualflow.ops.embedding import MAX_REPEATS, _add_rows

# the module (``dualflow.ops.embedding`` the attribute is the function of that name)
embedding_module = sys.modules["dualflow.ops.embedding"]


@settings(max_examples=80, deadline=None)
@given(
    num=st.integers(1, 12),
    count=st.integers(0, 40),
    rest=st.sampled_from([(), (3,), (2, 3)]),
    dtype=st.sampled_from(["float32", "float64", "float16"]),
    special=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_the_ranked_adds_have_add_ats_bits(num, count, rest, dtype, special, seed) -> None:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, num, count)
    rows = (rng.standard_normal((count, *rest)) * 1e3).astype(dtype)
    if special and count:
        rows.reshape(count, -1)[:, 0] = rng.choice([-0.0, 0.0, np.nan, np.inf], count)
    want = np.zeros((num, *rest), dtype)
    np.add.at(want, ids, rows)
    got = np.zeros((num, *rest), dtype)
    took = _add_rows(got, ids, rows)
    assert took == (count == 0 or np.bincount(ids).max() <= MAX_REPEATS)
    if took:  # the same bits, -0.0 and NaN payloads included
        np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


def test_many_repeats_of_one_id_fall_back_to_add_at_with_the_same_result(monkeypatch) -> None:
    ids = np.zeros(3 * MAX_REPEATS, np.int64)  # one padding id everywhere
    gy = np.random.default_rng(0).standard_normal((ids.size, 4)).astype(np.float32)
    want = np.zeros((2, 4), np.float32)
    np.add.at(want, ids, gy)
    assert not _add_rows(np.zeros((2, 4), np.float32), ids, gy)
    np.testing.assert_array_equal(ops.embedding_grad(gy, ids, 2).numpy(), want)
    monkeypatch.setattr(embedding_module, "MAX_REPEATS", ids.size)  # the ranked route, too
    np.testing.assert_array_equal(ops.embedding_grad(gy, ids, 2).numpy(), want)
