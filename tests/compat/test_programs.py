"""The PyTorch programs of ``tests/compat/programs/`` run under dualflow with only their imports
changed (``import torch`` -> ``import dualflow as torch``...): "PyTorch programs run as written".

Each also runs under PyTorch as it is (checked by hand with /work/torchvenv); here the import
lines are mapped and the program's ``main()`` must finish with a finite loss.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

PROGRAMS = sorted(
    p for p in (Path(__file__).parent / "programs").glob("*.py") if p.name != "__init__.py"
)
IMPORT = re.compile(r"^(import|from) torch\b(\S*)(.*)$", re.MULTILINE)


def as_dualflow(source: str) -> str:
    """``source`` with every ``torch`` import mapped to dualflow (the module bound to the same
    name): ``import torch`` -> ``import dualflow as torch``, ``import torch.nn as nn`` ->
    ``import dualflow.nn as nn``, ``from torch.utils.data import X`` -> ``from
    dualflow.utils.data import X``."""

    def mapped(match: re.Match) -> str:
        kind, path, rest = match.groups()
        if kind == "import" and not path and not rest.strip().startswith("as"):
            return "import dualflow as torch" + rest
        return f"{kind} dualflow{path}{rest}"

    return IMPORT.sub(mapped, source)


def test_import_mapping() -> None:
    source = "import torch\nimport torch.nn as nn\nfrom torch.utils.data import DataLoader\n"
    assert as_dualflow(source) == (
        "import dualflow as torch\nimport dualflow.nn as nn\n"
        "from dualflow.utils.data import DataLoader\n"
    )


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_program_runs_under_dualflow(path: Path, capsys) -> None:
    namespace = {"__name__": f"programs_{path.stem}", "__file__": str(path)}
    exec(compile(as_dualflow(path.read_text()), str(path), "exec"), namespace)
    loss = namespace["main"]()
    assert math.isfinite(loss)
    assert capsys.readouterr().out.strip()  # it printed its summary line
