"""The PyTorch programs ported by their imports (``examples/ports/``) run with ``--smoke``
eagerly and compiled, and give the same results.

Each program runs in-process (``runpy``, as ``__main__``, from a temporary directory) with
``dualflow.compile`` wrapped so the test can reach the compiled functions and check that plans
really ran. What is compared: every number printed (timings aside) and every parameter and
buffer of the models the program leaves in its globals or saves to files. Compiled with the
default passes (O2) the results are bitwise eager's, except where a value-changing rule of
docs/passes.md applies (a fused full sum adds in float64): then to float32 rounding.
``passes="exact"`` gives eager's bits everywhere (slow test).
"""

from __future__ import annotations

import contextlib
import io
import re
import runpy
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import nn

PORTS = Path(__file__).resolve().parents[2] / "examples" / "ports"
ARGS = {  # the extra arguments of each port's smoke run (seeded; saving what the test compares)
    "mnist": ["--save-model"],
    "word_language_model": ["--tied"],
    "dcgan": ["--manualSeed", "1", "--outf", "out"],
    "vae": [],
    "transformer_tutorial": [],
}
# Ports whose compiled steps contain a fused full sum (docs/passes.md, value-changing rules):
# the VAE's reduction='sum' losses. Every other port must match eager bit for bit under O2.
FUSED_SUMS = {"vae"}
LOCAL_MODULES = ("data", "model")  # word_language_model imports its own data.py and model.py
VARIES = re.compile(r"(ms/batch|time:)\s+[\d.]+|compile=\w+")  # timings; dcgan prints its options
NUMBER = re.compile(r"-?\d+\.\d+")


@dataclass
class Run:
    """What one run of a port printed, left behind (arrays by name) and compiled."""

    out: str
    state: dict[str, np.ndarray]
    compiled: list[Any]
    warnings: list[str]


def _states(namespace: dict[str, Any], cwd: Path) -> dict[str, np.ndarray]:
    state = {}
    for name, value in namespace.items():
        if isinstance(value, nn.Module):
            state.update({f"{name}.{k}": v.numpy() for k, v in value.state_dict().items()})
    for path in sorted(cwd.rglob("*.pt*")):
        state.update({f"{path.name}:{k}": v.numpy() for k, v in dualflow.load(path).items()})
    return state


