"""``F.adaptive_avg_pool1d``: PyTorch's bins (as ``nn.AdaptiveAvgPool1d``), compiled equal to eager
at every length with ``compile(dynamic=True)``, and typed errors. (Against PyTorch:
tests/compat/pyops_cases.py.)"""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
import dualflow.nn.functional as F
from dualflow.errors import ShapeError


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_matches_the_layer_and_numpy_bins(size: int) -> None:
    x = np.random.default_rng(size).normal(size=(2, 3, 7))
    got = F.adaptive_avg_pool1d(dualflow.tensor(x), size).numpy()
    np.testing.assert_allclose(got, dualflow.nn.AdaptiveAvgPool1d(size)(x).numpy(), rtol=1e-12)
    for i in range(size):
        start, stop = (i * 7) // size, -(-((i + 1) * 7) // size)
        np.testing.assert_allclose(got[..., i], x[..., start:stop].mean(-1), rtol=1e-12)


@pytest.mark.parametrize("dynamic", [False, True])
def test_compiled_equals_eager_at_every_length(dynamic: bool) -> None:
    def pool(x):
        return F.adaptive_avg_pool1d(x, 4) * 2, F.adaptive_avg_pool1d(x[0], 1)

    fn = dualflow.compile(pool, dynamic=dynamic)
    for length in (8, 12, 9, 16, 8):
        x = dualflow.tensor(np.arange(2 * 3 * length, dtype=np.float32).reshape(2, 3, length))
        for got, want in zip(fn(x), pool(x)):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert fn.stats().eager_fallbacks == 0


def test_bad_inputs_raise_typed_errors() -> None:
    with pytest.raises(ShapeError, match=r"adaptive_avg_pool1d: input must be \(N, C, L\)"):
        F.adaptive_avg_pool1d(dualflow.zeros(2, 3, 4, 5), 2)
    with pytest.raises(ValueError, match="output_size must be a positive int"):
        F.adaptive_avg_pool1d(dualflow.zeros(2, 3, 4), 0)
