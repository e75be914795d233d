"""``nn.init.trunc_normal_``, ``orthogonal_``, ``dirac_``, ``eye_``, ``sparse_``: the
properties PyTorch documents (draws differ from PyTorch's stream, so no value references)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dualflow
import dualflow.nn.functional as F
from dualflow import nn
from dualflow.nn import init
from dualflow.nn.init_extra import erfinv
from dualflow.tensor.random import Generator


def _truncated_moments(mean: float, std: float, a: float, b: float) -> tuple[float, float]:
    alpha, beta = (a - mean) / std, (b - mean) / std
    pdf = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda z: (1 + math.erf(z / math.sqrt(2))) / 2  # noqa: E731
    mass = cdf(beta) - cdf(alpha)
    shift = (pdf(alpha) - pdf(beta)) / mass
    var = 1 + (alpha * pdf(alpha) - beta * pdf(beta)) / mass - shift**2
    return mean + std * shift, std * math.sqrt(var)


@pytest.mark.parametrize(
    ("mean", "std", "a", "b"), [(0, 1, -2, 2), (1, 2, 0, 3), (0, 0.02, -0.04, 0.01)]
)
def test_trunc_normal_stays_in_bounds_with_the_truncated_moments(mean, std, a, b) -> None:
    w = init.trunc_normal_(init.empty_parameter((40000,), "float64"), mean, std, a, b, Generator(0))
    values = w.numpy()
    assert values.min() >= a and values.max() <= b
    want_mean, want_std = _truncated_moments(mean, std, a, b)
    assert abs(values.mean() - want_mean) < 0.02 * std and abs(values.std() - want_std) < 0.02 * std


def test_erfinv_inverts_erf() -> None:
    x = np.linspace(-0.999999, 0.999999, 501)
    z = erfinv(dualflow.tensor(x)).numpy()
    np.testing.assert_allclose([math.erf(v) for v in z], x, atol=1e-7)


@pytest.mark.parametrize("shape", [(3, 7), (7, 3), (4, 2, 3, 3)])
def test_orthogonal_gives_orthonormal_rows_or_columns(shape) -> None:
    w = init.orthogonal_(init.empty_parameter(shape), gain=2.0, generator=Generator(1)).numpy()
    flat = w.reshape(shape[0], -1)
    gram = flat @ flat.T if flat.shape[0] <= flat.shape[1] else flat.T @ flat
    np.testing.assert_allclose(gram, 4.0 * np.eye(len(gram)), atol=1e-5)
    with pytest.raises(ValueError, match="2 or more"):
        init.orthogonal_(init.empty_parameter((3,)))


def test_dirac_conv_passes_the_input_through() -> None:
    conv = nn.Conv2d(3, 3, 3, padding=1, bias=False)
    init.dirac_(conv.weight)
    x = dualflow.randn(2, 3, 5, 5)
    np.testing.assert_allclose(conv(x).numpy(), x.numpy(), atol=1e-6)
    grouped = init.dirac_(init.empty_parameter((4, 2, 3)), groups=2).numpy()
    assert grouped.sum() == 4 and grouped[2, 0, 1] == 1 and grouped[3, 1, 1] == 1
    y = F.conv1d(dualflow.randn(1, 4, 6), dualflow.tensor(grouped), padding=1, groups=2)
    assert y.shape == (1, 4, 6)
    with pytest.raises(ValueError, match="3, 4, or 5"):
        init.dirac_(init.empty_parameter((2, 2)))


def test_eye_and_sparse() -> None:
    np.testing.assert_array_equal(init.eye_(init.empty_parameter((3, 2))).numpy(), np.eye(3, 2))
    w = init.sparse_(init.empty_parameter((20, 5)), 0.25, std=0.5, generator=Generator(2)).numpy()
    assert (w == 0).sum(axis=0).tolist() == [5] * 5
    assert 0.3 < w[w != 0].std() < 0.7
    with pytest.raises(ValueError, match="2 dimensions"):
        init.eye_(init.empty_parameter((2, 2, 2)))


def test_initializers_inside_a_compiled_function_equal_eager() -> None:
    """A compiled re-initialization (e.g. a reset inside a step) writes what the eager one
    writes; orthogonal_ needs a QR on the host array, so it stays eager-only."""

    def reset(w2, w3, w4):
        init.trunc_normal_(w2, 0.1, 0.5, -0.5, 0.6)
        init.sparse_(w3, 0.5)
        init.dirac_(w4)
        return w2.sum() + w3.sum() + init.eye_(w3).sum()

    results = []
    for compiled in (False, True):
        weights = [nn.Parameter(np.zeros(s, np.float32)) for s in ((6, 5), (4, 3), (2, 2, 3))]
        fn = dualflow.compile(reset, fallback="error") if compiled else reset
        dualflow.random.seed(5)
        totals = [fn(*weights).item() for _ in range(3)]
        results.append((totals, [w.numpy().copy() for w in weights]))
    (eager, eager_weights), (got, got_weights) = results
    np.testing.assert_allclose(got, eager, rtol=1e-6)
    for g, w in zip(got_weights, eager_weights, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
