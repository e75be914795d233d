"""The promise table (docs/promises.md) stays true, and the settings attacks the next person
extends: every test the table names exists, and every environment variable dualflow reads is
attacked with values it must refuse with a ``ConfigError`` naming it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

import dualflow
from dualflow import _config
from dualflow.background.process import configured_threads
from dualflow.checkpoint_reader import decompression_limit
from dualflow.errors import ConfigError
from dualflow.kernels.base import per_machine
from dualflow.passes.manager import resolve_passes
from dualflow.tracer.env_probe import untested_allowed

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "docs" / "promises.md"
NAMED = re.compile(r"(tests/[\w/]+\.py)::(test_\w+)`?( \*\(being added\)\*)?")
BAD_NUMBERS = ["nan", "inf", "-inf", "1e308", "-1", "abc", "0x10"]
BAD_FLAGS = ["2", "maybe", "nan", "-1"]


@dataclass(frozen=True)
class Setting:
    """How a setting is read (in this process, or by code run in a fresh one when it is read at
    import) and the values it must refuse; ``why_none`` when no value is wrong."""

    read: Callable[[], object] | None = None
    fresh: str | None = None  # Python code reading it in a new interpreter
    bad: tuple[str, ...] = ()
    why_none: str = ""


def _compile_once() -> object:
    return dualflow.compile(lambda x: x + 1)(dualflow.tensor([1.0]))


SETTINGS: dict[str, Setting] = {
    "DUALFLOW_DEBUG": Setting(fresh="import dualflow", bad=("maybe",)),
    "DUALFLOW_MALLOC_TUNING": Setting(fresh="import dualflow", bad=("maybe",)),
    "DUALFLOW_DISABLE_COMPILE": Setting(
        fresh="import dualflow; dualflow.compile(abs)", bad=("maybe",)
    ),
    "DUALFLOW_BACKGROUND_COMPILE": Setting(
        fresh="import dualflow.kernels.numba.compile_worker", bad=("maybe",)
    ),
    "DUALFLOW_NATIVE_THREADS": Setting(
        fresh="import dualflow.kernels.base.native_crew", bad=("maybe",)
    ),
    "DUALFLOW_CUDNN": Setting(fresh="import dualflow.kernels.cuda.cudnn", bad=("maybe",)),
    "DUALFLOW_CUDNN_TF32": Setting(fresh="import dualflow.kernels.cuda.cudnn", bad=("maybe",)),
    "DUALFLOW_VERIFY_PASSES": Setting(read=_compile_once, bad=tuple(BAD_FLAGS)),
    "DUALFLOW_UNTESTED_PYTHON": Setting(read=untested_allowed, bad=tuple(BAD_FLAGS)),
    "DUALFLOW_PASSES": Setting(read=lambda: resolve_passes(None), bad=("bogus", "O3", "dce,x")),
    "DUALFLOW_CACHE_MAX_MB": Setting(read=_config.cache_limit, bad=tuple(BAD_NUMBERS)),
    "DUALFLOW_CHECKPOINT_MAX_GB": Setting(
        read=lambda: decompression_limit(None), bad=tuple(BAD_NUMBERS)
    ),
    "DUALFLOW_NUM_THREADS": Setting(
        read=configured_threads, fresh="import dualflow", bad=(*BAD_NUMBERS, "0", "1.5", "1025")
    ),
    "DUALFLOW_MACHINE_CONSTANTS": Setting(
        read=per_machine.defaults_fixed, bad=("default", "1", "maybe", "measure")
    ),
    "DUALFLOW_CACHE_DIR": Setting(why_none="any text names a folder (~ expanded)"),
    "DUALFLOW_PLAN_CACHE": Setting(why_none="any text names a folder (~ expanded; 0/1 off/on)"),
    "DUALFLOW_DUMP_IR": Setting(why_none="any text names a folder (~ expanded)"),
    "DUALFLOW_COLLECTIVE_TIMEOUT": Setting(
        why_none="validated by the distributed work of issue 36 (test_watchdog.py)"
    ),
}
ATTACKS = [(name, value) for name, s in SETTINGS.items() if s.read for value in s.bad]
FRESH = [(name, s.fresh, value) for name, s in SETTINGS.items() if s.fresh for value in s.bad]


def test_every_environment_variable_has_its_attacks() -> None:
    assert set(SETTINGS) == set(_config.ENVIRONMENT)
    for name, setting in SETTINGS.items():
        assert setting.bad or setting.why_none, name


@pytest.mark.parametrize(("name", "value"), ATTACKS)
def test_every_setting_refuses_bad_values(
    name: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=f"{name}={value!r}"):
        SETTINGS[name].read()


@pytest.mark.parametrize(("name", "code", "value"), FRESH)
def test_settings_read_at_import_refuse_bad_values(name: str, code: str, value: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), name: value}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 1
    assert f"dualflow.errors.ConfigError: {name}={value!r}" in done.stderr, done.stderr[-2000:]


def test_every_test_the_promise_table_names_exists() -> None:
    text = TABLE.read_text()
    named = NAMED.findall(text)
    assert len(named) > 40
    missing = []
    for file, test, pending in named:
        if pending:
            continue
        path = ROOT / file
        if not path.exists() or not re.search(rf"^def {test}\(", path.read_text(), re.M):
            missing.append(f"{file}::{test}")
    assert not missing, f"docs/promises.md names tests that do not exist: {missing}"
