"""Fixtures shared by the kernel tests."""

from __future__ import annotations

import pytest

from dualflow.kernels.base import machine_constants as mc
from dualflow.kernels.base import per_machine


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty kernels cache with the machine constants forgotten (measured afresh on first
    use); yields the cache's kernels folder."""
    monkeypatch.setenv("DUALFLOW_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(per_machine.ENV, raising=False)
    mc.forget()
    yield tmp_path / "kernels"
    mc.forget()  # the next test reads the suite's defaults again
