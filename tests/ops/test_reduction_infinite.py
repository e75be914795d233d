"""logsumexp over slices holding infinities matches PyTorch, eagerly and compiled: all ``-inf``
gives ``-inf`` (it gave NaN), ``+inf`` gives ``+inf``, and the gradient is PyTorch's
``exp(x - logsumexp(x))`` (NaN exactly where PyTorch's is)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualflow
from dualflow import ops


def _inputs() -> np.ndarray:
    x = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    x[0] = -np.inf
    x[1, 0] = -np.inf
    x[2, 1] = np.inf
    return x


@pytest.mark.parametrize("compiled", [False, True])
def test_logsumexp_of_infinities_is_pytorchs(compiled: bool) -> None:
    x = dualflow.tensor(_inputs(), requires_grad=True)
    fn = (
        (lambda t: ops.logsumexp(t, 1))
        if not compiled
        else dualflow.compile(lambda t: ops.logsumexp(t, 1))
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's log(0) and inf - inf notes
        out = fn(x)
        out.sum().backward()
    got = out.numpy()
    assert got[0] == -np.inf and got[2] == np.inf
    finite = np.log(np.sum(np.exp(_inputs()[[1, 3]].astype(np.float64)), axis=1))
    np.testing.assert_allclose(got[[1, 3]], finite, rtol=1e-6)
    with np.errstate(invalid="ignore"):
        want = np.exp(_inputs() - got[:, None])  # torch's LogsumexpBackward
    np.testing.assert_array_equal(np.isnan(x.grad.numpy()), np.isnan(want))
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-6)
