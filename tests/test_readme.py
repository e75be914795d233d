"""The README's self-contained Python examples run as written (so the quick tour stays true)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = [
    block
    for block in re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    if block.startswith("import dualflow")  # the others continue an earlier snippet
]


def test_readme_has_runnable_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_block_runs(block: str, tmp_path: Path) -> None:
    cwd = os.getcwd()
    os.chdir(tmp_path)  # examples may write logs/checkpoints
    try:
        namespace: dict = {}
        exec(compile(block, str(README), "exec"), namespace)
    finally:
        os.chdir(cwd)
    if "history" in namespace:  # the training example: it learned something
        assert namespace["history"][-1]["val_accuracy"] > 0.5
