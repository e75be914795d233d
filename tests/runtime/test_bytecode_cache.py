"""Plan bytecode on disk: a big plan's code is compiled once, read back after, and a damaged
file only costs a recompile."""

from __future__ import annotations

from pathlib import Path

import pytest

from dualflow.runtime import bytecode_cache


def _source(n: int) -> str:
    body = "".join(f"    v{i} = x + {i}\n" for i in range(n))
    return f"def run(x):\n{body}    return v{n - 1}\n"


def _call(code) -> int:
    namespace: dict = {}
    exec(code, namespace)
    return namespace["run"](1)


def test_big_plans_are_stored_and_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DUALFLOW_CACHE_DIR", str(tmp_path))
    source = _source(400)
    assert _call(bytecode_cache.compile_plan(source, "<plan a>")) == 400
    stored = list((tmp_path / "bytecode").glob("*.marshal"))
    assert len(stored) == 1
    mtime = stored[0].stat().st_mtime_ns
    assert _call(bytecode_cache.compile_plan(source, "<plan a>")) == 400
    assert stored[0].stat().st_mtime_ns == mtime  # read, not rewritten


def test_damaged_bytecode_is_recompiled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUALFLOW_CACHE_DIR", str(tmp_path))
    source = _source(400)
    bytecode_cache.compile_plan(source, "<plan b>")
    (path,) = (tmp_path / "bytecode").glob("*.marshal")
    path.write_bytes(b"\x00garbage")
    assert _call(bytecode_cache.compile_plan(source, "<plan b>")) == 400


def test_small_plans_skip_the_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUALFLOW_CACHE_DIR", str(tmp_path))
    assert _call(bytecode_cache.compile_plan(_source(3), "<plan c>")) == 3
    assert not (tmp_path / "bytecode").exists()
