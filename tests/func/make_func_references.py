"""Generate ``func_references.npz`` with torch.func in float64 (run by hand):

    /work/torchvenv/bin/python tests/func/make_func_references.py

It stores every input of ``func_cases.inputs()`` (``in/<name>``) and every case's flat results
(``<case>/<i>``), so the tests need neither torch nor the same numpy random stream.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
import torch.func
import torch.nn.functional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import func_cases  # noqa: E402


def main() -> None:
    raw = func_cases.inputs()
    store = {f"in/{k}": v for k, v in raw.items()}
    values = {k: torch.from_numpy(v.copy()) for k, v in raw.items()}
    for name in func_cases.CASES:
        results = func_cases.run(torch.func, torch.nn.functional, name, values)
        for i, r in enumerate(results):
            store[f"{name}/{i}"] = r.detach().numpy().copy()
    np.savez_compressed(HERE / "func_references.npz", **store)
    print(f"wrote {len(store)} arrays")


if __name__ == "__main__":
    main()
