"""Eager elementwise ops on a GPU run one cached ``cupy.ElementwiseKernel`` each; checked here
without one: every op's kernel source (float32/float64/int32/int64, weak-scalar operands too)
has numpy's result dtype and compiles with ``nvcc --ptx``; the dispatch and its cache, driven
through a stand-in device module, reuse kernels per input types; numpy never reaches them.
"""

from __future__ import annotations

import inspect
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import ops
from dualflow.errors import DeviceError
from dualflow.kernels.backend import Backend, backend_of, register_backend, xp_fused, xp_fused_sum
from dualflow.kernels.cuda import cuda_elementwise, cudnn
from dualflow.kernels.cuda.cuda_elementwise import cache_info, device_forward, eager_source
from dualflow.kernels.cuda.cuda_render import COMPILE_OPTIONS, wrap_global
from dualflow.ops import OPS
from tests.kernels.elementwise_cases import FLOATS, INTS, Case, cases, elementwise_ops, sample


def _source(case: Case) -> Any:
    op = OPS[case.name]
    return eager_source(op.name, op.expr, op.args, case.kinds, case.attrs)[0]


@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_kernel_types_follow_numpy(dtype: str) -> None:
    """The kernel's output dtype is the one eager numpy gives for the same inputs."""
    rng = np.random.default_rng(0)
    for case in cases(dtype):
        op = OPS[case.name]
        inputs = [sample(k, (3,), rng) for k in case.kinds]
        with np.errstate(all="ignore"):
            want = np.asarray(op.forward(np, *inputs, **case.attrs)).dtype
        out_dtype = _source(case).out_params.split()[0]
        assert np.dtype(out_dtype) == want, case.id


def test_weak_scalars_are_parameters_not_literals() -> None:
    """``x * 0.5`` and ``x * 0.25`` share a kernel; float32 math stays float32."""
    source = _source(Case("multiply", ("float32", float), {}))
    assert source.in_params == "float32 a0, float64 a1"
    assert "((float)a1)" in source.operation and "0.5" not in source.operation
    strong = _source(Case("multiply", ("float32", "float64"), {}))
    assert strong.out_params == "float64 out"  # a numpy float64 scalar is strong: promotes


@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_kernels_compile_with_nvcc(tmp_path: Path, dtype: str) -> None:
    """All eager kernels of one dtype in one .cu file (shared preambles guarded) take nvcc."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not installed")
    kernels = {}
    for case in cases(dtype):
        source = _source(case)
        kernels[source.name] = wrap_global(source)
    # a weak scalar is declared float64/int64, so for those dtypes its kernel is the array one
    assert len(kernels) >= len(elementwise_ops())
    path = tmp_path / f"eager_{dtype}.cu"
    path.write_text("\n".join(kernels.values()))
    out = tmp_path / "eager.ptx"
    done = subprocess.run(
        [nvcc, "--ptx", *COMPILE_OPTIONS, str(path), "-o", str(out)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert out.read_text().count(".entry") == len(kernels)


def test_integer_power_uses_the_squaring_helper() -> None:
    source = _source(Case("power", ("int32", "int32"), {}))
    assert "dualflow_ipow(" in source.operation and "#ifndef DUALFLOW_IPOW" in source.preamble
    assert _source(Case("power", ("float32", "float32"), {})).preamble == ""


def test_numpy_path_never_touches_the_kernel_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: Any) -> None:
        raise AssertionError("the numpy path built a CUDA kernel")

    monkeypatch.setattr(cuda_elementwise, "_build", fail)
    cuda_elementwise.clear()
    rng = np.random.default_rng(1)
    for case in cases("float32") + cases("int64"):
        inputs = [sample(k, (2, 3), rng) for k in case.kinds]
        with np.errstate(all="ignore"):
            OPS[case.name].forward(np, *inputs, **case.attrs)
            dualflow.ops.dispatch.apply(OPS[case.name], *inputs, **case.attrs)
    assert cache_info() == (0, 0, 0, 0)


class _DeviceArray:
    """Stands in for a cupy array: not a numpy array, has a dtype; numpy reads it (``__array__``)
    so the plain ``xp`` forward, which the stand-in module runs with numpy, works on it."""

    def __init__(self, array: np.ndarray) -> None:
        self.array, self.dtype, self.shape = array, array.dtype, array.shape

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.array


class _DeviceModule:
    """Stands in for cupy as ``xp`` (registered with a backend using the CUDA elementwise
    kernels by the ``built`` fixture; unregistered, it is an array module dualflow does not know).
    """

    __name__ = "fake_cupy"

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)


@pytest.fixture
def device() -> Any:
    """A stand-in device module whose backend runs eager elementwise ops as CUDA kernels."""
    xp = _DeviceModule()
    register_backend(xp, Backend("fake_cupy", xp_fused, xp_fused_sum, device_forward))
    return xp


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Record the kernels the dispatch builds; each launch runs the op's numpy forward."""
    sources: list[Any] = []

    def launcher(source: Any, params: tuple[str, ...]) -> Any:
        sources.append(source)
        name = source.name.removeprefix("dualflow_").rsplit("_", 1)[0]

        def launch(arrays: tuple, values: dict) -> Any:
            assert tuple(values) == OPS[name].attr_names and set(params) <= set(values)
            return OPS[name].forward(np, *map(np.asarray, arrays), **values)

        return launch

    monkeypatch.setattr(cuda_elementwise, "launcher", launcher)
    cuda_elementwise.clear()
    return sources


