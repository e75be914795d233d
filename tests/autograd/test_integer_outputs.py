"""Integer and bool results have no gradient (issue 19), as in PyTorch: backward through an int
cast gave gradient 1. Eager and compiled agree."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import ops


def _through_int(x):
    return (ops.cast(x, "int64") * 2).sum()


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_backward_through_an_int_cast_is_refused(compiled: bool) -> None:
    fn = dualflow.compile(_through_int) if compiled else _through_int
    for _ in range(2):  # compiled: trace, then plan
        x = dualflow.tensor([1.5, 2.5], requires_grad=True)
        out = fn(x)
        assert out.item() == 6 and not out.requires_grad
        with pytest.raises(RuntimeError, match="does not require grad"):
            out.backward()
        assert x.grad is None  # no gradient 1


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_float_paths_keep_their_gradient_next_to_an_int_cast(compiled: bool) -> None:
    def fn(x):
        return (ops.cast(ops.cast(x, "int32"), "float32") + x * x).sum()

    fn = dualflow.compile(fn) if compiled else fn
    for _ in range(2):
        x = dualflow.tensor([1.5, 2.5], requires_grad=True)
        fn(x).backward()
        assert x.grad.tolist() == [3.0, 5.0]  # 2x only: the cast path contributes nothing


def test_integer_outputs_never_require_grad() -> None:
    x = dualflow.tensor(np.array([[1.0, 5.0], [3.0, 2.0]], np.float32), requires_grad=True)
    values, indices = x.max(dim=1)
    assert values.requires_grad and not indices.requires_grad
    assert not x.long().requires_grad and not (x > 1).requires_grad
    assert not ops.argmax(x).requires_grad
    values.sum().backward()
    assert x.grad.tolist() == [[0.0, 1.0], [1.0, 0.0]]
