"""The plan cache played as an attacker would: a constant changed in the plan's JSON or ``.npz``,
a crafted attribute key, an unknown op, truncated files, a FIFO or ``/dev/zero`` named in
``meta["files"]`` or planted as an entry file, an entry linked out of the cache. Each must end in
"entry ignored, result correct, nothing executed" (never a crash or a hang); the entry is then
stored again. "Signed" variants re-sign the tampered file with the user's own key, as if the
signature were bypassed: the checks behind it (verify, regular files only) must still hold."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow.disk_trust import KEY_NAME, sign

X = np.array([0.5, 0.25])


def step(x):
    return (x * 2.0 + dualflow.tensor(np.array([1.0, 4.0]))).exp().sum()


WANT = float(np.exp(X * 2.0 + np.array([1.0, 4.0])).sum())


@pytest.fixture
def plans(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DUALFLOW_CACHE_DIR", str(tmp_path / "cache"))
    first = dualflow.compile(step, cache_dir=tmp_path / "plans")
    assert first(dualflow.tensor(X)).item() == pytest.approx(WANT)
    assert first.stats().cache_stores == 1
    return tmp_path / "plans"


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "payload-ran"


def entry(plans: Path) -> Path:
    (meta,) = plans.glob("*/*/meta.json")
    return meta.parent


@contextlib.contextmanager
def no_hang(seconds: float = 20.0) -> Iterator[None]:
    def expire(*_: Any) -> None:
        raise TimeoutError("the plan cache loader hung")

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def call_again(plans: Path, loads: int = 0) -> Any:
    """A new compiled function on the same cache: correct, loading ``loads`` entries."""
    again = dualflow.compile(step, cache_dir=plans)
    with no_hang():
        assert again(dualflow.tensor(X)).item() == pytest.approx(WANT)
    assert again.stats().cache_loads == loads and again.stats().traces == 1 - loads
    return again


def payload(folder: Path, name: str) -> bytes:
    return (folder / name).read_bytes().split(b"\n", 1)[1]


def write(folder: Path, name: str, data: bytes, signed: bool) -> None:
    if signed:  # with the user's own key, as if the signature had been bypassed
        root = Path(os.environ["DUALFLOW_CACHE_DIR"])
        key = (root / KEY_NAME).read_bytes()
        rel = folder.relative_to(folder.parent.parent)
        data = sign(key, f"plans/{rel}/{name}", data)
    (folder / name).write_bytes(data)


def meta_of(folder: Path) -> dict:
    return json.loads(payload(folder, "meta.json"))


def tamper_meta(folder: Path, change: Any, signed: bool) -> None:
    meta = meta_of(folder)
    change(meta)
    write(folder, "meta.json", json.dumps(meta).encode(), signed)


def ignored_then_rebuilt(plans: Path, marker: Path | None = None, warns: bool = True) -> None:
    if warns:
        with pytest.warns(RuntimeWarning, match="ignoring cache entry"):
            call_again(plans)
    else:
        call_again(plans)
    assert marker is None or not marker.exists()
    call_again(plans, loads=1)  # stored again by the call that traced


def test_changed_constant_in_json(plans: Path) -> None:
    def change(meta: dict) -> None:
        meta["forward"]["nodes"][0][1][1] = [3.0]  # fma(x, 2.0, c) -> fma(x, 3.0, c)

    assert meta_of(entry(plans))["forward"]["nodes"][0][1][1] == [2.0]
    tamper_meta(entry(plans), change, signed=False)
    ignored_then_rebuilt(plans)


def test_changed_constant_in_npz(plans: Path) -> None:
    folder = entry(plans)
    data = bytearray((folder / "forward.npz").read_bytes())
    at = data.rindex(np.float64(4.0).tobytes())  # the constant [1.0, 4.0]
    data[at : at + 8] = np.float64(5.0).tobytes()
    (folder / "forward.npz").write_bytes(bytes(data))
    ignored_then_rebuilt(plans)


@pytest.mark.parametrize("signed", [False, True])
def test_crafted_attribute_key(plans: Path, marker: Path, signed: bool) -> None:
    evil = f"keepdims=False, axis=open({str(marker)!r}, 'w').write('ran') and None"

    def change(meta: dict) -> None:
        meta["forward"]["nodes"][2][3][evil] = 0  # the sum node's attributes

    tamper_meta(entry(plans), change, signed)
    ignored_then_rebuilt(plans, marker)


@pytest.mark.parametrize("signed", [False, True])
def test_unknown_op(plans: Path, signed: bool) -> None:
    def change(meta: dict) -> None:
        meta["forward"]["nodes"][1][0] = "no_such_op"

    tamper_meta(entry(plans), change, signed)
    ignored_then_rebuilt(plans)


@pytest.mark.parametrize("name", ["meta.json", "forward.npz"])
def test_truncated_files(plans: Path, name: str) -> None:
    path = entry(plans) / name
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    ignored_then_rebuilt(plans)


@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("device", ["fifo", "/dev/zero"])
def test_fifo_or_device_named_in_meta_files(
    plans: Path, tmp_path: Path, signed: bool, device: str
) -> None:
    if device == "fifo":
        device = str(tmp_path / "fifo")
        os.mkfifo(device)

    def change(meta: dict) -> None:
        meta["files"][device] = "0" * 64

    tamper_meta(entry(plans), change, signed)
    ignored_then_rebuilt(plans)


@pytest.mark.parametrize("plant", ["fifo", "zero", "big"])
def test_entry_file_replaced_by_fifo_device_or_huge_file(plans: Path, plant: str) -> None:
    meta = entry(plans) / "meta.json"
    meta.unlink()
    if plant == "fifo":
        os.mkfifo(meta)
    elif plant == "zero":
        meta.symlink_to("/dev/zero")
    else:
        with open(meta, "wb") as f:
            f.truncate(65 * 2**20)  # sparse: bigger than any meta.json may be
    ignored_then_rebuilt(plans)


def test_entry_linked_out_of_the_cache(plans: Path, tmp_path: Path) -> None:
    folder = entry(plans)
    outside = tmp_path / "outside"
    shutil.move(folder, outside)
    folder.symlink_to(outside)
    before = sorted(p.name for p in outside.iterdir())
    again = call_again(plans)  # a link is not an entry: skipped unread
    # nor the cache's: left where it is (never followed, never removed), the plan not stored
    assert "not an entry of the plan cache" in again.history[0].cache_note
    assert folder.is_symlink() and sorted(p.name for p in outside.iterdir()) == before


def test_world_writable_plan_folder_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DUALFLOW_CACHE_DIR", str(tmp_path / "cache"))
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # as another user would leave it for us to use
    again = dualflow.compile(step, cache_dir=shared)
    with pytest.warns(RuntimeWarning, match="not using the plans cache"):
        assert again(dualflow.tensor(X)).item() == pytest.approx(WANT)
    assert again.stats().cache_loads == 0 and again.stats().cache_stores == 0
    assert "not used" in again.history[0].cache_note
    assert not list(shared.iterdir())
