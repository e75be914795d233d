"""The numba pooling kernels (kernels/pool/pool_kernels.py): every kernel bit-equal to the numpy
window loops of ops/pooling.py (the oracle) over drawn geometries with ties, NaN, -inf and signed
zeros, float32/float64, mixed and non-contiguous inputs; the fixed-geometry kernels equal the
generic ones; results do not depend on the thread split; and a compiled CNN step with max and
average pooling is bit-equal to eager."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualflow import nn, ops
from dualflow.kernels.pool import pool_kernels
from dualflow.ops import pooling
from tests.kernels.sgd_steps import assert_compiled_equals_eager

KERNELS = ("max_pool2d", "max_pool2d_grad", "max_pool2d_gather", "avg_pool2d", "avg_pool2d_grad")


def _oracle(name: str, *args, **geometry):
    """The op's numpy window loop (the path taken before the kernels, and for other dtypes)."""
    saved = pooling._kernels
    pooling._kernels = lambda *_: None
    try:
        op = {
            "max_pool2d": pooling.MaxPool2d,
            "max_pool2d_grad": pooling.MaxPool2dGrad,
            "max_pool2d_gather": pooling.MaxPool2dGather,
            "avg_pool2d": pooling.AvgPool2d,
            "avg_pool2d_grad": pooling.AvgPool2dGrad,
        }[name]
        if name == "avg_pool2d_grad":
            return op.forward(np, args[0], shape=args[1], **geometry)
        return op.forward(np, *args, **geometry)
    finally:
        pooling._kernels = saved


def _inputs(rng, shape, geometry, dtypes, strided):
    """x with many ties, NaN, -inf and -0.0; gy (pooled shape) and g (x's shape) to go with it."""
    x = rng.integers(-2, 3, shape).astype(dtypes[0])
    for value, share in ((np.nan, 0.04), (-np.inf, 0.06), (-0.0, 0.15)):
        x[rng.random(shape) < share] = value
    y = _oracle("max_pool2d", x, **geometry)
    gy = rng.standard_normal(y.shape).astype(dtypes[1])
    gy[rng.random(gy.shape) < 0.1] = -0.0
    g = rng.standard_normal(shape).astype(dtypes[1])
    if strided:  # the same values in non-contiguous arrays (a transposed copy, transposed back)
        x, gy, g = (
            np.ascontiguousarray(a.transpose(1, 0, 3, 2)).transpose(1, 0, 3, 2) for a in (x, gy, g)
        )
    return x, gy, g


def _check_all(x, gy, g, geometry) -> None:
    shape = tuple(x.shape[2:])
    cases = {
        "max_pool2d": (x,),
        "max_pool2d_grad": (x, gy),
        "max_pool2d_gather": (x, g),
        "avg_pool2d": (x,),
        "avg_pool2d_grad": (gy, shape),
    }
    for name, args in cases.items():
        want = _oracle(name, *args, **geometry)
        got = getattr(pool_kernels, name)(*args, *geometry.values())
        assert got.dtype == want.dtype and got.shape == want.shape, name
        assert got.tobytes() == want.tobytes(), f"{name} {geometry} {x.dtype} {gy.dtype}"


