"""Ops that state ``aliasing="fresh"`` without being elementwise (convolutions, batch norm, max
pooling) return memory of their own on every kernel route: on that word the memory planner
frees their inputs after their last reader (remat relies on it)."""

from __future__ import annotations

import numpy as np
import pytest

from dualflow.ops.registry import OPS

RNG = np.random.default_rng(0)
GEOMETRY = {"stride": (1, 1), "pad": (1, 1), "dilation": (1, 1), "groups": 1}


def _x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


CASES = [
    ("conv2d", (_x(2, 4, 8, 8), _x(6, 4, 3, 3)), GEOMETRY),  # Winograd or columns
    ("conv2d", (_x(2, 2, 8, 8), _x(6, 2, 3, 3)), GEOMETRY),  # few channels: first-layer route
    ("conv2d", (_x(2, 4, 8, 8), _x(6, 4, 1, 1)), {**GEOMETRY, "pad": (0, 0)}),  # pointwise
    ("conv2d", (_x(2, 4, 8, 8), _x(6, 2, 3, 3)), {**GEOMETRY, "groups": 2, "stride": (2, 2)}),
    ("conv2d", (_x(1, 16, 2, 2), _x(64, 16, 3, 3)), GEOMETRY),  # more filters than pixels
    (
        "conv_transpose2d",
        (_x(2, 6, 8, 8), _x(6, 4, 3, 3)),
        {**GEOMETRY, "output_padding": (0, 0)},
    ),
    (
        "conv_transpose2d",
        (_x(2, 6, 4, 4), _x(6, 4, 1, 1)),
        {**GEOMETRY, "pad": (0, 0), "stride": (2, 2), "output_padding": (1, 1)},
    ),
    ("conv2d_grad_weight", (_x(2, 4, 8, 8), _x(2, 6, 8, 8)), {**GEOMETRY, "ksize": (3, 3)}),
    (
        "conv2d_grad_weight",
        (_x(2, 4, 8, 8), _x(2, 6, 8, 8)),
        {**GEOMETRY, "ksize": (1, 1), "pad": (0, 0)},
    ),
    ("batch_norm", (_x(4, 3, 5, 5), _x(3), _x(3)), {"eps": 1e-5}),
    ("max_pool2d", (_x(2, 3, 8, 8),), {"ksize": (2, 2), "stride": (2, 2), "pad": (0, 0)}),
    ("max_pool2d", (_x(2, 3, 8, 8),), {"ksize": (1, 1), "stride": (1, 1), "pad": (0, 0)}),
]


@pytest.mark.parametrize("name,args,attrs", CASES, ids=[c[0] for c in CASES])
def test_fresh_ops_share_no_memory_with_their_inputs(name: str, args: tuple, attrs: dict) -> None:
    op = OPS[name]
    assert op.aliasing == "fresh"
    outputs = op.forward(np, *args, **attrs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    for out in outputs:
        for arg in args:
            assert not np.shares_memory(out, arg), f"{name} returned memory of an input"
