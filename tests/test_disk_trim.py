"""The disk caches own only what they wrote: the trim, ``dualflow cache clear`` and the plan cache's
removal of damaged entries leave every other file alone, whatever its name (``.tmp-*`` files and
folders, entry-shaped folders, links), in a plans folder the user shares with their own files."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from dualflow import disk_cache, disk_trim, disk_trust
from tests.tracer.test_plan_cache import _run, make_step

_OLD = time.time() - 7200  # older than the hour a temporary file is given to finish its write
_KEY_DIR = "ab" * 32
_ENTRY_DIR = "cd" * 8


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> disk_trust.Root:
    monkeypatch.setenv("DUALFLOW_CACHE_DIR", str(tmp_path / "cache"))
    made = disk_trust.trusted_root(tmp_path / "cache")
    assert made is not None
    return made


def _plant(folder: Path, outside: Path) -> dict[Path, bytes]:
    """The user's files next to cache entries, with names like the cache's; path -> bytes."""
    outside.mkdir()
    (outside / "precious").write_bytes(b"outside the cache")
    files = {
        folder / ".tmp-big.bin": os.urandom(50_000),
        folder / ".tmp-work" / "part0": b"work",
        folder / "notes.txt": b"mine",
        folder / _KEY_DIR / _ENTRY_DIR / "meta.json": b'{"looks": "like an entry"}',
        folder / _KEY_DIR / _ENTRY_DIR / "forward.npz": os.urandom(1000),
        folder / _KEY_DIR / ".tmp-stage" / "meta.json": b"{}",
        folder / _KEY_DIR / "legacy" / "meta.json": disk_trust.LEGACY_MAGIC + b"0" * 64 + b"\n{}",
        folder / "k_0123.py": b"# a kernel-shaped name\n",
        folder / "__pycache__" / "k_0123.abc.nbc": b"kernel-shaped",
        folder / "0123.marshal": b"bytecode-shaped",
    }
    for path, data in files.items():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.write_bytes(data)
    for path in [*files, *(p.parent for p in files)]:
        os.utime(path, (_OLD, _OLD))
    (folder / "link").symlink_to(outside / "precious")
    (folder / _KEY_DIR / "linked").symlink_to(outside, target_is_directory=True)
    return files


def _intact(files: dict[Path, bytes], outside: Path | None = None) -> None:
    for path, data in files.items():
        assert path.read_bytes() == data, path
    if outside is not None:
        assert (outside / "precious").read_bytes() == b"outside the cache"


def _own_leftovers(root: disk_trust.Root, folder: Path) -> list[Path]:
    """What an interrupted write of this cache leaves: an old temporary file and staging folder."""
    stale = folder / _KEY_DIR / (disk_trust.temp_prefix(root.key) + "x")
    stage = folder / _KEY_DIR / (disk_trust.temp_prefix(root.key) + "y")
    stale.write_bytes(b"cut short")
    stage.mkdir()
    (stage / "meta.json").write_bytes(b"half")
    for path in (stale, stage / "meta.json", stage):
        os.utime(path, (_OLD, _OLD))
    return [stale, stage]


def test_trim_removes_only_what_the_cache_wrote(root: disk_trust.Root, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    files = _plant(data, tmp_path / "outside")
    step, _ = make_step(data)
    _run(step, steps=1)
    (entry,) = (p for p in data.glob("*/*/meta.json") if p.parent.parent.name != _KEY_DIR)
    leftovers = _own_leftovers(root, data)
    store = disk_cache.open_store("plans", data)
    found = disk_trim.units(root.key, store.directory, "plans")
    assert sorted(found) == sorted(
        ["/".join(entry.parent.parts[-2:]), *(f"{_KEY_DIR}/{p.name}" for p in leftovers)]
    )
    assert disk_trim.trim(root.key, store.budget, 1) > 0
    assert not entry.parent.exists() and not any(p.exists() for p in leftovers)
    _intact(files, tmp_path / "outside")
    assert (data / "link").is_symlink() and (data / _KEY_DIR / "linked").is_symlink()


def test_one_compiled_call_under_a_small_limit_keeps_the_users_files(
    root: disk_trust.Root, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's case: a plans folder holding data/.tmp-big.bin and data/.tmp-work/."""
    monkeypatch.setenv("DUALFLOW_CACHE_MAX_MB", "0.001")  # every entry is over the limit
    monkeypatch.setattr(disk_cache, "_WRITTEN", {})  # the first write of a process trims
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    files = _plant(data, tmp_path / "outside")
    step, _ = make_step(data)
    _run(step, steps=1)
    assert step.stats().cache_stores == 1
    _intact(files, tmp_path / "outside")


def test_clear_and_the_kernel_store_keep_look_alikes(root: disk_trust.Root, tmp_path: Path) -> None:
    kernels = disk_cache.open_store("kernels")
    bytecode = disk_cache.open_store("bytecode")
    mine = [kernels.save("k_77.py", b"x = 1\n"), kernels.save("__pycache__/k_77.ab.nbc", b"1")]
    mine.append(bytecode.save("77.marshal", b"code"))
    files = _plant(root.path / "kernels", tmp_path / "outside")
    files.update(_plant(root.path / "bytecode", tmp_path / "outside2"))
    assert disk_trim.units(root.key, kernels.directory, "kernels").keys() == {"k_77"}
    assert disk_trim.clear(root.key, kernels.budget) > 0
    assert not any(p.exists() for p in mine)
    _intact(files, tmp_path / "outside")
    assert (root.path / disk_trust.KEY_NAME).exists()


def test_a_folder_where_an_entry_goes_is_never_removed(
    root: disk_trust.Root, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    first, _ = make_step(data)
    _run(first, steps=1)
    (entry,) = data.glob("*/*/meta.json")
    for path in entry.parent.iterdir():
        path.unlink()
    users = {entry.parent / name: os.urandom(100) for name in ("meta.json", "forward.npz")}
    for path, payload in users.items():  # the user's own folder with an entry's name
        path.write_bytes(payload)
    second, _ = make_step(data)
    with pytest.warns(RuntimeWarning, match="ignoring cache entry"):
        losses = _run(second, steps=2)
    assert second.stats().cache_loads == 0 and np.isfinite(losses).all()
    assert "not an entry of the plan cache" in second.history[0].cache_note
    _intact(users)


def test_owner_tags_are_bound_to_name_and_key() -> None:
    key = os.urandom(32)
    data = disk_trust.sign(key, "plans/a/b/meta.json", b"{}")
    assert disk_trust.owns(key, "plans/a/b/meta.json", data[: disk_trust.HEADER_BYTES])
    assert not disk_trust.owns(key, "plans/a/c/meta.json", data)
    assert not disk_trust.owns(os.urandom(32), "plans/a/b/meta.json", data)
    assert not disk_trust.is_temp(key, ".tmp-" + "0" * 24 + "-x")
    assert not disk_trust.is_temp(os.urandom(32), disk_trust.temp_prefix(key) + "x")
