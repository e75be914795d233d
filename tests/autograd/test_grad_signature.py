"""``autograd.grad`` accepts PyTorch's keyword arguments: ``only_inputs`` (ignored, as PyTorch)
and ``materialize_grads`` (zeros for unused inputs)."""

from __future__ import annotations

import pytest

import dualflow


def test_only_inputs_and_materialize_grads() -> None:
    x = dualflow.tensor(2.0, requires_grad=True)
    y = dualflow.tensor(1.0, requires_grad=True)
    (gx,) = dualflow.autograd.grad(x * x, x, only_inputs=True)
    assert gx.item() == 4.0
    gx, gy = dualflow.autograd.grad(x * x, [x, y], materialize_grads=True)
    assert (gx.item(), gy.item()) == (4.0, 0.0)
    with pytest.raises(ValueError, match="allow_unused"):
        dualflow.autograd.grad(x * x, [x, y])
