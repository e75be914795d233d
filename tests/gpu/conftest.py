"""Fixtures of the GPU tests (which the root conftest skips without cupy and a CUDA device)."""

from __future__ import annotations

from types import ModuleType

import pytest


@pytest.fixture(scope="session")
def cupy() -> ModuleType:
    """The cupy module, imported only when a gpu test runs."""
    import cupy

    return cupy
