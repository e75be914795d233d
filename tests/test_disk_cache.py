"""The cache location and its trust rules: owner-only root (never a shared temp folder by default),
foreign or group/world-writable folders and entries refused with one warning and the run goes on
without them, a private key, the size limit (least recently used entries go first) and
``dualflow cache info|clear``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dualflow import _config, cache_cli, disk_cache, disk_trim, disk_trust
from dualflow.runtime import bytecode_cache

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
OTHER_UID = 54321


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DUALFLOW_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _big_source(n: int) -> str:
    return "def run(x):\n" + "".join(f"    v{i} = x + {i}\n" for i in range(n)) + "    return x\n"


def test_default_location_is_the_users_cache_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DUALFLOW_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _config.cache_dir() == tmp_path / "xdg" / "dualflow"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # invalid per the XDG spec
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert _config.cache_dir() == tmp_path / "home" / ".cache" / "dualflow"
    made = disk_trust.trusted_root(_config.cache_dir())
    assert made is not None and (made.path.stat().st_mode & 0o777) == 0o700
    assert (made.path / disk_trust.KEY_NAME).stat().st_mode & 0o777 == 0o600


def _refused(root: Path, match: str) -> None:
    with pytest.warns(RuntimeWarning, match=f"not using the disk cache at {root}: .*{match}"):
        assert disk_trust.trusted_root(root) is None
    # the run goes on without a cache: compiles work, nothing is written there
    assert bytecode_cache.compile_plan(_big_source(400), "<p>") is not None
    assert not (root / "bytecode").exists()


def test_world_writable_root_is_refused(root: Path) -> None:
    root.mkdir(mode=0o700)
    os.chmod(root, 0o777)  # as another user pre-creating it in /tmp would leave it
    _refused(root, "writable by group or others")


def test_group_writable_parent_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parent = tmp_path / "shared"
    parent.mkdir()
    os.chmod(parent, 0o775)
    monkeypatch.setenv("DUALFLOW_CACHE_DIR", str(parent / "cache"))
    _refused(parent / "cache", f"{parent} is writable by group or others")


def test_sticky_world_writable_parent_is_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = tmp_path / "tmp"
    parent.mkdir()
    os.chmod(parent, 0o1777)  # like /tmp: others cannot rename what is ours
    assert disk_trust.trusted_root(parent / "cache") is not None


@ROOT_ONLY
def test_foreign_root_is_refused(root: Path) -> None:
    root.mkdir(mode=0o700)
    os.chown(root, OTHER_UID, OTHER_UID)
    _refused(root, f"owned by uid {OTHER_UID}")


@ROOT_ONLY
def test_foreign_entry_is_ignored_and_replaced(root: Path) -> None:
    source = _big_source(400)
    bytecode_cache.compile_plan(source, "<p>")
    (path,) = (root / "bytecode").glob("*.marshal")
    os.chown(path, OTHER_UID, OTHER_UID)
    with pytest.warns(RuntimeWarning, match=f"owned by uid {OTHER_UID}"):
        bytecode_cache.compile_plan(source, "<p>")
    assert path.stat().st_uid == os.geteuid()  # rewritten by its owner


def test_world_writable_entry_and_plans_folder_are_refused(tmp_path: Path, root: Path) -> None:
    source = _big_source(400)
    bytecode_cache.compile_plan(source, "<p>")
    (path,) = (root / "bytecode").glob("*.marshal")
    os.chmod(path, 0o666)
    with pytest.warns(RuntimeWarning, match="writable by group or others"):
        bytecode_cache.compile_plan(source, "<p>")
    plans = tmp_path / "plans"
    plans.mkdir()
    os.chmod(plans, 0o777)
    with pytest.warns(RuntimeWarning, match="not using the plans cache"):
        assert disk_cache.open_store("plans", plans) is None


def test_key_readable_by_others_is_refused_and_a_damaged_key_replaced(root: Path) -> None:
    first = disk_trust.trusted_root(root)
    key = root / disk_trust.KEY_NAME
    os.chmod(key, 0o644)
    with pytest.raises(disk_trust.Untrusted, match="readable by others"):
        disk_trust.load_key(root)
    os.chmod(key, 0o600)
    key.write_bytes(b"short")  # cut by a full disk
    new, _ = disk_trust.load_key(root)
    assert len(new) == 32 and new != first.key


def test_reads_refuse_links_fifos_and_devices(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "link").symlink_to("/etc/passwd")
    for path, why in ((fifo, "not a regular file"), ("/dev/zero", "not a regular file")):
        with pytest.raises(disk_trust.Untrusted, match=why):  # and no wait on the FIFO
            disk_trust.read_regular(path, 100, own=False)
    with pytest.raises(disk_trust.Untrusted, match="cannot be opened safely"):
        disk_trust.read_regular(tmp_path / "link", 100, own=False)
    big = tmp_path / "big"
    big.write_bytes(b"x" * 101)
    with pytest.raises(disk_trust.Untrusted, match="more than 100"):
        disk_trust.read_regular(big, 100, own=False)


def test_least_recently_used_entries_go_beyond_the_limit(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DUALFLOW_CACHE_MAX_MB", str(60_000 / 2**20))  # ~60 KB
    sources = [_big_source(400 + i) for i in range(12)]  # ~9 KB of bytecode each
    bytecode_cache.compile_plan(sources[0], "<p>")
    (oldest,) = (root / "bytecode").glob("*.marshal")
    for source in sources[1:]:
        os.utime(oldest, ns=(time.time_ns(), oldest.stat().st_mtime_ns))  # in use: kept
        time.sleep(0.002)
        bytecode_cache.compile_plan(source, "<p>")
        store = disk_cache.open_store("bytecode")
        # what a write does now and then
        disk_trim.trim(store.root.key, store.budget, _config.cache_limit())
    total = sum(p.stat().st_size for p in (root / "bytecode").glob("*.marshal"))
    assert total <= 60_000 and oldest.exists()
    assert len(list((root / "bytecode").glob("*.marshal"))) < len(sources)
    assert (root / disk_trust.KEY_NAME).exists()  # the key is never trimmed


def test_cache_info_and_clear(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    bytecode_cache.compile_plan(_big_source(400), "<p>")
    keep = tmp_path / "plans" / "notes.txt"  # not a cache entry: clear leaves it
    keep.parent.mkdir(mode=0o700)
    keep.write_text("mine")
    monkeypatch.setenv("DUALFLOW_PLAN_CACHE", str(keep.parent))
    assert cache_cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert f"cache root: {root}" in out and "bytecode       1 entries" in out
    assert "plans ($DUALFLOW_PLAN_CACHE)" in out
    assert cache_cli.main(["clear"]) == 0
    assert not list((root / "bytecode").glob("*.marshal")) and keep.exists()
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    done = subprocess.run(
        [sys.executable, "-m", "dualflow", "cache", "info"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0 and "0 entries" in done.stdout


def test_signed_entries_are_bound_to_their_name() -> None:
    key = np.random.default_rng(0).bytes(32)
    data = disk_trust.sign(key, "bytecode/a.marshal", b"payload")
    assert disk_trust.verify(key, "bytecode/a.marshal", data) == b"payload"
    assert disk_trust.verify(key, "bytecode/b.marshal", data) is None
    assert disk_trust.verify(key, "bytecode/a.marshal", data[:-1] + b"X") is None
    assert disk_trust.verify(os.urandom(32), "bytecode/a.marshal", data) is None
