"""``nn.functional`` behaviour the PyTorch table cannot pin down: random dropout (seeded, eager
equals compiled), the unsupported options' errors, and data-dependent ``one_hot`` sizes.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow.nn import functional as F


def _drop(x):
    return F.dropout(x, 0.5), F.dropout2d(x, 0.5)


def test_dropout_trains_by_default_and_compiled_masks_equal_eager() -> None:
    x = dualflow.ops.ones((4, 6, 3, 3))
    results = []
    for fn in (_drop, dualflow.compile(_drop, fallback="error")):
        dualflow.random.seed(3)
        results.append([t.numpy() for _ in range(2) for t in fn(x)])
    for got, want in zip(*results):
        np.testing.assert_array_equal(got, want)
    plain, channels = results[0][0], results[0][1]
    assert set(np.unique(plain)) == {0.0, 2.0}  # PyTorch: training=True unless told otherwise
    per_channel = channels.reshape(4, 6, -1)
    assert np.all(per_channel.min(-1) == per_channel.max(-1))  # whole channels kept or zeroed
    assert 0 < (per_channel[..., 0] == 0).sum() < 24
    assert F.dropout2d(x, 0.5, training=False) is x


@pytest.mark.parametrize(
    ("call", "pattern"),
    [
        (lambda x: F.max_pool2d(x, 2, ceil_mode=True), "ceil_mode"),
        (lambda x: F.max_pool2d(x, 2, dilation=2), "dilation"),
        (lambda x: F.interpolate(x, scale_factor=2, mode="bicubic"), "bicubic"),
        (lambda x: F.div(x), "no attribute 'div'"),
    ],
)
def test_unsupported_options_say_so(call, pattern) -> None:
    with pytest.raises((NotImplementedError, AttributeError), match=pattern):
        call(dualflow.ops.ones((1, 1, 4, 4)))


def test_one_hot_without_num_classes_reads_the_labels_and_guards_when_compiled() -> None:
    compiled = dualflow.compile(lambda t: F.one_hot(t) * 1)
    assert compiled(dualflow.tensor([0, 2])).shape == (2, 3)
    assert compiled(dualflow.tensor([0, 4])).shape == (2, 5)  # the guard on max(t) retraces
    assert compiled(dualflow.tensor([1, 2])).tolist() == [[0, 1, 0], [0, 0, 1]]
