"""examples/func_transforms.py runs, its compiled runs equal eager and Newton-CG descends."""

from __future__ import annotations

import re
from pathlib import Path

from tests.examples.test_examples import run_example


def test_func_transforms_example(tmp_path: Path) -> None:
    out = run_example("func_transforms.py", cwd=tmp_path)
    assert "per-example gradients: 4 tensors of batch 8" in out
    diffs = [float(d) for d in re.findall(r"max difference (\S+)", out)]
    assert len(diffs) == 2 and all(d < 1e-10 for d in diffs)
    losses = [float(v) for v in re.findall(r"newton-cg step \d+: loss (\S+)", out)]
    assert len(losses) == 3 and losses[0] > losses[1] > losses[2]
