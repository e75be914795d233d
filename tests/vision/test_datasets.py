"""Dataset readers on small files written here: IDX, CIFAR binaries, an image folder, digits."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from dualflow.data import DataLoader
from dualflow.vision import datasets, transforms


def write_idx(path: Path, array: np.ndarray, code: int = 0x08) -> None:
    header = bytes([0, 0, code, array.ndim]) + np.array(array.shape, ">u4").tobytes()
    data = header + array.astype(array.dtype.newbyteorder(">")).tobytes()
    if path.suffix == ".gz":
        data = gzip.compress(data)
    path.write_bytes(data)


def test_read_idx_dtypes(tmp_path: Path) -> None:
    floats = np.array([[1.5, -2.0]], np.float32)
    write_idx(tmp_path / "f.idx", floats, code=0x0D)
    out = datasets.read_idx(tmp_path / "f.idx")
    np.testing.assert_array_equal(out, floats)
    assert out.dtype == np.float32 and out.dtype.isnative
    (tmp_path / "bad.idx").write_bytes(b"\x01\x02\x08\x01")
    with pytest.raises(ValueError, match="not an IDX"):
        datasets.read_idx(tmp_path / "bad.idx")


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_mnist_reader(tmp_path: Path, suffix: str) -> None:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (5, 28, 28), dtype=np.uint8)
    labels = np.array([3, 1, 4, 1, 5], np.uint8)
    write_idx(tmp_path / f"t10k-images-idx3-ubyte{suffix}", images)
    write_idx(tmp_path / f"t10k-labels-idx1-ubyte{suffix}", labels)
    ds = datasets.mnist(tmp_path, "test")
    assert len(ds) == 5
    image, label = ds[2]
    np.testing.assert_array_equal(image, images[2])
    assert label == 4
    x, y = next(iter(DataLoader(ds, batch_size=5)))
    assert x.shape == (5, 28, 28) and y.numpy().tolist() == [3, 1, 4, 1, 5]
    with_tf = datasets.mnist(tmp_path, "test", transform=transforms.to_chw)
    assert with_tf[0][0].shape == (1, 28, 28) and not hasattr(with_tf, "get_batch")


def test_mnist_missing_file_says_where(tmp_path: Path) -> None:
    write_idx(tmp_path / "train-images-idx3-ubyte", np.zeros((1, 28, 28), np.uint8))
    with pytest.raises(FileNotFoundError) as info:
        datasets.mnist(tmp_path, "train")
    message = str(info.value)
    assert str(tmp_path / "train-labels-idx1-ubyte[.gz]") in message
    assert "downloads nothing" in message


def cifar_records(labels: list[list[int]], rng: np.random.Generator) -> tuple[bytes, np.ndarray]:
    """Records of label byte(s) + 3072 pixel bytes (R plane, G plane, B plane), and HWC images."""
    chw = rng.integers(0, 256, (len(labels), 3, 32, 32), dtype=np.uint8)
    rows = [np.concatenate([np.array(lab, np.uint8), img.ravel()]) for lab, img in zip(labels, chw)]
    return np.stack(rows).tobytes(), chw.transpose(0, 2, 3, 1)


def test_cifar10_reader(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    folder = tmp_path / "cifar-10-batches-bin"
    folder.mkdir()
    all_images = []
    for i in range(1, 6):
        data, images = cifar_records([[i], [9]], rng)
        (folder / f"data_batch_{i}.bin").write_bytes(data)
        all_images.append(images)
    data, test_images = cifar_records([[7]], rng)
    (folder / "test_batch.bin").write_bytes(data)
    train = datasets.cifar10(tmp_path)
    assert len(train) == 10 and train.classes[9] == "truck"
    np.testing.assert_array_equal(train.labels, [1, 9, 2, 9, 3, 9, 4, 9, 5, 9])
    np.testing.assert_array_equal(train[2][0], all_images[1][0])
    test = datasets.cifar10(folder, "test")  # the batches directory itself works too
    assert test[0][0].shape == (32, 32, 3) and test[0][1] == 7
    np.testing.assert_array_equal(test[0][0], test_images[0])
    (folder / "data_batch_3.bin").unlink()
    with pytest.raises(FileNotFoundError, match=r"data_batch_3\.bin not found"):
        datasets.cifar10(tmp_path)


def test_cifar100_reader_fine_and_coarse(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    folder = tmp_path / "cifar-100-binary"
    folder.mkdir()
    data, images = cifar_records([[4, 40], [19, 99]], rng)
    (folder / "train.bin").write_bytes(data)
    fine = datasets.cifar100(tmp_path)
    np.testing.assert_array_equal(fine.labels, [40, 99])
    np.testing.assert_array_equal(fine[1][0], images[1])
    np.testing.assert_array_equal(datasets.cifar100(tmp_path, label="coarse").labels, [4, 19])
    (folder / "test.bin").write_bytes(data[:100])
    with pytest.raises(ValueError, match="3074-byte records"):
        datasets.cifar100(tmp_path, "test")
    with pytest.raises(FileNotFoundError, match=r"cifar-100-binary\.tar\.gz"):
        datasets.cifar100(tmp_path / "elsewhere", "test")


def test_image_folder(tmp_path: Path) -> None:
    image_mod = pytest.importorskip("PIL.Image")
    colors = {"cat": (255, 0, 0), "dog": (0, 0, 255)}
    for name, color in colors.items():
        (tmp_path / name).mkdir()
        for i in range(2):
            image_mod.new("RGB", (4, 3), color).save(tmp_path / name / f"{i}.png")
    (tmp_path / "dog" / "notes.txt").write_text("not an image")
    ds = datasets.ImageFolder(tmp_path)
    assert ds.classes == ("cat", "dog") and len(ds) == 4
    image, label = ds[3]
    assert image.shape == (3, 4, 3) and image.dtype == np.uint8 and label == 1
    np.testing.assert_array_equal(image[0, 0], colors["dog"])
    gray = datasets.ImageFolder(tmp_path, mode="L", transform=transforms.to_chw)
    assert gray[0][0].shape == (1, 3, 4)
    x, y = next(iter(DataLoader(gray, batch_size=4)))
    assert x.shape == (4, 1, 3, 4) and y.numpy().tolist() == [0, 0, 1, 1]


def test_image_folder_missing_and_empty(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="one subdirectory per class"):
        datasets.ImageFolder(tmp_path / "nope")
    (tmp_path / "empty_class").mkdir()
    with pytest.raises(FileNotFoundError, match=r"<class>/<image>\.png not found"):
        datasets.ImageFolder(tmp_path)


def test_digits_dataset_reuses_load_digits() -> None:
    from dualflow.data import load_digits

    train = datasets.digits("train")
    images, labels = load_digits("train")
    assert len(train) == 1438 and train.classes == tuple("0123456789")
    np.testing.assert_array_equal(train[5][0], images[5])
    assert train[5][1] == labels[5]
    big = datasets.digits("test", transform=lambda x: transforms.resize(x, 32, axes=(1, 2)))
    assert big[0][0].shape == (1, 32, 32)


def test_image_folder_without_pillow_says_how_to_install(tmp_path, monkeypatch) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.png").write_bytes(b"")
    monkeypatch.setitem(__import__("sys").modules, "PIL", None)
    ds = datasets.ImageFolder(tmp_path)  # listing files needs no Pillow; decoding does
    with pytest.raises(ImportError, match=r"pip install 'dualflow\[vision\]'"):
        ds[0]
