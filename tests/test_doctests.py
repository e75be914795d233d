"""Every docstring example in the package runs and prints what it claims (doctest per module)."""

from __future__ import annotations

import doctest
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

import dualflow
from dualflow._config import Config

PACKAGE = Path(dualflow.__file__).resolve().parent


def _module_names() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__main__" or "__pycache__" in parts:
            continue  # importing __main__ would run the command line
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


@pytest.fixture(autouse=True)
def restore_config() -> Iterator[None]:
    before = (dualflow.config.debug, Config.debug, dualflow.config.grad_enabled)
    yield
    dualflow.config.debug, Config.debug, dualflow.config.grad_enabled = before


def test_modules_were_found() -> None:
    assert {"dualflow", "dualflow.tensor.core", "dualflow.autograd.engine"} <= set(_module_names())


@pytest.mark.parametrize("name", _module_names())
def test_doctests(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:  # optional dependencies (cupy, mpi4py) may be missing
        if exc.name and not exc.name.startswith("dualflow"):
            pytest.skip(f"needs {exc.name}")
        raise
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} doctest examples failed"
