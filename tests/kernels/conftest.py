"""Fixtures shared by the kernel tests."""

from __future__ import annotations

import pytest

from dualflow.kernels.base import machine_constants as mc
from dualflow.kernels.base import per_machine
from dualflow.kernels.fast_math import work_weights as ww
from dualflow.kernels.pool import pool_kernels


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty kernels cache with the machine constants forgotten (measured afresh on first
    use); yields the cache's kernels folder. The kernels' own per-machine costs (the work
    weights, the pool's) stay at their defaults here, so a test of the constants is not one of
    this machine's costs (tests/kernels/test_work_weights.py measures those)."""
    monkeypatch.setenv("DUALFLOW_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(per_machine.ENV, raising=False)
    monkeypatch.setattr(ww._WEIGHTS, "get", lambda: ww.DEFAULTS)
    monkeypatch.setattr(pool_kernels._POOL_WORK, "get", lambda: pool_kernels.PoolWork())
    mc.forget()
    yield tmp_path / "kernels"
    mc.forget()  # the next test reads the suite's defaults again
