"""Reading the arrays of an ``.npz`` checkpoint within a size limit, without numpy's ``np.load``.

A checkpoint that decompresses to gigabytes is refused before anything is read, from the sizes
the zip declares; and since declared sizes can lie, each array's ``.npy`` header must fit the
entry it is in, and no more bytes than it declares are ever decompressed or allocated.
"""

from __future__ import annotations

import zipfile
from typing import Any, BinaryIO

import numpy as np

from dualflow._config import env_number
from dualflow.errors import CheckpointError

DEFAULT_MAX_GB = 4.0  # total uncompressed bytes of one checkpoint, unless told otherwise
MAX_GB_RANGE = 2.0**20  # a petabyte: more is surely a typo


def decompression_limit(given: int | None) -> int:
    """The decompression limit: ``given`` (bytes), else ``$DUALFLOW_CHECKPOINT_MAX_GB`` (GiB),
    else 4 GiB.

    Raises:
        ConfigError: the environment variable is not a finite number in [0, 2**20].
        ValueError: ``given`` is not a non-negative int.

    Example:
        >>> decompression_limit(None) == 4 * 2**30, decompression_limit(10)
        (True, 10)
    """
    if given is not None:
        if isinstance(given, bool) or not isinstance(given, int) or given < 0:
            raise ValueError(f"max_bytes={given!r} must be a non-negative int (bytes)")
        return given
    gigabytes = env_number("DUALFLOW_CHECKPOINT_MAX_GB", DEFAULT_MAX_GB, 0, MAX_GB_RANGE, "GiB")
    return int(gigabytes * 2**30)


class NpzArchive:
    """The arrays of an ``.npz`` by name (``files``, ``archive[name]``), read within ``limit``
    total uncompressed bytes."""

    def __init__(self, source: str | BinaryIO, path: str, limit: int) -> None:
        self.path, self.limit, self.read_bytes = path, limit, 0
        self.zip = zipfile.ZipFile(source)
        self.entries = {info.filename.removesuffix(".npy"): info for info in self.zip.infolist()}
        self.files = list(self.entries)
        declared = sum(info.file_size for info in self.entries.values())
        if declared > limit:
            self.zip.close()
            raise self._too_big(f"declares {declared} bytes uncompressed")

    def __enter__(self) -> NpzArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.zip.close()

    def __contains__(self, name: str) -> bool:
        return name in self.entries

    def _too_big(self, what: str) -> CheckpointError:
        return CheckpointError(
            f"checkpoint {self.path!r} {what}, more than the limit of {self.limit} bytes "
            "(dualflow.load(..., max_bytes=N) or DUALFLOW_CHECKPOINT_MAX_GB raise it)"
        )

    def __getitem__(self, name: str) -> np.ndarray:
        info = self.entries[name]
        with self.zip.open(info) as file:
            shape, fortran, dtype = _header(file)
            if dtype.hasobject:
                raise CheckpointError(f"checkpoint {self.path!r}: array {name!r} holds objects")
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            size = count * dtype.itemsize
            if size > info.file_size:  # the header claims more than the entry holds
                raise CheckpointError(
                    f"checkpoint {self.path!r}: array {name!r} declares {size} bytes in an entry "
                    f"of {info.file_size}"
                )
            if self.read_bytes + size > self.limit:
                raise self._too_big(f"holds over {self.read_bytes + size} bytes of arrays")
            self.read_bytes += size
            data = bytearray(size)
            if file.readinto(memoryview(data)) != size:
                raise CheckpointError(f"checkpoint {self.path!r}: array {name!r} is truncated")
        array = np.frombuffer(data, dtype=dtype, count=count)
        return array.reshape(shape, order="F" if fortran else "C")


def _header(file: Any) -> tuple[tuple[int, ...], bool, np.dtype]:
    version = np.lib.format.read_magic(file)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(file)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(file)
    raise ValueError(f"unsupported .npy format version {version}")
