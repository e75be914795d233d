"""Write the small real ``torch.save`` fixtures of tests/interop (run with a PyTorch install).

``python tests/interop/data/make_torch_fixtures.py`` (torch only, no torchvision) writes, next
to this script, ``state_dict.pt`` (a conv/BN/linear state dict plus float16, bfloat16, int,
non-contiguous and storage-sharing tensors, nested in a dict with plain values) and
``state_dict_expected.npz``: the same tensors as numpy arrays (bfloat16 widened to float32),
which the tests compare ``dualflow.load_torch`` against.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent


def build() -> dict:
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(2, 3, 3), torch.nn.BatchNorm2d(3), torch.nn.Flatten(), torch.nn.Linear(4, 2)
    )
    net[1].running_mean.normal_()
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    extra = {
        "half": torch.randn(5).half(),
        "bf16": torch.randn(2, 3).bfloat16(),
        "long": torch.arange(6).reshape(2, 3),
        "bool": torch.tensor([True, False, True]),
        "transposed": base.t(),  # strides (1, 4): non-contiguous
        "row": base[1],  # a view at offset 4 of the same storage
        "empty": torch.zeros(0, 3),
        "scalar": torch.tensor(2.5, dtype=torch.float64),
    }
    return {"model": net.state_dict(), "extra": extra, "epoch": 3, "lr": 0.1, "tags": ["a", "b"]}


def to_numpy(tree: dict, prefix: str = "") -> dict[str, np.ndarray]:
    flat = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(to_numpy(value, name + "/"))
        elif isinstance(value, torch.Tensor):
            value = value.float() if value.dtype == torch.bfloat16 else value
            flat[name] = value.detach().numpy().copy()
    return flat


def main() -> None:
    tree = build()
    torch.save(tree, HERE / "state_dict.pt")
    np.savez(HERE / "state_dict_expected.npz", **to_numpy(tree))
    print(f"wrote {HERE / 'state_dict.pt'} with torch {torch.__version__}")


if __name__ == "__main__":
    main()
