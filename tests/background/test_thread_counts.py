"""Kernels on 1 and on 2 threads (``dualflow.set_num_threads``, OpenBLAS's GEMMs too): a fused
kernel split over the threads gives the same bits on either count, and a training step compiled
equals eager on each."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import dualflow
from dualflow import nn, ops
from dualflow.background import blas
from dualflow.background.process import owner, using_threads
from dualflow.kernels.base import native_crew
from tests.kernels.sgd_steps import assert_compiled_equals_eager

SPLIT = 1 << 21  # elements: above the fused kernels' two-part threshold (fused_elementwise)


def _chain(x: dualflow.Tensor) -> dualflow.Tensor:
    return ops.tanh(x * 0.5 + 1.0) * ops.sigmoid(x) - x * x


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 8))


def _workers() -> set[str]:
    """The kernel worker threads alive now (started at the first call that split): Python
    threads of ``cpu_threads``' crew, or the native crew's (``kernels.base.native_crew``)."""
    python = {t.name for t in threading.enumerate() if t.name.startswith("dualflow-cpu-")}
    crew = owner().peek(native_crew.SERVICE)
    native = (
        set() if crew is None or crew.closed else {f"native-{k}" for k in range(len(crew.ctls))}
    )
    return python | native


@pytest.mark.parametrize("threads", [1, 2])
def test_a_fused_kernel_and_a_training_step_on_one_and_two_threads(threads: int) -> None:
    x = dualflow.tensor(np.random.default_rng(0).standard_normal(SPLIT, dtype=np.float32))
    with dualflow.no_grad():
        reference = _chain(x).numpy()  # eager, at the machine's count
    with using_threads(threads, blas_too=True):
        assert dualflow.get_num_threads() == threads
        if blas.get_threads() is not None:
            assert blas.get_threads() == threads
        compiled = dualflow.compile(_chain)
        with dualflow.no_grad():
            eager, got = _chain(x).numpy(), compiled(x).numpy()
            got = compiled(x).numpy()  # the plan's run (the first call traced)
        assert compiled.stats().plan_runs >= 1
        assert len(_workers()) >= threads - 1  # 2: the calls split (a crew started), 1: never
        assert threads > 1 or not _workers()
        # the split never changes the bits: eager, compiled and the other count agree
        assert got.tobytes() == eager.tobytes() == reference.tobytes()
        assert_compiled_equals_eager(_model, (16, 32), ("O0", "O2"))
