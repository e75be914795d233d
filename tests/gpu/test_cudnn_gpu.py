"""cuDNN paths on ``cuda:0``: conv2d, its data gradient (conv_transpose2d) and weight gradient,
max/avg pooling, avg pooling's gradient and training batch norm, each against the im2col/xp
path on the same GPU (cuDNN switched off) and against the CPU; the float32 TF32 policy; double
backward through conv checked by finite differences. Skipped where cupy has no cuDNN (CuPy ≥ 14).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import ops
from dualflow.gradcheck import check_backward, check_double_backward
from dualflow.kernels.cuda import cudnn
from dualflow.ops import OPS
from dualflow.ops.dispatch import apply

pytestmark = pytest.mark.gpu
STRICT = {"float64": (1e-10, 1e-12), "float32": (2e-5, 2e-5), "float16": (2e-2, 2e-2)}
GEOMETRIES = [  # x shape, w shape, stride, pad, dilation, groups
    ((2, 3, 9, 9), (4, 3, 3, 3), 1, 1, 1, 1),
    ((2, 4, 10, 8), (6, 2, 3, 2), 2, (1, 0), 1, 2),
    ((1, 2, 11, 11), (2, 1, 3, 3), (2, 1), 2, 2, 2),
    ((3, 3, 7, 7), (5, 3, 1, 1), 1, 0, 1, 1),
]


@pytest.fixture(autouse=True)
def _needs_cudnn(cupy: Any) -> None:
    if not cudnn.available():
        pytest.skip(f"cupy {cupy.__version__} has no cuDNN bindings (removed in CuPy 14)")


def _host(values: Any) -> list[np.ndarray]:
    values = values if isinstance(values, tuple | list) else (values,)
    return [v.numpy().astype(np.float64) for v in values]


def _three_ways(
    monkeypatch: pytest.MonkeyPatch, op: str, fn: Callable, arrays: list[np.ndarray]
) -> tuple[list, list, list]:
    """``fn`` on the GPU with cuDNN (checked to be called), on the GPU without, on the CPU
    (float16 inputs in float64 there: numpy's float16 sums would be the least exact of all)."""
    import cupy

    device = [cupy.asarray(a) for a in arrays]
    before = cudnn.CALLS[op]
    fast = _host(fn(*device))
    assert cudnn.CALLS[op] == before + 1, f"{op} did not run in cuDNN"
    monkeypatch.setattr(cudnn, "ENABLED", False)
    slow = _host(fn(*device))
    monkeypatch.setattr(cudnn, "ENABLED", True)
    assert cudnn.CALLS[op] == before + 1
    exact = [a.astype(np.float64) if a.dtype == np.float16 else a for a in arrays]
    return fast, slow, _host(fn(*exact))


def _check(results: tuple[list, list, list], dtype: str) -> None:
    """Each output within the dtype's tolerance, absolute part relative to its magnitude (sums
    in another order differ by rounding relative to the largest terms, not to each result)."""
    rtol, atol = STRICT[dtype]
    fast, slow, cpu = results
    for f, s, c in zip(fast, slow, cpu):
        bound = atol * max(1.0, float(np.abs(c).max()))
        np.testing.assert_allclose(f, s, rtol=rtol, atol=bound, err_msg="vs im2col")
        np.testing.assert_allclose(f, c, rtol=rtol, atol=bound, err_msg="vs cpu")


def _conv_case(geometry: tuple, dtype: str) -> tuple[list[np.ndarray], dict, dict]:
    xs, ws, stride, pad, dilation, groups = geometry
    rng = np.random.default_rng(7)
    x, w = (rng.standard_normal(s).astype(dtype) for s in (xs, ws))
    attrs = {"stride": stride, "pad": pad, "dilation": dilation, "groups": groups}
    y = ops.conv2d(x, w, **attrs).numpy()
    gy = rng.standard_normal(y.shape).astype(dtype)
    s, p, d = ((v, v) if isinstance(v, int) else v for v in (stride, pad, dilation))
    padding = tuple(
        xs[2 + k] + 2 * p[k] - d[k] * (ws[2 + k] - 1) - 1 - s[k] * (y.shape[2 + k] - 1)
        for k in range(2)
    )
    return [x, w, gy], attrs, {"output_padding": padding}


@pytest.mark.parametrize("dtype", ["float64", "float16"])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=[f"g{i}" for i in range(len(GEOMETRIES))])
def test_conv_and_its_gradients(monkeypatch: pytest.MonkeyPatch, geometry: tuple, dtype: str):
    (x, w, gy), attrs, extra = _conv_case(geometry, dtype)
    forward = _three_ways(monkeypatch, "conv2d", lambda a, b: ops.conv2d(a, b, **attrs), [x, w])
    _check(forward, dtype)
    data = lambda g, b: ops.conv_transpose2d(g, b, **attrs, **extra)  # noqa: E731
    _check(_three_ways(monkeypatch, "conv_transpose2d", data, [gy, w]), dtype)
    weight = lambda a, g: ops.conv2d_grad_weight(a, g, w.shape[2:], **attrs)  # noqa: E731
    _check(_three_ways(monkeypatch, "conv2d_grad_weight", weight, [x, gy]), dtype)