@st.composite
def _cases(draw):
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    geometry = {
        "ksize": (kh, kw),
        "stride": (draw(st.integers(1, 3)), draw(st.integers(1, 3))),
        "pad": (draw(st.integers(0, kh // 2)), draw(st.integers(0, kw // 2))),
    }
    pad = geometry["pad"]
    h = draw(st.integers(max(1, kh - 2 * pad[0]), 9))
    w = draw(st.integers(max(1, kw - 2 * pad[1]), 9))
    shape = (draw(st.integers(1, 3)), draw(st.integers(1, 3)), h, w)
    dtypes = draw(st.sampled_from([(np.float32,) * 2, (np.float64,) * 2, (np.float64, np.float32)]))
    return shape, geometry, dtypes, draw(st.booleans()), draw(st.integers(0, 2**31))


@settings(max_examples=60, deadline=None)
@given(_cases())
def test_kernels_are_bit_equal_to_the_numpy_window_loops(case) -> None:
    """Overlapping and disjoint windows, padding, ties, NaN, -inf, -0.0, both dtypes, views."""
    shape, geometry, dtypes, strided, seed = case
    x, gy, g = _inputs(np.random.default_rng(seed), shape, geometry, dtypes, strided)
    _check_all(x, gy, g, geometry)


FIXED = [
    {"ksize": (2, 2), "stride": (2, 2), "pad": (0, 0)},  # the CNN's pool
    {"ksize": (3, 3), "stride": (2, 2), "pad": (1, 1)},  # ResNet's stem pool: overlapping
]


@pytest.mark.parametrize("geometry", FIXED)
def test_fixed_geometry_kernels_equal_the_oracle(geometry, monkeypatch) -> None:
    """The kernels compiled with the window and stride as constants (big images) round alike."""
    monkeypatch.setattr(pool_kernels, "FIXED_MIN", 0)
    for seed, shape in enumerate([(2, 3, 9, 8), (1, 2, 8, 9)]):
        x, gy, g = _inputs(np.random.default_rng(seed), shape, geometry, (np.float32,) * 2, False)
        _check_all(x, gy, g, geometry)


def test_results_do_not_depend_on_the_thread_split(monkeypatch) -> None:
    rng = np.random.default_rng(5)
    geometry = {"ksize": (3, 2), "stride": (1, 2), "pad": (1, 1)}
    x, gy, g = _inputs(rng, (3, 5, 9, 7), geometry, (np.float32,) * 2, False)
    args = {"max_pool2d": (x,), "max_pool2d_grad": (x, gy), "max_pool2d_gather": (x, g)}
    args |= {"avg_pool2d": (x,), "avg_pool2d_grad": (gy, (9, 7))}
    results = {}
    for parts in (1, 2, 4):
        monkeypatch.setattr(pool_kernels, "parts_for", lambda work, minimum, parts=parts: parts)
        results[parts] = [getattr(pool_kernels, n)(*args[n], *geometry.values()) for n in KERNELS]
    for parts in (2, 4):
        for name, a, b in zip(KERNELS, results[1], results[parts]):
            assert a.tobytes() == b.tobytes(), (name, parts)


def test_ops_use_the_kernels_only_where_they_apply() -> None:
    """numpy float32/float64 only: float16 keeps the numpy loops (and their results)."""
    assert pool_kernels.covers(np.zeros((1, 1, 2, 2), np.float32), np.zeros((1, 1, 1, 1)))
    assert not pool_kernels.covers(np.zeros((1, 1, 2, 2), np.float16))
    x = np.arange(16.0, dtype=np.float16).reshape(1, 1, 4, 4)
    assert pooling._kernels(np, x) is None
    assert pooling._kernels(np, x.astype(np.float32)) is pool_kernels
    y = ops.avg_pool2d(x, 3, 1, 1).numpy()
    assert y.dtype == np.float16
    assert (
        y.tobytes() == _oracle("avg_pool2d", x, ksize=(3, 3), stride=(1, 1), pad=(1, 1)).tobytes()
    )


def test_machine_code_goes_to_the_signed_kernels_store(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DUALFLOW_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(pool_kernels, "_KERNELS", {})  # build (and attach) the kernel again
    x = np.ones((1, 1, 4, 4), np.float32)
    assert pool_kernels.max_pool2d(x, (2, 2), (2, 2), (0, 0)).tolist() == [
        [[[1.0, 1.0], [1.0, 1.0]]]
    ]
    assert list((tmp_path / "kernels" / "__pycache__").glob("k_poolmaxpoolany*.nbc"))


def test_compiled_cnn_step_with_max_and_avg_pooling_is_bit_equal_to_eager() -> None:
    """Max pooling (disjoint and overlapping windows), average pooling with padding, forward and
    gradients, in one training step at O0 and at the default passes."""

    def model():
        return nn.Sequential(
            nn.Conv2d(3, 6, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(6, 6, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(3, stride=2, padding=1),
            nn.AvgPool2d(3, stride=1, padding=1),
            nn.Flatten(),
        )

    assert_compiled_equals_eager(model, (4, 3, 12, 12), ("O0", "O2"))
