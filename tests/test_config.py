"""Settings fail loudly with one typed error: every DUALFLOW_* flag and number is parsed by
``_config.env_flag``/``env_number`` (``ConfigError`` naming the variable, the value and what it
accepts, never a raw ValueError/OverflowError), and folder settings expand ``~``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dualflow
from dualflow import _config, disk_cache
from dualflow.errors import ConfigError
from dualflow.tracer.plan_cache import plan_cache_dir

BAD_NUMBERS = ["nan", "inf", "-inf", "1e308", "-1", "abc", "0x10"]
# every boolean variable, and when it is read (at import: the value applies from the start)
FLAGS = [
    "DUALFLOW_DEBUG",
    "DUALFLOW_DISABLE_COMPILE",
    "DUALFLOW_VERIFY_PASSES",
    "DUALFLOW_BACKGROUND_COMPILE",
    "DUALFLOW_NATIVE_THREADS",
    "DUALFLOW_MALLOC_TUNING",
    "DUALFLOW_CUDNN",
    "DUALFLOW_CUDNN_TF32",
]


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": os.getcwd(), **env}
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True)


@pytest.mark.parametrize("value", BAD_NUMBERS)
def test_bad_cache_limit_is_a_config_error_naming_it(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DUALFLOW_CACHE_MAX_MB", value)
    with pytest.raises(
        ConfigError, match=rf"DUALFLOW_CACHE_MAX_MB='{value}' .* in \[0, 1073741824\]"
    ):
        _config.cache_limit()
    with pytest.raises(ConfigError, match="DUALFLOW_CACHE_MAX_MB"):
        disk_cache.open_store("bytecode")  # the cache's first use, not only a later write


def test_good_cache_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    for value, limit in [("", 512 * 2**20), (" 0.5 ", 2**19), ("0", 0), ("1e3", 1000 * 2**20)]:
        monkeypatch.setenv("DUALFLOW_CACHE_MAX_MB", value)
        assert _config.cache_limit() == limit


def test_the_issue_case_imports_fail_with_the_typed_error(tmp_path: Path) -> None:
    """``DUALFLOW_CACHE_MAX_MB=nan python -c 'import dualflow.nn'`` raised ValueError."""
    done = _python(
        "import dualflow.nn", DUALFLOW_CACHE_MAX_MB="nan", DUALFLOW_CACHE_DIR=str(tmp_path / "c")
    )
    assert done.returncode == 1
    assert "dualflow.errors.ConfigError: DUALFLOW_CACHE_MAX_MB='nan'" in done.stderr, done.stderr
    assert "ValueError: cannot convert" not in done.stderr


@pytest.mark.parametrize("name", FLAGS)
def test_every_flag_accepts_the_usual_spellings_and_refuses_others(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for text, value in [("1", True), ("True", True), (" on", True), ("no", False), ("", False)]:
        monkeypatch.setenv(name, text)
        assert _config.env_flag(name) is value
    monkeypatch.delenv(name)
    assert _config.env_flag(name, default=True) is True
    monkeypatch.setenv(name, "2")
    with pytest.raises(ConfigError, match=f"{name}='2' is not a flag: use 1/true/yes/on"):
        _config.env_flag(name)


def test_flags_read_at_import_fail_with_the_typed_error() -> None:
    done = _python("import dualflow; dualflow.compile(abs)", DUALFLOW_DISABLE_COMPILE="maybe")
    assert "ConfigError: DUALFLOW_DISABLE_COMPILE='maybe' is not a flag" in done.stderr


def test_the_flag_table_lists_every_flag() -> None:
    for name in FLAGS:
        assert name in _config.ENVIRONMENT, name


def test_folder_settings_expand_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``cache_dir="~/pc"`` made a literal ./~ folder."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert plan_cache_dir("~/pc") == tmp_path / "home" / "pc"
    monkeypatch.setenv("DUALFLOW_PLAN_CACHE", "~/plans")
    assert plan_cache_dir(None) == tmp_path / "home" / "plans"
    monkeypatch.setenv("DUALFLOW_CACHE_DIR", "~/root")
    assert _config.cache_dir() == tmp_path / "home" / "root"
    step = dualflow.compile(lambda x: x * 2 + 1, cache_dir="~/pc")
    assert float(step(dualflow.tensor([1.0])).item()) == 3.0
    assert not (tmp_path / "~").exists()


def test_set_debug_takes_a_bool() -> None:
    for bad in ("no", "yes", 2, None):
        with pytest.raises(ConfigError, match=r"set_debug\(.*\): enabled must be True or False"):
            dualflow.set_debug(bad)
    assert not _config.config.debug
    dualflow.set_debug(np.bool_(True))
    try:
        assert _config.config.debug
    finally:
        dualflow.set_debug(False)


def test_compile_settings_are_refused_where_they_are_set() -> None:
    with pytest.raises(ConfigError, match="cache_dir=5 must be a folder"):
        dualflow.compile(lambda x: x, cache_dir=5)
    for bad in (-1, float("nan"), "3", True):
        with pytest.raises(ConfigError, match=f"max_traces={bad!r} must be an int >= 0"):
            dualflow.compile(lambda x: x, max_traces=bad)
    with pytest.raises(ConfigError, match="fallback must be 'eager' or 'error', got 'bogus'"):
        dualflow.compile(lambda x: x, fallback="bogus")
    with pytest.raises(ConfigError, match="max_traces=-2"):
        dualflow.compile(max_traces=-2)  # @compile(max_traces=-2), before any function
    with pytest.raises(ConfigError, match=r"passes=.*unknown pass name"):
        dualflow.compile(lambda x: x, passes="dce,nope")


# using_config: a class-based context manager (and decorator) since issue 38's dispatch session
def test_flags_are_restored_after_nesting_and_errors() -> None:
    assert _config.config.grad_enabled and _config.config.train
    block = _config.using_config(grad_enabled=False, train=False)
    with block:
        with block:  # one instance entered twice: each entry saves its own state
            assert not _config.config.grad_enabled and not _config.config.train
        assert not _config.config.grad_enabled
    assert _config.config.grad_enabled and _config.config.train
    with pytest.raises(KeyError), _config.no_grad():
        raise KeyError("inside")
    assert _config.config.grad_enabled


def test_a_decorated_recursive_function_restores_at_each_level() -> None:
    seen = []

    @_config.using_config(train=False)
    def depth(n: int) -> None:
        seen.append(_config.config.train)
        if n:
            depth(n - 1)

    depth(2)
    assert seen == [False, False, False] and _config.config.train


def test_an_unknown_flag_is_refused_and_nothing_changes() -> None:
    with (
        pytest.raises(AttributeError, match="unknown config flag 'gradd'"),
        _config.using_config(train=False, gradd=False),
    ):
        pass
    assert _config.config.train
