"""Generate ``autocast_references.json`` with PyTorch (run once, by hand; torch is no dependency).

    /work/torchvenv/bin/python tests/compat/make_autocast_references.py

For each case of ``autocast_cases.CASES`` and each low type (bfloat16, float16): the output dtype
under ``torch.autocast("cpu", dtype)`` for float32 inputs and for inputs already in the low type.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from autocast_cases import CASES  # noqa: E402


def output_dtype(fn, shapes, low, cast: bool) -> str:
    rng = np.random.default_rng(0)
    xs = [torch.from_numpy(rng.normal(size=s).astype(np.float32)) for s in shapes]
    if cast:
        xs = [x.to(low) for x in xs]
    with torch.autocast("cpu", dtype=low):
        return str(fn(torch, F, *xs).dtype).replace("torch.", "")


def main() -> None:
    table = {}
    for low in (torch.bfloat16, torch.float16):
        name = str(low).replace("torch.", "")
        table[name] = {
            case: [output_dtype(fn, shapes, low, cast) for cast in (False, True)]
            for case, (shapes, fn) in CASES.items()
        }
    path = HERE / "autocast_references.json"
    path.write_text(json.dumps({"torch": torch.__version__, **table}, indent=1) + "\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
