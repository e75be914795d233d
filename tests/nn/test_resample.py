"""``F.interpolate`` is the one resampling implementation (``nn.Upsample`` calls it): the modes
each gained from the merge (trilinear, area in F; 5-D in Upsample), its checks, gradients to
second order and compiled == eager. PyTorch agreement is in tests/compat (functional, nn)."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import nn
from dualflow.errors import DTypeError, ShapeError
from dualflow.gradcheck import check_backward, check_double_backward
from dualflow.nn import functional as F
from dualflow.nn.functional.resample import linear_matrix, nearest_index


def _trilinear_ref(x: np.ndarray, size: tuple) -> np.ndarray:
    """Separable reference: one interpolation matrix per axis, in float64."""
    for k, n_out in enumerate(size):
        matrix = linear_matrix(x.shape[2 + k], n_out, None, False)
        x = np.moveaxis(np.tensordot(matrix, x, axes=([1], [2 + k])), 0, 2 + k)
    return x


def test_trilinear_matches_the_separable_reference_and_upsample() -> None:
    x = np.random.default_rng(0).standard_normal((2, 3, 2, 3, 4))
    out = F.interpolate(dualflow.tensor(x), size=(3, 5, 6), mode="trilinear")
    np.testing.assert_allclose(out.numpy(), _trilinear_ref(x, (3, 5, 6)), rtol=1e-12)
    layer = nn.Upsample(size=(3, 5, 6), mode="trilinear")
    np.testing.assert_array_equal(layer(dualflow.tensor(x)).numpy(), out.numpy())


def test_area_is_adaptive_average_pooling() -> None:
    x = dualflow.randn(1, 2, 5, 7)
    np.testing.assert_allclose(
        F.interpolate(x, size=(2, 3), mode="area").numpy(),
        F.adaptive_avg_pool2d(x, (2, 3)).numpy(),
        rtol=1e-6,
    )
    assert nn.Upsample(size=(2, 3), mode="area")(x).shape == (1, 2, 2, 3)


def test_nearest_works_on_every_rank_and_on_integers() -> None:
    x = dualflow.tensor(np.arange(6).reshape(1, 1, 6))
    assert F.interpolate(x, size=3).tolist() == [[[0, 2, 4]]]
    assert nearest_index(6, 3, None, False).tolist() == [0, 2, 4]
    assert F.interpolate(dualflow.zeros(1, 1, 2, 2, 2), scale_factor=2).shape == (1, 1, 4, 4, 4)


@pytest.mark.parametrize(
    ("call", "error", "pattern"),
    [
        (lambda x: F.interpolate(x, size=3, mode="bicubic"), NotImplementedError, "bicubic"),
        (lambda x: F.interpolate(x, size=3, mode="trilinear"), ShapeError, "needs a 5-D input"),
        (lambda x: F.interpolate(x, size=3, scale_factor=2), ValueError, "exactly one of"),
        (lambda x: F.interpolate(x, scale_factor=-1.0), ValueError, "must be positive"),
        (lambda x: F.interpolate(x, size=0), ShapeError, "does not fit"),
        (lambda x: F.interpolate(x, size=3, align_corners=True), ValueError, "align_corners"),
        (lambda x: F.interpolate(x.long(), size=3, mode="bilinear"), DTypeError, "floating"),
    ],
)
def test_bad_calls_raise_typed_errors(call, error, pattern) -> None:
    with pytest.raises(error, match=pattern):
        call(dualflow.randn(1, 1, 2, 2))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"size": (3, 2, 5), "mode": "trilinear"},
        {"scale_factor": 1.5, "mode": "trilinear", "align_corners": True},
        {"size": (1, 2, 2), "mode": "area"},
    ],
)
def test_five_d_gradients_to_second_order(kwargs: dict) -> None:
    x = np.random.default_rng(1).standard_normal((1, 2, 2, 3, 4))
    check_backward(lambda t: F.interpolate(t, **kwargs), [x])
    check_double_backward(lambda t: F.interpolate(t, **kwargs) ** 2, [x])


def test_compiled_interpolate_equals_eager() -> None:
    def f(x):
        a = F.interpolate(x, size=(3, 5, 2), mode="trilinear")
        return a.sum() + F.interpolate(x, size=(1, 2, 3), mode="area").sum()

    compiled = dualflow.compile(f, passes="exact")
    for seed in range(3):
        x = dualflow.randn(2, 2, 2, 3, 4, generator=dualflow.random.Generator(seed))
        assert compiled(x).item() == f(x).item()
    assert compiled.stats().plan_runs == 2
