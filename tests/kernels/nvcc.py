"""Compile rendered CUDA C with ``nvcc --ptx`` in the kernel tests (skipped without nvcc): every
``__global__`` kernel of the file must come out as one PTX entry."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from dualflow.kernels.cuda.cuda_fused import COMPILE_OPTIONS


def nvcc_or_skip() -> str:
    """The ``nvcc`` on PATH; skips the calling test when there is none."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not installed")
    return nvcc


def assert_compiles_to_ptx(nvcc: str, folder: Path, name: str, kernels: Sequence[str]) -> None:
    """Write ``kernels`` (whole ``__global__`` functions) to ``folder/name.cu``; ``nvcc --ptx``
    with the runtime's options must take it and emit one entry per kernel."""
    source, ptx = folder / f"{name}.cu", folder / f"{name}.ptx"
    source.write_text("\n".join(kernels))
    done = subprocess.run(
        [nvcc, "--ptx", *COMPILE_OPTIONS, str(source), "-o", str(ptx)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert ptx.read_text().count(".entry") == len(kernels)
