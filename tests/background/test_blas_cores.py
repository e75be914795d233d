"""background.blas_cores: the OpenBLAS kernel tables this CPU can run are offered, switching to
one runs it (GEMMs stay right) and leaves the process's OPENBLAS_CORETYPE as it was, and a name
the library or the CPU cannot run is refused without a change."""

from __future__ import annotations

import os

import numpy as np
import pytest

from dualflow.background import blas_cores

pytestmark = pytest.mark.skipif(not blas_cores.cores(), reason="no switchable OpenBLAS")


def test_the_running_table_comes_first_and_every_offer_fits_the_cpu() -> None:
    offered = blas_cores.cores()
    assert offered[0] == blas_cores.core_name()
    for name in offered[1:]:
        assert blas_cores.cpu_flags().issuperset(blas_cores.CORE_FLAGS[name])


@pytest.mark.parametrize("preset", [None, "Prescott"])
def test_each_table_runs_gemms_right_and_the_loaded_one_comes_back(monkeypatch, preset) -> None:
    if preset is None:
        monkeypatch.delenv(blas_cores.CORE_ENV, raising=False)
    else:  # a value the user set: use_core must put it back as it was
        monkeypatch.setenv(blas_cores.CORE_ENV, preset)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 96, 96), dtype=np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    loaded = blas_cores.core_name()
    try:
        for name in blas_cores.cores():
            assert blas_cores.use_core(name) and blas_cores.core_name() == name
            np.testing.assert_allclose(a @ b, exact, rtol=1e-4, atol=1e-4)
            assert os.environ.get(blas_cores.CORE_ENV) == preset
    finally:
        assert blas_cores.use_core(loaded)
    assert blas_cores.core_name() == loaded


def test_a_table_it_cannot_run_is_refused_unchanged() -> None:
    loaded = blas_cores.core_name()
    unfit = [n for n in blas_cores.CORE_FLAGS if n not in blas_cores.cores()]
    for name in ["Bogus", "haswell", *unfit]:  # unknown, a name not spelled as offered, unfit
        assert not blas_cores.use_core(name)
        assert blas_cores.core_name() == loaded
