"""The composites of ``tensor/methods/ported.py`` that no PyTorch reference can check (random
draws, grad mode, device flags) and their refusals; values against PyTorch are in
``tests/compat/test_ported_compat.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow.errors import ShapeError


def test_multinomial_with_replacement_follows_the_weights() -> None:
    dualflow.random.seed(0)
    weights = dualflow.tensor([[1.0, 0.0, 3.0], [0.0, 2.0, 2.0]])
    draws = dualflow.multinomial(weights, 4000, replacement=True).numpy()
    assert draws.shape == (2, 4000) and draws.dtype == np.int64
    share = [(draws[0] == c).mean() for c in range(3)]
    assert share[1] == 0.0 and abs(share[0] - 0.25) < 0.03  # zero weight: never drawn
    assert (draws[1] != 0).all() and abs((draws[1] == 1).mean() - 0.5) < 0.04


def test_multinomial_without_replacement_draws_distinct_categories() -> None:
    dualflow.random.seed(1)
    x = dualflow.rand(5, 6) + 0.1
    draws = x.multinomial(6).numpy()
    assert all(sorted(row) == list(range(6)) for row in draws.tolist())
    first = [dualflow.tensor([0.9, 0.1]).multinomial(1).item() for _ in range(400)]
    assert abs(np.mean(first) - 0.1) < 0.05  # the first pick follows the weights


def test_multinomial_refusals_and_generator() -> None:
    with pytest.raises(ShapeError, match="cannot draw 4 samples from 3"):
        dualflow.multinomial(dualflow.ones(3), 4)
    with pytest.raises(ShapeError, match="1-D or 2-D float"):
        dualflow.multinomial(dualflow.ones(2, 2, 2), 1)
    a = dualflow.multinomial(dualflow.ones(9), 5, generator=dualflow.random.Generator(3))
    b = dualflow.multinomial(dualflow.ones(9), 5, generator=dualflow.random.Generator(3))
    assert a.tolist() == b.tolist()


def test_randperm_is_a_permutation_and_seeded() -> None:
    dualflow.random.seed(4)
    p = dualflow.randperm(50)
    assert sorted(p.tolist()) == list(range(50)) and p.dtype == np.int64
    dualflow.random.seed(4)
    assert dualflow.randperm(50).tolist() == p.tolist()
    assert dualflow.randperm(3, dtype=dualflow.int32).dtype == np.int32
    assert dualflow.randperm(0).shape == (0,)


def test_random_fills_integers_in_range() -> None:
    dualflow.random.seed(2)
    x = dualflow.zeros(2000)
    assert x.random_(5) is x
    values = x.numpy()
    assert set(values.tolist()) == {0.0, 1.0, 2.0, 3.0, 4.0}
    assert set(dualflow.zeros(500, dtype=dualflow.long).random_(-2, 1).tolist()) == {-2, -1, 0}
    assert set(dualflow.zeros(200, dtype=dualflow.long).random_(to=2).tolist()) == {0, 1}
    big = dualflow.zeros(100).random_().numpy()
    assert big.max() > 2**20 and big.max() <= 2**24 and (big == np.round(big)).all()
    with pytest.raises(ValueError, match="'from' < 'to'"):
        dualflow.zeros(2).random_(3, 3)


def test_set_grad_enabled_as_call_context_and_decorator() -> None:
    x = dualflow.tensor([1.0], requires_grad=True)
    with dualflow.set_grad_enabled(False):
        assert not dualflow.is_grad_enabled() and not (x * 2).requires_grad
    assert dualflow.is_grad_enabled()
    dualflow.set_grad_enabled(False)
    try:
        assert not dualflow.is_grad_enabled()
    finally:
        dualflow.set_grad_enabled(True)

    @dualflow.set_grad_enabled(False)
    def double(t):
        return t * 2

    assert dualflow.is_grad_enabled()  # decorating changes nothing outside the calls
    assert not double(x).requires_grad and (x * 2).requires_grad


def test_device_flags_and_eye() -> None:
    x = dualflow.ones(2)
    assert (x.is_xpu, x.is_mps, x.is_meta, x.is_cuda) == (False, False, False, False)
    np.testing.assert_array_equal(dualflow.eye(3, 2).numpy(), np.eye(3, 2, dtype=np.float32))
    assert dualflow.eye(2, dtype=dualflow.long).dtype == np.int64
    assert dualflow.eye(2, requires_grad=True).requires_grad


def test_select_and_diag_refusals_name_the_problem() -> None:
    x = dualflow.ones(2, 3)
    with pytest.raises(IndexError, match="index 3 out of range"):
        x.select(1, 3)
    with pytest.raises(IndexError, match="dim 2 out of range"):
        x.select(2, 0)
    with pytest.raises(ShapeError, match="1-D or 2-D"):
        dualflow.ones(1, 1, 1).diag()
