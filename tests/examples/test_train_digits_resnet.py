"""``examples/train_digits_resnet.py --smoke`` trains eager and compiled, with the same losses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.examples.test_examples import run_example


def _losses(out: str) -> list[float]:
    return [float(v) for v in re.findall(r"epoch \d+: loss (\S+)", out)]


def test_resnet_example_eager_and_compiled(tmp_path: Path) -> None:
    eager = run_example("train_digits_resnet.py", cwd=tmp_path)
    compiled = run_example("train_digits_resnet.py", "--compile", cwd=tmp_path)
    assert "eager" in eager.splitlines()[0] and "compiled" in compiled.splitlines()[0]
    assert "at 32×32" in eager.splitlines()[0]
    for out in (eager, compiled):
        losses = _losses(out)
        assert len(losses) == 2 and losses[-1] < losses[0]
        assert float(re.search(r"throughput: (\S+) images/s", out).group(1)) > 0
        top1, top5 = map(float, re.search(r"top-1 accuracy: (\S+), top-5: (\S+)", out).groups())
        assert 0.0 <= top1 <= top5 <= 1.0
    assert _losses(compiled) == pytest.approx(_losses(eager), abs=1e-3)