def test_float32_conv_follows_the_tf32_policy(cupy: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where cuDNN's default math may be TF32 (compute capability ≥ 8.0), float32 convs stay
    on im2col unless TF32 is accepted; accepted, they agree to TF32's precision."""
    (x, w, _), attrs, _ = _conv_case(GEOMETRIES[0], "float32")
    dx, dw = cupy.asarray(x), cupy.asarray(w)
    tf32 = int(cupy.cuda.Device().compute_capability) >= 80
    exact = not tf32 or os.environ.get("NVIDIA_TF32_OVERRIDE") == "0"
    before = cudnn.CALLS["conv2d"]
    strict = ops.conv2d(dx, dw, **attrs).numpy()
    assert cudnn.CALLS["conv2d"] == before + exact
    want = ops.conv2d(x, w, **attrs).numpy()
    np.testing.assert_allclose(strict, want, rtol=2e-5, atol=2e-5 * np.abs(want).max())
    monkeypatch.setattr(cudnn, "ALLOW_TF32", True)
    loose = ops.conv2d(dx, dw, **attrs).numpy()
    assert cudnn.CALLS["conv2d"] == before + exact + 1
    np.testing.assert_allclose(loose, want, rtol=1e-2, atol=1e-2 * np.abs(want).max())


def test_weight_gradient_is_deterministic(cupy: Any) -> None:
    (x, _, gy), attrs, _ = _conv_case(GEOMETRIES[1], "float64")
    dx, dgy = cupy.asarray(x), cupy.asarray(gy)
    runs = [ops.conv2d_grad_weight(dx, dgy, (3, 2), **attrs).numpy() for _ in range(3)]
    assert all(np.array_equal(runs[0], r) for r in runs[1:])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("ksize", "stride", "pad"), [(2, 2, 0), (3, 2, 1), ((3, 2), 1, (1, 0))])
def test_pooling(monkeypatch: pytest.MonkeyPatch, dtype: str, ksize: Any, stride: Any, pad: Any):
    x = np.random.default_rng(8).standard_normal((2, 3, 9, 8)).astype(dtype)
    geometry = {"ksize": ksize, "stride": stride, "pad": pad}
    maxed = _three_ways(monkeypatch, "max_pool2d", lambda a: ops.max_pool2d(a, **geometry), [x])
    _check(maxed, dtype)
    avg = _three_ways(monkeypatch, "avg_pool2d", lambda a: ops.avg_pool2d(a, **geometry), [x])
    _check(avg, dtype)
    gy = np.random.default_rng(9).standard_normal(avg[2][0].shape).astype(dtype)
    grad = lambda g: ops.avg_pool2d_grad(g, (9, 8), **geometry)  # noqa: E731
    _check(_three_ways(monkeypatch, "avg_pool2d_grad", grad, [gy]), dtype)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("shape", [(16, 5), (4, 3, 5, 6)], ids=["NC", "NCHW"])
def test_batch_norm(monkeypatch: pytest.MonkeyPatch, dtype: str, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(10)
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    gamma, beta = (rng.standard_normal(shape[1]).astype(dtype) for _ in range(2))
    fn = lambda a, g, b: apply(OPS["batch_norm"], a, g, b, eps=1e-5)  # noqa: E731
    results = _three_ways(monkeypatch, "batch_norm", fn, [x, gamma, beta])
    _check(results, dtype)
    assert [r.shape for r in results[0]] == [shape, shape[1:2], shape[1:2]]


def test_compiled_step_uses_cudnn(cupy: Any) -> None:
    (x, w, _), attrs, _ = _conv_case(GEOMETRIES[0], "float64")
    step = dualflow.compile(lambda a, b: ops.max_pool2d(ops.conv2d(a, b, **attrs), 2))
    dx, dw = (dualflow.tensor(v, device="cuda:0") for v in (x, w))
    before = cudnn.CALLS["conv2d"]
    got = [step(dx, dw).numpy() for _ in range(2)]
    assert cudnn.CALLS["conv2d"] >= before + 2
    want = ops.max_pool2d(ops.conv2d(x, w, **attrs), 2).numpy()
    for g in got:
        np.testing.assert_allclose(g, want, rtol=1e-10, atol=1e-12)


def test_double_backward_through_conv_on_gpu() -> None:
    """Finite differences (float64, on the host) of conv on the GPU: first and second order,
    so conv_transpose2d and conv2d_grad_weight run in cuDNN inside the gradients."""
    rng = np.random.default_rng(11)
    x, w = rng.standard_normal((1, 2, 5, 5)), rng.standard_normal((2, 2, 3, 3))

    def conv_on_gpu(a: Any, b: Any) -> Any:
        y = ops.conv2d(a.to_device("cuda:0"), b.to_device("cuda:0"), stride=2, pad=1)
        return ops.tanh(y).to_device("cpu")  # tanh: a nonzero second derivative

    before = (cudnn.CALLS["conv_transpose2d"], cudnn.CALLS["conv2d_grad_weight"])
    check_backward(conv_on_gpu, [x, w])
    check_double_backward(conv_on_gpu, [x, w])
    after = (cudnn.CALLS["conv_transpose2d"], cudnn.CALLS["conv2d_grad_weight"])
    assert after[0] > before[0] and after[1] > before[1]
