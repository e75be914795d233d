"""Every op-table entry on ``cuda:0`` against the same computation on the CPU: forward outputs
(dtype, shape, values), first-order gradients and double-backward gradients, in float32 and
float64, with tolerances for the few ulps CUDA's math library and summation order may differ by.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.gpu.op_runner import Result, run_sample
from tests.opinfo import OP_INFOS, OpInfo

pytestmark = pytest.mark.gpu
CUDA = "cuda:0"


def _tolerance(info: OpInfo, dtype: Any) -> tuple[float, float]:
    if dtype == np.float64:
        return 1e-9, 1e-11
    return max(info.f32_tol[0], 2e-5), max(info.f32_tol[1], 2e-6)


def _compare(kind: str, got: list, want: list, tol: tuple[float, float], name: str) -> None:
    assert len(got) == len(want), f"{name}: {len(got)} {kind} on cuda, {len(want)} on cpu"
    for i, (g, w) in enumerate(zip(got, want)):
        where = f"{name}: {kind}[{i}]"
        assert (g is None) == (w is None), f"{where}: None on one device only"
        if g is None:
            continue
        assert g.dtype == w.dtype and g.shape == w.shape, (
            f"{where}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}"
        )
        if g.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, rtol=tol[0], atol=tol[1], err_msg=where)
        else:
            np.testing.assert_array_equal(g, w, err_msg=where)


def _check(got: Result, want: Result, tol: tuple[float, float], name: str) -> None:
    _compare("outputs", got.outputs, want.outputs, tol, name)
    _compare("grads", got.grads, want.grads, (tol[0] * 2, tol[1] * 2), name)
    _compare("double", got.double, want.double, (tol[0] * 10, tol[1] * 10), name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("info", OP_INFOS, ids=[info.name for info in OP_INFOS])
def test_entry_on_cuda_matches_cpu(info: OpInfo, dtype: Any) -> None:
    tol = _tolerance(info, dtype)
    for sample in info.samples(np.random.default_rng(0)):
        name = f"{info.name}[{sample.name}]"
        want = run_sample(info, sample, dtype, "cpu")
        got = run_sample(info, sample, dtype, CUDA)
        if any(isinstance(v, np.ndarray) for v in sample.inputs):  # creation ops have none
            assert got.devices <= {CUDA}, f"{name}: outputs on {got.devices}"
        _check(got, want, tol, name)
