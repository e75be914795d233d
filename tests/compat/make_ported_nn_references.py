"""Generate ``ported_nn_references.npz`` with PyTorch (run once, by hand):

    /work/torchvenv/bin/python tests/compat/make_ported_nn_references.py

The cases of ``ported_nn_cases`` through ``make_nn_references.run_case`` (float64; initial state
dict, inputs, cotangents, outputs, parameter and input gradients).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
sys.path.insert(0, str(HERE))

import nn_packing  # noqa: E402
from make_nn_references import run_case  # noqa: E402

from tests.compat.ported_nn_cases import CASES  # noqa: E402


def main() -> None:
    torch.set_default_dtype(torch.float64)
    store: dict[str, np.ndarray] = {}
    rng = np.random.default_rng(4040)
    for case in CASES:
        run_case(case, rng, store)
    nn_packing.save(HERE / "ported_nn_references.npz", store)
    print(f"wrote {len(store)} arrays for {len(CASES)} cases with torch {torch.__version__}")


if __name__ == "__main__":
    main()
