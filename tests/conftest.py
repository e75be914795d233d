"""Test-wide settings: verify the IR after every optimization pass (DESIGN §5), compile fused
kernels in the test process, fix the per-machine constants to their defaults, and skip tests
marked ``gpu`` with the reason when cupy or a CUDA device is missing."""

import functools
import os

import pytest

os.environ.setdefault("DUALFLOW_VERIFY_PASSES", "1")
# fused kernels compile in the test process (which kernel runs is then known); the worker has its
# own tests (tests/kernels/test_background_compile.py) and fuzz profile
os.environ.setdefault("DUALFLOW_BACKGROUND_COMPILE", "0")
# the constants measured per machine (kernels.base.machine_constants, thin_rows) take their
# defaults: which regions fuse, split or recompute never depends on the machine running the suite
os.environ.setdefault("DUALFLOW_MACHINE_CONSTANTS", "defaults")


@functools.cache
def gpu_skip_reason() -> str | None:
    """Why ``gpu`` tests cannot run here (cupy missing, no CUDA device), or None when they can."""
    try:
        import cupy
    except ImportError as exc:
        return f"cupy is not importable ({exc}); install it with: pip install 'dualflow[cuda12]'"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError: no driver, or a driver too old for this cupy
        return f"cupy.cuda.runtime.getDeviceCount() failed ({type(exc).__name__}: {exc})"
    if count == 0:
        return "cupy.cuda.runtime.getDeviceCount() == 0: no CUDA device visible"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    reason = gpu_skip_reason() if gpu_items else None  # import cupy only when a test needs it
    if reason is not None:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=f"gpu: {reason}"))