def run_port(port: str, cwd: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> Run:
    """Run ``examples/ports/<port>/main.py --smoke`` as ``__main__`` from ``cwd``."""
    script = PORTS / port / "main.py"
    compiled: list[Any] = []
    real_compile = dualflow.compile

    def compile_and_keep(fn: Any, **kwargs: Any) -> Any:
        compiled.append(real_compile(fn, **kwargs))
        return compiled[-1]

    cwd.mkdir()
    (cwd / "results").mkdir()  # the VAE writes its images there, as in its repository
    out = io.StringIO()
    with monkeypatch.context() as patch, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        patch.setattr(dualflow, "compile", compile_and_keep)
        patch.setattr(sys, "argv", [str(script), "--smoke", *ARGS[port], *args])
        patch.chdir(cwd)
        patch.syspath_prepend(str(script.parent))
        try:
            with contextlib.redirect_stdout(out):
                namespace = runpy.run_path(str(script), run_name="__main__")
        finally:
            for name in LOCAL_MODULES:
                sys.modules.pop(name, None)
    texts = [f"{w.category.__name__}: {w.message}" for w in caught]
    return Run(out.getvalue(), _states(namespace, cwd), compiled, texts)


def assert_plans_ran(run: Run) -> None:
    assert run.compiled, "the program compiled nothing"
    for fn in run.compiled:
        stats = fn.stats()
        assert stats.plan_runs > 0, stats
        assert stats.eager_fallbacks == 0 and stats.guard_failures == 0, stats
    assert not [w for w in run.warnings if "dualflow.compile" in w], run.warnings


def assert_same_numbers(eager: str, compiled: str, bitwise: bool) -> None:
    eager, compiled = VARIES.sub("", eager), VARIES.sub("", compiled)
    if bitwise:
        assert eager == compiled
        return
    assert NUMBER.sub("#", eager) == NUMBER.sub("#", compiled)  # the same lines around the numbers
    for a, b in zip(NUMBER.findall(eager), NUMBER.findall(compiled)):
        last_digit = 10.0 ** -len(a.partition(".")[2])  # printed values round at that digit
        assert abs(float(a) - float(b)) <= last_digit + 1e-5 * abs(float(a)), (a, b)


def assert_same_state(eager: dict, compiled: dict, bitwise: bool) -> None:
    assert eager.keys() == compiled.keys() and eager
    for key, value in eager.items():
        if bitwise:
            np.testing.assert_array_equal(compiled[key], value, err_msg=key)
        else:
            np.testing.assert_allclose(compiled[key], value, rtol=1e-4, atol=1e-6, err_msg=key)


@pytest.fixture(scope="module")
def eager_runs() -> dict[str, Run]:
    return {}  # each port's eager run, shared by the tests comparing against it


def eager_run(port: str, runs: dict[str, Run], tmp_path: Path, mp: pytest.MonkeyPatch) -> Run:
    if port not in runs:
        runs[port] = run_port(port, tmp_path / "eager", mp)
        assert not runs[port].compiled
    return runs[port]


@pytest.mark.parametrize("port", sorted(ARGS))
def test_port_compiled_matches_eager(
    port: str, eager_runs: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    eager = eager_run(port, eager_runs, tmp_path, monkeypatch)
    compiled = run_port(port, tmp_path / "compiled", monkeypatch, "--compile")
    assert_plans_ran(compiled)
    bitwise = port not in FUSED_SUMS
    assert_same_numbers(eager.out, compiled.out, bitwise)
    assert_same_state(eager.state, compiled.state, bitwise)


@pytest.mark.slow
@pytest.mark.parametrize("port", sorted(ARGS))
def test_port_compiled_exact_is_bitwise_eager(
    port: str, eager_runs: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    eager = eager_run(port, eager_runs, tmp_path, monkeypatch)
    monkeypatch.setenv("DUALFLOW_PASSES", "exact")  # read when the program compiles its step
    compiled = run_port(port, tmp_path / "exact", monkeypatch, "--compile")
    assert_plans_ran(compiled)
    assert_same_numbers(eager.out, compiled.out, bitwise=True)
    assert_same_state(eager.state, compiled.state, bitwise=True)


# Lines changed beyond the imports for a reason of dualflow's, as listed in examples/ports/README.md
PORT_LINES = {"mnist": 0, "vae": 0, "word_language_model": 3, "dcgan": 6, "transformer_tutorial": 2}


@pytest.mark.parametrize("port", sorted(PORT_LINES))
def test_every_line_changed_for_dualflow_is_marked_with_its_reason(port: str) -> None:
    lines = [
        line
        for path in sorted((PORTS / port).glob("*.py"))
        for line in path.read_text().splitlines()
    ]
    marked = [m.group(1) for line in lines if (m := re.search(r"(?<!``)# PORT: (.*)", line))]
    assert len(marked) == PORT_LINES[port], marked
    assert all(len(reason) > 20 for reason in marked), marked  # each says why
    assert not [line for line in lines if re.match(r"\s*(import|from) torch", line)]


def test_the_shipped_corpus_is_what_make_corpus_writes(tmp_path: Path) -> None:
    folder = PORTS / "word_language_model"
    namespace = runpy.run_path(str(folder / "make_corpus.py"))
    namespace["write_corpus"](str(tmp_path))
    for name in ("train.txt", "valid.txt", "test.txt"):
        assert (tmp_path / name).read_text() == (folder / "data" / "synthetic" / name).read_text()
