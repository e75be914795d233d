"""Checkpoint loading within a decompression limit (declared sizes checked first, each array's
own header checked against its entry while reading), and a full disk at save: CheckpointError,
the previous checkpoint and the folder as they were."""

from __future__ import annotations

import errno
import io
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

import dualflow
from dualflow import serialization
from dualflow.errors import CheckpointError, ConfigError
from dualflow.training.checkpoint import load_checkpoint


def _recompress(path: Path, replace: dict[str, bytes] | None = None) -> None:
    """Rewrite a checkpoint deflated (a zip bomb of zeros), with some entries replaced."""
    with zipfile.ZipFile(path) as source:
        entries = {info.filename: source.read(info) for info in source.infolist()}
    entries.update(replace or {})
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as target:
        for name, data in entries.items():
            target.writestr(name, data)


def test_a_checkpoint_decompressing_beyond_the_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "bomb.npz"
    dualflow.save({"w": np.zeros(2**18)}, path)  # 2 MiB of zeros
    _recompress(path)
    assert path.stat().st_size < 20_000
    with pytest.raises(CheckpointError, match=r"declares \d+ bytes uncompressed, more than the"):
        dualflow.load(path, max_bytes=2**20)
    monkeypatch.setenv("DUALFLOW_CHECKPOINT_MAX_GB", str(1 / 1024))
    with pytest.raises(CheckpointError, match="DUALFLOW_CHECKPOINT_MAX_GB"):
        load_checkpoint(path)
    monkeypatch.delenv("DUALFLOW_CHECKPOINT_MAX_GB")
    np.testing.assert_array_equal(dualflow.load(path)["w"], np.zeros(2**18))  # default: 4 GiB


def test_an_array_header_larger_than_its_entry_is_refused(tmp_path: Path) -> None:
    """The zip's declared sizes may lie: an .npy header claiming 8 TB in a small entry."""
    path = tmp_path / "liar.npz"
    dualflow.save({"w": np.zeros(8)}, path)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (10**12,)}
    )
    with zipfile.ZipFile(path) as source:
        (name,) = (n for n in source.namelist() if not n.startswith("__manifest__"))
    _recompress(path, {name: header.getvalue() + bytes(64)})
    with pytest.raises(CheckpointError, match=r"declares 8000000000000 bytes in an entry of"):
        dualflow.load(path)


def test_arrays_read_exactly_as_numpy_reads_them(tmp_path: Path) -> None:
    path = tmp_path / "ok.npz"
    state = {
        "f": np.asfortranarray(np.arange(12.0).reshape(3, 4)),
        "s": np.float32(2.5),
        "e": np.zeros((0, 3), np.int8),
        "t": dualflow.tensor([[1.0, 2.0]], requires_grad=True),
    }
    dualflow.save(state, path)
    got = dualflow.load(path, max_bytes=10_000)
    for key in ("f", "e"):
        np.testing.assert_array_equal(got[key], state[key])
        assert got[key].dtype == state[key].dtype and got[key].flags.writeable
    assert got["s"] == np.float32(2.5) and got["t"].requires_grad
    with pytest.raises(CheckpointError, match="more than the limit of 100 bytes"):
        dualflow.load(path, max_bytes=100)


def test_bad_limits_name_the_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "c.npz"
    dualflow.save({"a": 1}, path)
    with pytest.raises(ValueError, match="max_bytes=-1 must be a non-negative int"):
        dualflow.load(path, max_bytes=-1)
    monkeypatch.setenv("DUALFLOW_CHECKPOINT_MAX_GB", "inf")
    with pytest.raises(ConfigError, match="DUALFLOW_CHECKPOINT_MAX_GB='inf'"):
        dualflow.load(path)


def test_a_full_disk_is_a_checkpoint_error_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ckpt.npz"
    dualflow.save({"step": 1}, path)
    before = path.read_bytes()

    def full(file, arrays):
        file.write(b"PK\x03\x04 part of it")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(serialization, "_write_npz", full)
    with pytest.raises(CheckpointError, match="No space left on device") as caught:
        dualflow.save({"step": 2}, path)
    assert caught.value.__cause__.errno == errno.ENOSPC
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["ckpt.npz"]
    with pytest.raises(CheckpointError, match="cannot write checkpoint to"):
        dualflow.save({"step": 2}, io.BytesIO())  # a file object the caller opened
