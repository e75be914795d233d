"""Run the ported PyTorch programs of ``examples/ports/`` back under PyTorch (run by hand).

Each port's import lines are mapped back (``import dualflow as torch`` -> ``import torch``,
``dualflow.vision.utils`` -> ``torchvision.utils``...) and the program runs with ``--smoke`` in a
Python that has torch: so the ports are checked to be PyTorch programs, with nothing but their
imports (and the lines marked ``# PORT:``/``# DATA:``) written for dualflow. torchvision's
``save_image`` and dualflow's ``load_digits`` are given to it as small stand-ins (numpy only).

    python scripts/check_ports_with_torch.py /path/to/python-with-torch
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PORTS = ROOT / "examples" / "ports"
RUNS = {  # port -> extra arguments of its smoke run
    "mnist": [],
    "word_language_model": ["--tied"],
    "dcgan": ["--manualSeed", "1"],
    "vae": [],
    "transformer_tutorial": [],
}
# longest prefix first: the module a dualflow import becomes under PyTorch
MODULES = [
    ("dualflow.vision.utils", "torchvision.utils"),
    ("dualflow.data", "digits_stand_in"),
    ("dualflow", "torch"),
]
IMPORT = re.compile(r"^(\s*)(import|from)\s+(dualflow[\w.]*)(.*)$")

STAND_INS = {
    "torchvision/__init__.py": "",
    "torchvision/utils.py": "def save_image(*args, **kwargs):\n    pass  # not checked\n",
    "digits_stand_in.py": f"""import numpy as np


def load_digits(split="train"):
    with np.load({str(ROOT / "dualflow" / "data" / "digits.npz")!r}) as npz:
        keep = (npz["split"] == 1) == (split == "test")
        return (npz["images"][keep][:, None] / np.float32(16)).astype(np.float32), (
            npz["labels"][keep].astype(np.int64)
        )
""",
}


def to_torch(line: str) -> str:
    """``line`` with a dualflow import mapped back to PyTorch's module (other lines as given)."""
    match = IMPORT.match(line)
    if not match:
        return line
    indent, keyword, module, rest = match.groups()
    for prefix, torch_name in MODULES:
        if module == prefix or module.startswith(prefix + "."):
            return f"{indent}{keyword} {torch_name}{module[len(prefix) :]}{rest}"
    return line


def prepare(port: str, where: Path) -> Path:
    """A copy of the port under ``where`` with its imports mapped back, and the stand-ins."""
    target = where / port
    shutil.copytree(PORTS / port, target)
    for path in target.rglob("*.py"):
        path.write_text("\n".join(to_torch(line) for line in path.read_text().splitlines()) + "\n")
    for name, text in STAND_INS.items():
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(text)
    (where / "results").mkdir(exist_ok=True)  # the VAE writes its images there
    return target / "main.py"


def main(python: str) -> int:
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for port, extra in RUNS.items():
            script = prepare(port, Path(tmp))
            proc = subprocess.run(
                [python, str(script), "--smoke", *extra],
                capture_output=True,
                text=True,
                cwd=tmp,
                env={"PYTHONPATH": tmp, "PATH": "/usr/bin:/bin"},
                timeout=600,
            )
            ok = proc.returncode == 0
            failed += not ok
            tail = (proc.stdout if ok else proc.stdout + proc.stderr).strip().splitlines()[-3:]
            print(f"{port}: {'ok' if ok else 'FAILED'}\n    " + "\n    ".join(tail))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else sys.executable))
