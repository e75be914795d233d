"""OS-reported cache sizes (kernels/base/cpu_caches.py) and the convolution chunks sized by them."""

from __future__ import annotations

from pathlib import Path

import pytest

from dualflow.kernels.base import cpu_caches
from dualflow.kernels.conv import channels_first_columns as first
from dualflow.kernels.conv import winograd


def _sysfs(root: Path, levels: dict[str, tuple[str, str]]) -> Path:
    for name, (level, size) in levels.items():
        (root / name).mkdir(parents=True)
        (root / name / "level").write_text(f"{level}\n")
        (root / name / "size").write_text(f"{size}\n")
    return root


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch):
    cpu_caches.l2_bytes.cache_clear()
    yield monkeypatch
    cpu_caches.l2_bytes.cache_clear()


def test_the_level_2_entry_is_read(tmp_path: Path, fresh: pytest.MonkeyPatch) -> None:
    caches = {"index0": ("1", "48K"), "index1": ("1", "32K"), "index2": ("2", "2048K")}
    fresh.setattr(cpu_caches, "CACHES", _sysfs(tmp_path, caches))
    assert cpu_caches.l2_bytes() == 2 << 20


@pytest.mark.parametrize("size", ["huge", "1K", "9999999K", ""])
def test_an_unbelievable_size_leaves_the_default(
    tmp_path: Path, fresh: pytest.MonkeyPatch, size: str
) -> None:
    fresh.setattr(cpu_caches, "CACHES", _sysfs(tmp_path, {"index2": ("2", size)}))
    assert cpu_caches.l2_bytes() == cpu_caches.DEFAULT_L2


def test_no_sysfs_leaves_the_default(tmp_path: Path, fresh: pytest.MonkeyPatch) -> None:
    fresh.setattr(cpu_caches, "CACHES", tmp_path / "absent")
    assert cpu_caches.l2_bytes() == cpu_caches.DEFAULT_L2


def test_winograd_chunks_start_at_two_l2_caches(fresh: pytest.MonkeyPatch) -> None:
    fresh.setattr(winograd, "l2_bytes", lambda: 3 << 20)
    fresh.setattr(winograd, "MIN_CHUNK_BYTES", None)
    assert winograd.chunk_bytes((16, 16), 4) == 6 << 20  # few channels: the floor
    assert winograd.chunk_bytes((256, 256), 4) == winograd.CHUNK_BYTES  # many: the cap
    fresh.setattr(winograd, "MIN_CHUNK_BYTES", 1 << 20)  # a set floor wins
    assert winograd.chunk_bytes((16, 16), 4) == 1 << 20


def test_first_layer_runs_fill_half_an_l2(fresh: pytest.MonkeyPatch) -> None:
    fresh.setattr(first, "l2_bytes", lambda: 1 << 20)
    fresh.setattr(first, "COLUMN_BUDGET", None)
    assert first._runs_of_images(10, 100 << 10) == [(0, 5), (5, 10)]  # 512 KiB: 5 images
    fresh.setattr(first, "COLUMN_BUDGET", 200 << 10)  # a set budget wins
    assert first._runs_of_images(3, 100 << 10) == [(0, 2), (2, 3)]
