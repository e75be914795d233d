"""embedding_grad's scatter-add on numpy (``kernels/linalg/scatter_rows``: one numba loop) has
``np.add.at``'s bits for any ids, repeats, dtypes and row shapes (signed zeros and NaN included),
and the dtypes it does not take (float16) go through ``add.at`` itself."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dualflow import ops


@settings(max_examples=80, deadline=None)
@given(
    num=st.integers(1, 12),
    count=st.integers(0, 40),
    rest=st.sampled_from([(), (3,), (2, 3)]),
    dtype=st.sampled_from(["float32", "float64", "float16"]),
    special=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_embedding_grad_has_add_ats_bits(num, count, rest, dtype, special, seed) -> None:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, num, count)
    rows = (rng.standard_normal((count, *rest)) * 1e3).astype(dtype)
    if special and count:
        rows.reshape(count, -1)[:, 0] = rng.choice([-0.0, 0.0, np.nan, np.inf], count)
    want = np.zeros((num, *rest), dtype)
    np.add.at(want, ids, rows)
    got = ops.embedding_grad(rows, ids, num).numpy()
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


def test_many_repeats_of_one_id_have_add_ats_bits() -> None:
    ids = np.zeros(64, np.int64)  # one padding id everywhere: a long chain of adds to one row
    gy = np.random.default_rng(0).standard_normal((ids.size, 4)).astype(np.float32)
    want = np.zeros((2, 4), np.float32)
    np.add.at(want, ids, gy)
    np.testing.assert_array_equal(ops.embedding_grad(gy, ids, 2).numpy(), want)
