"""Complex tensors beyond the PyTorch table (``tests/compat/apiops_cases.py``): random
elementwise programs against numpy's complex arithmetic, and the dtype/shape errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dualflow


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**16), st.sampled_from(["float32", "float64"]))
def test_arithmetic_matches_numpy(seed: int, dtype: str) -> None:
    rng = np.random.default_rng(seed)
    a, b, c, d = (rng.standard_normal(4).astype(dtype) for _ in range(4))
    z, w = (
        dualflow.complex(dualflow.tensor(a), dualflow.tensor(b)),
        dualflow.view_as_complex(dualflow.tensor(np.stack([c, d], -1))),
    )
    nz, nw = a + 1j * b, c + 1j * d
    cases = [
        (z * w - z / w + 2 * z.conj(), nz * nw - nz / nw + 2 * np.conj(nz)),
        (z.exp() + 1.5, np.exp(nz) + 1.5),
        (1 / z - dualflow.tensor(c) * w, 1 / nz - c * nw),
    ]
    tol = 1e-4 if dtype == "float32" else 1e-10
    for got, want in cases:
        assert got.dtype == np.dtype("complex64" if dtype == "float32" else "complex128")
        np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol)
    np.testing.assert_allclose(z.angle().numpy(), np.angle(nz), rtol=tol, atol=tol)
    np.testing.assert_allclose(w.abs().numpy(), np.abs(nw), rtol=tol, atol=tol)


def test_errors_name_the_function() -> None:
    with pytest.raises(dualflow.errors.ShapeError, match="last dimension of size 2"):
        dualflow.view_as_complex(dualflow.ones(3, 3))
    with pytest.raises(dualflow.errors.DTypeError, match="float32 or float64"):
        dualflow.view_as_complex(dualflow.tensor([[1, 2]]))
    with pytest.raises(dualflow.errors.DTypeError, match="complex tensors"):
        dualflow.view_as_real(dualflow.ones(2))
    assert not dualflow.ones(2).is_complex()
    assert dualflow.is_complex(dualflow.polar(dualflow.ones(2), dualflow.zeros(2)))


def test_compiled_function_takes_and_returns_complex_tensors() -> None:
    @dualflow.compile
    def f(z, x):
        return z * x, dualflow.view_as_real(z.conj())

    for value in (1.0, 5.0, -3.0):
        z = dualflow.view_as_complex(dualflow.tensor([[value, 2.0]]))
        product, real = f(z, dualflow.tensor([3.0]))
        assert product.numpy().tolist() == [complex(3 * value, 6.0)]
        assert real.tolist() == [[value, -2.0]]
    assert f.stats().plan_runs == 2
