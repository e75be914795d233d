"""Autocast's op lists against PyTorch's: every case of ``autocast_cases`` gives the output dtype
``torch.autocast("cpu", dtype)`` gives (references made by make_autocast_references.py), from
float32 inputs and from inputs already in the low type, eagerly and compiled."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import dualflow
import dualflow.nn.functional as F
from dualflow.ops.autocast import low_dtype
from tests.compat.autocast_cases import CASES

REFERENCES = json.loads((Path(__file__).parent / "autocast_references.json").read_text())


def _low(name: str) -> np.dtype:
    if name == "bfloat16":
        pytest.importorskip("ml_dtypes")
    return low_dtype(name)


def _inputs(shapes: list, low: np.dtype, cast: bool) -> list:
    rng = np.random.default_rng(0)
    xs = [dualflow.tensor(rng.normal(size=s).astype(np.float32)) for s in shapes]
    return [x.to(low) for x in xs] if cast else xs


@pytest.mark.parametrize("cast", [False, True], ids=["float32_inputs", "low_inputs"])
@pytest.mark.parametrize("low_name", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_output_dtype_matches_pytorch(case: str, low_name: str, cast: bool) -> None:
    low = _low(low_name)
    shapes, fn = CASES[case]
    expected = REFERENCES[low_name][case][int(cast)]
    with dualflow.autocast("cpu", dtype=low):
        out = fn(dualflow, F, *_inputs(shapes, low, cast))
    assert np.dtype(out.dtype).name == expected


@pytest.mark.parametrize(
    "case",
    [
        "linear",
        "conv2d",
        "cross_entropy",
        "softmax",
        "scaled_dot_product_attention",
        "dot",
        "pad_reflect",
    ],
)
def test_compiled_gives_the_eager_dtypes_and_values(case: str) -> None:
    shapes, fn = CASES[case]
    low = low_dtype("float16")

    def run(*xs):
        with dualflow.autocast("cpu", dtype=low):
            return fn(dualflow, F, *xs)

    xs = _inputs(shapes, low, False)
    compiled = dualflow.compile(run)
    for _ in range(2):
        got, want = compiled(*xs), run(*xs)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert compiled.stats().plan_runs >= 1
