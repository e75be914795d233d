"""Eager elementwise ops on ``cuda:0`` run one cached ``cupy.ElementwiseKernel`` each: every op
(float32/float64/int32/int64, broadcasting, weak and strong scalar operands) against numpy with
numpy's dtypes, the kernel cache's hits and misses, special values, the float16 fallback, and
creation ops with ``device=``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import Device, ops
from dualflow.kernels.cuda import cuda_elementwise
from dualflow.kernels.cuda.cuda_elementwise import cache_info
from dualflow.ops import OPS
from tests.kernels.elementwise_cases import FLOATS, INTS, cases, sample

pytestmark = pytest.mark.gpu
TOLERANCE = {"float32": (1e-5, 1e-6), "float64": (1e-12, 1e-14)}


def _inputs(kinds: tuple, rng: np.random.Generator) -> list[Any]:
    # the last array operand is a row, so every binary op broadcasts (3, 4) against (4,)
    shapes = [(3, 4)] * (len(kinds) - 1) + [(4,)]
    return [sample(k, s, rng) for k, s in zip(kinds, shapes)]


def _compare(got: Any, want: np.ndarray, where: str) -> None:
    host = got.get()
    assert host.dtype == want.dtype and host.shape == want.shape, where
    if want.dtype.kind == "f":
        rtol, atol = TOLERANCE[want.dtype.name]
        np.testing.assert_allclose(host, want, rtol=rtol, atol=atol, err_msg=where)
    else:
        np.testing.assert_array_equal(host, want, err_msg=where)


@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_every_elementwise_op_matches_numpy(cupy: Any, dtype: str) -> None:
    rng = np.random.default_rng(3)
    fallbacks = cache_info()[2]
    for case in cases(dtype):
        op = OPS[case.name]
        host = _inputs(case.kinds, rng)
        device = [cupy.asarray(a) if isinstance(a, np.ndarray) else a for a in host]
        with np.errstate(all="ignore"):
            want = np.asarray(op.forward(np, *host, **case.attrs))
        got = op.forward(cupy, *device, **case.attrs)
        assert isinstance(got, cupy.ndarray), case.id
        _compare(got, want, case.id)
    assert cache_info()[2] == fallbacks  # every case ran its kernel, none the cupy ufuncs


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (np.arange(4, dtype=np.int32), 0.5),  # int array, weak float: float64
        (np.ones(4, np.float32), np.float64(0.25)),  # strong numpy scalar: float64
        (np.ones(4, np.float32), np.ones((), np.float64)),  # 0-d array: strong too
        (np.ones(4, np.uint8), 3),  # weak int keeps uint8
    ],
    ids=["int-weakfloat", "f32-npf64", "f32-0d-f64", "u8-weakint"],
)
def test_scalar_operands_promote_like_numpy(cupy: Any, a: np.ndarray, b: Any) -> None:
    device_b = cupy.asarray(b) if isinstance(b, np.ndarray) else b
    for name in ("add", "multiply", "maximum"):
        got = OPS[name].forward(cupy, cupy.asarray(a), device_b)
        _compare(got, np.asarray(OPS[name].forward(np, a, b)), name)


def test_kernel_cache_counts_hits_and_misses(cupy: Any) -> None:
    cuda_elementwise.clear()
    x = cupy.arange(8, dtype=cupy.float32)
    ops.multiply(x, 0.5)
    ops.multiply(x, 0.25)  # same input types: the same kernel
    assert cache_info() == (1, 1, 0, 1)
    ops.multiply(x.astype(cupy.float64), 0.5)
    ops.multiply(x, np.float64(0.5))
    assert cache_info() == (1, 3, 0, 3)
    for _ in range(3):
        ops.multiply(x, 2.0)
    assert cache_info() == (4, 3, 0, 3)


def test_special_values_follow_numpy(cupy: Any) -> None:
    values = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, 1.0], np.float32)
    other = np.array([1.0, 0.0, -0.0, np.nan, 2.0, 1.0], np.float32)
    x, y = cupy.asarray(values), cupy.asarray(other)
    for name in ("maximum", "minimum", "add", "greater"):
        got, want = OPS[name].forward(cupy, x, y).get(), OPS[name].forward(np, values, other)
        np.testing.assert_array_equal(got, want, err_msg=name)
    got, want = OPS["abs"].forward(cupy, x).get(), np.abs(values)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_float16_runs_the_cupy_ufuncs(cupy: Any) -> None:
    cuda_elementwise.clear()
    x = cupy.linspace(-1, 1, 16, dtype=cupy.float16)
    got = ops.tanh(ops.multiply(x, 2.0))
    assert got.dtype == np.float16 and cache_info()[2] == 2  # both ops fell back
    want = np.tanh(np.linspace(-1, 1, 16, dtype=np.float16) * 2.0)
    np.testing.assert_allclose(got.numpy(), want, rtol=2e-3, atol=2e-3)


def test_tensors_on_cuda_use_the_kernels_forward_and_backward(cupy: Any) -> None:
    data = np.linspace(-2, 2, 24, dtype=np.float32).reshape(4, 6)
    results = {}
    for device in ("cpu", "cuda:0"):
        x = dualflow.tensor(data, device=device, requires_grad=True)
        y = (ops.gelu(x) * 2.0 + ops.leaky_relu(x, 0.1)).sum()
        (gx,) = dualflow.grad(y, [x])
        assert gx.device == Device(device)
        results[device] = (y.numpy(), gx.numpy())
    for got, want in zip(results["cuda:0"], results["cpu"]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert cache_info()[3] > 0


def test_creation_ops_on_cuda(cupy: Any) -> None:
    z = ops.zeros((2, 3), device="cuda:0")
    assert z.device == Device("cuda:0") and z.numpy().tolist() == [[0.0] * 3] * 2
    r = ops.arange(5, dtype="int32", device="cuda:0")
    assert isinstance(r.array, cupy.ndarray) and r.numpy().tolist() == [0, 1, 2, 3, 4]
    like = ops.full_like(np.ones(2), 7.0, device="cuda:0")
    assert like.device == Device("cuda:0") and like.numpy().tolist() == [7.0, 7.0]
