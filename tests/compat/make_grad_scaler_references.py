"""Generate ``grad_scaler_references.json`` with PyTorch (run once, by hand; torch is no
dependency).

    /work/torchvenv/bin/python tests/compat/make_grad_scaler_references.py

Replays ``grad_scaler_cases`` with ``torch.amp.GradScaler("cpu")`` and records, after every
step, the scale, the growth tracker and the parameter.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from grad_scaler_cases import SETTINGS, START, STEPS, coefficients  # noqa: E402


def main() -> None:
    p = torch.nn.Parameter(torch.from_numpy(START.copy()))
    opt = torch.optim.SGD([p], lr=0.1, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", **SETTINGS)
    rows = []
    for step in range(STEPS):
        opt.zero_grad()
        loss = (p * torch.from_numpy(coefficients(step))).sum()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        state = scaler.state_dict()
        rows.append([state["scale"], state["_growth_tracker"], p.detach().tolist()])
    path = HERE / "grad_scaler_references.json"
    path.write_text(json.dumps({"torch": torch.__version__, "rows": rows}, indent=1) + "\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
