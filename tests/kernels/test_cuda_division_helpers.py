"""The CUDA helpers of remainder/fmod/floor_divide (``cuda_render.DIVISION_PREAMBLE``) give numpy's
bits: compiled as host C++ (``__device__`` defined away; skipped without g++), so a machine
without a GPU checks the algorithm; tests/gpu runs the real kernels where there is one."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from dualflow.kernels.cuda.cuda_render import DIVISION_PREAMBLE

C_TYPES = {"float32": "float", "float64": "double", "int32": "int32_t", "int64": "int64_t"}
HARNESS = """#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
using namespace std;
#define __device__
{preamble}
int main(int argc, char** argv) {{
    int n = atoi(argv[1]);
    {t}* a = new {t}[2 * n];
    {t}* out = new {t}[3 * n];
    if (fread(a, sizeof({t}), 2 * n, stdin) != (size_t)(2 * n)) return 1;
    for (int i = 0; i < n; i++) {{
        out[i] = dualflow_{k}remainder(a[i], a[n + i]);
        out[n + i] = dualflow_{k}fmod(a[i], a[n + i]);
        out[2 * n + i] = dualflow_{k}floor_divide(a[i], a[n + i]);
    }}
    fwrite(out, sizeof({t}), 3 * n, stdout);
    return 0;
}}
"""


def _grid(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    if dtype.startswith("float"):
        big = np.finfo(dtype).max / 2
        grid = np.array(
            [-7.5, -2, -1, -0.0, 0.0, 0.5, 1, 3, 5.25, 1e-30, big, np.inf, -np.inf, np.nan]
        )
        extra = (rng.normal(size=(2, 3000)) * [[50.0], [3.0]]).astype(dtype)
    else:
        info = np.iinfo(dtype)
        grid = np.array([info.min, -7, -3, -1, 0, 1, 2, 5, 9, info.max])
        extra = rng.integers(-100, 100, (2, 3000)) // [[1], [11]]
    grid = grid.astype(dtype)
    a = np.concatenate([np.repeat(grid, len(grid)), extra[0].astype(dtype)])
    b = np.concatenate([np.tile(grid, len(grid)), extra[1].astype(dtype)])
    return a, b


@pytest.mark.parametrize("dtype", list(C_TYPES))
def test_helpers_give_numpys_bits(dtype: str, tmp_path: Path) -> None:
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("g++ is not installed")
    kind = "f" if dtype.startswith("float") else "i"
    source = tmp_path / "division.cpp"
    source.write_text(HARNESS.format(preamble=DIVISION_PREAMBLE, t=C_TYPES[dtype], k=kind))
    binary = tmp_path / "division"
    # no a*b+c contraction, as the CUDA kernels' --fmad=false
    built = subprocess.run(
        [compiler, "-O1", "-ffp-contract=off", str(source), "-o", str(binary)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    a, b = _grid(dtype)
    ran = subprocess.run(
        [str(binary), str(len(a))], input=np.concatenate([a, b]).tobytes(), capture_output=True
    )
    assert ran.returncode == 0
    got = np.frombuffer(ran.stdout, dtype).reshape(3, len(a))
    with np.errstate(all="ignore"):
        wants = (np.remainder(a, b), np.fmod(a, b), np.floor_divide(a, b))
    for name, g, w in zip(("remainder", "fmod", "floor_divide"), got, wants):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(np.signbit(g), np.signbit(w), err_msg=name)
        np.testing.assert_array_equal(g, w, err_msg=name)  # NaN equals NaN here