def test_device_dispatch_caches_one_kernel_per_input_types(built: list[Any], device: Any) -> None:
    xp, x = device, _DeviceArray(np.arange(4, dtype=np.float32))
    y = OPS["multiply"].forward(xp, x, 0.5)
    OPS["multiply"].forward(xp, x, 0.25)  # another weak float: the same kernel
    assert cache_info() == (1, 1, 0, 1) and y.tolist() == [0.0, 0.5, 1.0, 1.5]
    OPS["multiply"].forward(xp, x, np.float64(0.5))  # a strong scalar: a new kernel
    OPS["multiply"].forward(xp, _DeviceArray(np.ones(2)), 0.5)  # float64 input: a new kernel
    OPS["leaky_relu"].forward(xp, x, slope=0.1)
    z = OPS["leaky_relu"].forward(xp, _DeviceArray(-x.array), slope=0.5)  # a parameter
    assert cache_info() == (2, 4, 0, 4) and z.tolist() == [0.0, -0.5, -1.0, -1.5]
    outs = [s.out_params for s in built]
    assert outs == ["float32 out", "float64 out", "float64 out", "float32 out"]


def test_device_dispatch_falls_back_for_host_arrays_and_float16(
    built: list[Any], device: Any
) -> None:
    xp = device
    mixed = OPS["add"].forward(xp, np.ones(2, np.float32), _DeviceArray(np.ones(2, np.float32)))
    assert mixed.tolist() == [2.0, 2.0] and cache_info() == (0, 1, 1, 0)
    half = _DeviceArray(np.ones(2, np.float16))
    for _ in range(2):  # no CUDA C type for float16: the plain forward, decided once
        assert OPS["add"].forward(xp, half, half).dtype == np.float16
    assert cache_info() == (1, 2, 3, 0) and not built


def test_an_unknown_array_module_runs_the_plain_xp_forward(built: list[Any]) -> None:
    """Not numpy is not cupy: a module without a registered backend gets no CUDA kernels."""
    xp, x = _DeviceModule(), _DeviceArray(np.arange(4, dtype=np.float32))
    assert np.asarray(OPS["multiply"].forward(xp, x, 0.5)).tolist() == [0.0, 0.5, 1.0, 1.5]
    assert backend_of(xp).elementwise is None and backend_of(xp).library is None
    assert cache_info() == (0, 0, 0, 0) and not built


def test_ops_on_numpy_never_call_cudnn(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("conv2d", "conv_transpose2d", "conv2d_grad_weight", "pool2d", "batch_norm"):
        monkeypatch.setattr(cudnn, name, lambda *a, **k: pytest.fail("cuDNN on numpy"))
    x = np.random.default_rng(2).standard_normal((2, 3, 6, 6)).astype(np.float32)
    w = np.ones((4, 3, 3, 3), np.float32)
    y = ops.conv2d(x, w, pad=1)
    ops.conv_transpose2d(y, w, pad=1)
    ops.conv2d_grad_weight(x, y, 3, pad=1)
    ops.max_pool2d(x, 2)
    ops.avg_pool2d_grad(ops.avg_pool2d(x, 2), (6, 6), 2)
    ops.batch_norm(x, np.ones(3, np.float32), np.zeros(3, np.float32))
    assert not cudnn.CALLS and not cudnn.usable(x) and not cudnn.conv_usable(x, w)


def test_creation_ops_take_a_device() -> None:
    assert ops.zeros((2, 3), device="cpu").device == dualflow.Device("cpu")
    assert ops.arange(3, device="cpu").tolist() == [0, 1, 2]
    assert ops.ones_like(np.ones(2), device="cpu").tolist() == [1.0, 1.0]
    with pytest.raises(DeviceError, match="unknown device"):
        ops.full(2, 1.0, device="tpu")
    # the device is placed by the Python function, never an op attribute: the IR is unchanged
    assert set(inspect.signature(OPS["full"].infer).parameters) == {"shape", "value", "dtype"}


def test_every_registered_elementwise_op_has_cases() -> None:
    named = {case.name for case in cases("float32")}
    assert named == set(elementwise_ops()) and len(named) >= 40
