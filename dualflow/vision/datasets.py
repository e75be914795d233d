"""Image datasets read from local files: MNIST IDX, CIFAR-10/100 binary, image folders, digits.

Nothing is downloaded: a missing file raises ``FileNotFoundError`` saying which file to put
where. Items are ``(image, label)``; images are HWC (or HW) uint8 unless a ``transform`` is given.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from dualflow.data.digits import load_digits

Transform = Callable[[Any], Any] | None

_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".ppm", ".pgm", ".tif", ".tiff")
CIFAR10_CLASSES = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)
_MNIST_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
_CIFAR_RECORD = 32 * 32 * 3


class ImageDataset:
    """Images and integer labels held in memory; ``transform`` is applied per item.

    Without a transform, ``get_batch`` hands whole batches to ``DataLoader`` at once.

    Example:
        >>> ds = ImageDataset(np.zeros((3, 2, 2), np.uint8), np.array([0, 1, 1]))
        >>> len(ds), ds[1][1], hasattr(ds, "get_batch")
        (3, np.int64(1), True)
    """

    def __init__(
        self,
        images: np.ndarray,
        labels: np.ndarray,
        transform: Transform = None,
        classes: tuple[str, ...] | None = None,
    ) -> None:
        if len(images) != len(labels):
            raise ValueError(f"{len(images)} images but {len(labels)} labels")
        self.images, self.labels = images, np.asarray(labels, dtype=np.int64)
        self.transform, self.classes = transform, classes

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[Any, np.int64]:
        image = self.images[index]
        return (self.transform(image) if self.transform else image), self.labels[index]

    def __getattr__(self, name: str) -> Any:
        # Batch fetching would skip the per-item transform, so it exists only without one.
        if name == "get_batch" and self.__dict__.get("transform") is None:
            return lambda indices: (self.images[indices], self.labels[indices])
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")


def _missing(what: str, path: Path, hint: str) -> FileNotFoundError:
    return FileNotFoundError(
        f"{what}: {path} not found. dualflow downloads nothing; {hint} (directory: {path.parent})"
    )


def read_idx(path: str | Path) -> np.ndarray:
    """An array from an IDX file (the MNIST format), gzipped (``.gz``) or not.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: the header is not IDX or the data does not match its shape.

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "a.idx")
        >>> _ = open(path, "wb").write(bytes([0, 0, 8, 1, 0, 0, 0, 2, 7, 9]))
        >>> read_idx(path)
        array([7, 9], dtype=uint8)
    """
    path = Path(path)
    if not path.is_file():
        raise _missing("read_idx", path, "put the IDX file there")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] or data[1] or data[2] not in _IDX_DTYPES:
        raise ValueError(f"read_idx: {path} is not an IDX file (bad magic {data[:4]!r})")
    ndim = data[3]
    shape = tuple(int(d) for d in np.frombuffer(data, ">u4", count=ndim, offset=4))
    dtype = np.dtype(_IDX_DTYPES[data[2]])
    body = data[4 + 4 * ndim :]
    if len(body) != int(np.prod(shape)) * dtype.itemsize:
        raise ValueError(f"read_idx: {path} holds {len(body)} data bytes, header says {shape}")
    return np.frombuffer(body, dtype).reshape(shape).astype(dtype.newbyteorder("="))


def _find(root: Path, name: str, what: str, hint: str) -> Path:
    for candidate in (root / name, root / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    raise _missing(what, root / f"{name}[.gz]", hint)


def mnist(root: str | Path, split: str = "train", transform: Transform = None) -> ImageDataset:
    """MNIST (or Fashion-MNIST) from its four IDX files in ``root``, gzipped or not.

    Args:
        root: the directory holding e.g. ``train-images-idx3-ubyte.gz``.
        split: ``"train"`` or ``"test"`` (the ``t10k-*`` files).
        transform: applied to each ``(28, 28)`` uint8 image.

    Raises:
        FileNotFoundError: a file is missing (the message names it and the directory).

    Example:
        >>> mnist("/nonexistent")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        FileNotFoundError: MNIST train images: .../train-images-idx3-ubyte[.gz] not found...
    """
    if split not in _MNIST_FILES:
        raise ValueError(f"mnist: split must be 'train' or 'test', got {split!r}")
    root = Path(root)
    hint = "copy the MNIST IDX files (from the MNIST distribution) into that directory"
    image_name, label_name = _MNIST_FILES[split]
    images = read_idx(_find(root, image_name, f"MNIST {split} images", hint))
    labels = read_idx(_find(root, label_name, f"MNIST {split} labels", hint))
    return ImageDataset(images, labels, transform, tuple(str(i) for i in range(10)))


def _cifar_dir(root: Path, folder: str) -> Path:
    return root / folder if (root / folder).is_dir() else root


def _read_cifar(path: Path, label_bytes: int, what: str, hint: str) -> np.ndarray:
    if not path.is_file():
        raise _missing(what, path, hint)
    raw = np.fromfile(path, dtype=np.uint8)
    record = label_bytes + _CIFAR_RECORD
    if raw.size % record:
        raise ValueError(f"{what}: {path} is not a multiple of {record}-byte records")
    return raw.reshape(-1, record)


def _cifar_images(records: np.ndarray, label_bytes: int) -> np.ndarray:
    # Stored as planes (R, G, B) of 32×32, row-major: CHW per image, turned to HWC here.
    chw = records[:, label_bytes:].reshape(-1, 3, 32, 32)
    return np.ascontiguousarray(chw.transpose(0, 2, 3, 1))


def cifar10(root: str | Path, split: str = "train", transform: Transform = None) -> ImageDataset:
    """CIFAR-10 from the binary version (``cifar-10-batches-bin/data_batch_1.bin`` ...).

    Args:
        root: the directory holding ``cifar-10-batches-bin/`` (or the ``.bin`` files directly).
        split: ``"train"`` (``data_batch_1..5.bin``) or ``"test"`` (``test_batch.bin``).
        transform: applied to each ``(32, 32, 3)`` uint8 image.

    Raises:
        FileNotFoundError: a batch file is missing (the message names it).

    Example:
        >>> cifar10("/nonexistent", "test")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        FileNotFoundError: CIFAR-10 test: /nonexistent/test_batch.bin not found...
    """
    names = {"train": [f"data_batch_{i}.bin" for i in range(1, 6)], "test": ["test_batch.bin"]}
    if split not in names:
        raise ValueError(f"cifar10: split must be 'train' or 'test', got {split!r}")
    folder = _cifar_dir(Path(root), "cifar-10-batches-bin")
    hint = "extract cifar-10-binary.tar.gz (the 'binary version' of CIFAR-10) there"
    what = f"CIFAR-10 {split}"
    records = np.concatenate([_read_cifar(folder / n, 1, what, hint) for n in names[split]])
    return ImageDataset(_cifar_images(records, 1), records[:, 0], transform, CIFAR10_CLASSES)


def cifar100(
    root: str | Path, split: str = "train", transform: Transform = None, label: str = "fine"
) -> ImageDataset:
    """CIFAR-100 from the binary version (``cifar-100-binary/train.bin``, ``test.bin``).

    Args:
        root: the directory holding ``cifar-100-binary/`` (or ``train.bin``/``test.bin``).
        split: ``"train"`` or ``"test"``.
        transform: applied to each ``(32, 32, 3)`` uint8 image.
        label: ``"fine"`` (100 classes) or ``"coarse"`` (20 superclasses).

    Raises:
        FileNotFoundError: the file is missing (the message names it).

    Example:
        >>> cifar100("/nonexistent")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        FileNotFoundError: CIFAR-100 train: /nonexistent/train.bin not found...
    """
    if split not in ("train", "test") or label not in ("fine", "coarse"):
        raise ValueError(f"cifar100: bad split {split!r} or label {label!r}")
    folder = _cifar_dir(Path(root), "cifar-100-binary")
    hint = "extract cifar-100-binary.tar.gz (the 'binary version' of CIFAR-100) there"
    records = _read_cifar(folder / f"{split}.bin", 2, f"CIFAR-100 {split}", hint)
    labels = records[:, 1 if label == "fine" else 0]  # each record: coarse byte, fine byte
    return ImageDataset(_cifar_images(records, 2), labels, transform)


def _pil_image() -> Any:
    try:
        from PIL import Image  # noqa: PLC0415 - optional dependency, only image folders need it
    except ImportError as exc:
        raise ImportError(
            "ImageFolder needs Pillow: pip install 'dualflow[vision]' (or pip install pillow)"
        ) from exc
    return Image


class ImageFolder:
    """Images in ``root/<class name>/<file>``; classes sorted by name get labels 0, 1, ...

    Files are decoded lazily with Pillow, one per item, to HWC uint8 (``mode="RGB"``), HW
    (``"L"``) or the file's own mode (``None``).

    Raises:
        FileNotFoundError: ``root`` is missing or holds no class directory with images.

    Example:
        >>> ImageFolder("/nonexistent")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        FileNotFoundError: ImageFolder: /nonexistent not found...
    """

    def __init__(self, root: str | Path, transform: Transform = None, mode: str | None = "RGB"):
        self.root, self.transform, self.mode = Path(root), transform, mode
        hint = "put one subdirectory per class there, holding that class's images"
        if not self.root.is_dir():
            raise _missing("ImageFolder", self.root, hint)
        dirs = sorted(d for d in self.root.iterdir() if d.is_dir())
        self.classes = tuple(d.name for d in dirs)
        self.samples = [
            (path, label)
            for label, d in enumerate(dirs)
            for path in sorted(d.iterdir())
            if path.suffix.lower() in IMAGE_EXTENSIONS
        ]
        if not self.samples:
            raise _missing("ImageFolder images", self.root / "<class>" / "<image>.png", hint)

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[Any, np.int64]:
        path, label = self.samples[index]
        with _pil_image().open(path) as img:
            array = np.asarray(img.convert(self.mode) if self.mode else img)
        return (self.transform(array) if self.transform else array), np.int64(label)


def digits(split: str = "train", transform: Transform = None) -> ImageDataset:
    """The embedded 8×8 digits (``dualflow.data.load_digits``): CHW float images in [0, 1].

    Args:
        split: ``"train"`` (1,438), ``"test"`` (359) or ``"all"`` (1,797).
        transform: applied to each ``(1, 8, 8)`` float32 image.

    Example:
        >>> ds = digits("test")
        >>> len(ds), ds[0][0].shape, ds.classes[3]
        (359, (1, 8, 8), '3')
    """
    images, labels = load_digits(split)
    return ImageDataset(images, labels, transform, tuple(str(i) for i in range(10)))
