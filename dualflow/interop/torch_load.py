"""``load_torch``: read a ``torch.save`` checkpoint (``.pt``/``.pth``) without running its pickle.

The file is a zip: ``<name>/data.pkl`` (the structure, pickled), ``<name>/data/<key>`` (one raw
storage per key), ``<name>/byteorder`` and version entries. Every entry is checked before any is
read: one top folder, no absolute or ``..`` names, stored uncompressed (so a declared size is the
bytes on disk: no zip bombs), bounded in count and size. The pickle is read by
``torch_pickle``'s restricted unpickler; each storage's size in the archive must equal the
element count the pickle declares for it. Nothing is extracted or written anywhere.
"""

from __future__ import annotations

import os
import re
import zipfile
from typing import Any

import numpy as np

from dualflow.errors import CheckpointError
from dualflow.interop.torch_pickle import StorageType, unpickle

PathLike = str | os.PathLike
MAX_ENTRIES = 1_000_000
MAX_PICKLE = 256 * 2**20  # data.pkl of a state dict is kilobytes; a larger one is suspect
_KEY = re.compile(r"[A-Za-z0-9_]{1,64}")


def load_torch(path: PathLike) -> Any:
    """Read a checkpoint written by ``torch.save`` (a state dict, or dicts/lists of tensors).

    Tensors come back as dualflow CPU Tensors (bfloat16 widened to float32), ``OrderedDict`` as
    ``dict`` in the same order. Only tensors, storages, ``OrderedDict``, containers and plain
    values are rebuilt; any other global in the pickle is refused before anything runs.

    Args:
        path: a ``.pt``/``.pth`` file in PyTorch's zip format (the default since PyTorch 1.6).

    Returns:
        The saved structure, e.g. ``{"conv1.weight": Tensor, ...}``.

    Raises:
        CheckpointError: not a zip checkpoint (the legacy format, TorchScript), a refused
            global, an unsafe entry name, a truncated archive, or sizes that disagree.

    Example:
        >>> import os, tempfile, dualflow
        >>> path = os.path.join(tempfile.mkdtemp(), "x.pt")
        >>> _ = open(path, "wb").write(b"not a zip")
        >>> dualflow.load_torch(path)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dualflow.errors.CheckpointError: ...x.pt' is not a PyTorch zip checkpoint...
    """
    path = os.fspath(path)
    try:
        archive = zipfile.ZipFile(path)
    except FileNotFoundError as exc:
        raise CheckpointError(f"checkpoint {path!r} does not exist") from exc
    except (zipfile.BadZipFile, OSError) as exc:
        raise CheckpointError(
            f"{path!r} is not a PyTorch zip checkpoint (torch.save's format since 1.6; save it "
            f"again with a current torch): {exc}"
        ) from exc
    with archive:
        try:
            return _load(archive, path)
        except CheckpointError:
            raise
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:  # truncated / corrupt
            raise CheckpointError(
                f"checkpoint {path!r} is truncated or corrupted: {type(exc).__name__}: {exc}"
            ) from exc


def _load(archive: zipfile.ZipFile, path: str) -> Any:
    entries = _checked_entries(archive, path)
    top = next(iter(entries)).split("/", 1)[0]
    if any(n.startswith(f"{top}/code/") for n in entries):
        raise CheckpointError(f"{path!r} is a TorchScript archive (load it with torch.jit)")
    if f"{top}/data.pkl" not in entries:
        raise CheckpointError(f"{path!r} has no {top}/data.pkl; not a torch.save checkpoint")
    order = entries.get(f"{top}/byteorder")
    big = order is not None and order.file_size <= 16 and archive.read(order).strip() == b"big"
    pickled = entries[f"{top}/data.pkl"]
    if pickled.file_size > MAX_PICKLE:
        raise CheckpointError(f"{path!r}: data.pkl is {pickled.file_size} bytes, over the limit")
    budget = [os.path.getsize(path)]  # entries may overlap in a crafted zip: read no more

    def read_storage(kind: StorageType, key: str, numel: int) -> np.ndarray:
        folder = f"{top}/data/"
        return _read_storage(archive, entries, folder, kind, key, numel, big, path, budget)

    return unpickle(archive.read(pickled), read_storage)


def _checked_entries(archive: zipfile.ZipFile, path: str) -> dict[str, zipfile.ZipInfo]:
    infos = archive.infolist()
    if not infos or len(infos) > MAX_ENTRIES:
        raise CheckpointError(f"{path!r} holds {len(infos)} entries; not a checkpoint")
    tops = {info.filename.split("/", 1)[0] for info in infos}
    entries = {}
    for info in infos:
        name = info.filename
        parts = name.split("/")
        if name.startswith("/") or "\\" in name or ".." in parts or ":" in parts[0]:
            raise CheckpointError(f"{path!r} has an unsafe entry name {name!r} (refused)")
        if info.compress_type != zipfile.ZIP_STORED or info.compress_size != info.file_size:
            raise CheckpointError(
                f"{path!r}: entry {name!r} is compressed; torch.save stores entries "
                "uncompressed (refused: a compressed entry's size cannot be trusted)"
            )
        if name in entries:
            raise CheckpointError(f"{path!r} has the entry {name!r} twice")
        entries[name] = info
    if len(tops) != 1:
        raise CheckpointError(f"{path!r} has entries under several folders {sorted(tops)[:4]}")
    return entries


def _read_storage(
    archive: zipfile.ZipFile,
    entries: dict[str, zipfile.ZipInfo],
    folder: str,
    kind: StorageType,
    key: str,
    numel: int,
    big_endian: bool,
    path: str,
    budget: list[int],
) -> np.ndarray:
    info = entries.get(folder + key) if _KEY.fullmatch(key) else None
    if info is None:
        raise CheckpointError(f"{path!r}: the pickle names storage {key!r}, not in the archive")
    if info.file_size != numel * kind.itemsize:
        raise CheckpointError(
            f"{path!r}: storage {key!r} declares {numel} x {kind.name} "
            f"({numel * kind.itemsize} bytes); the archive holds {info.file_size} bytes"
        )
    budget[0] -= info.file_size
    if budget[0] < 0:  # entries overlapping in a crafted zip could multiply what is read
        raise CheckpointError(f"{path!r}: its storages add up to more bytes than the file holds")
    raw = archive.read(info)  # checks the CRC; ZIP_STORED, so exactly file_size bytes
    if kind.dtype == "bfloat16":  # the high half of a float32: widen exactly
        bits = np.frombuffer(raw, dtype=">u2" if big_endian else "<u2").astype(np.uint32)
        return (bits << 16).view(np.float32)
    dtype = np.dtype(kind.dtype)
    if big_endian:
        dtype = dtype.newbyteorder(">")
    return np.frombuffer(raw, dtype=dtype).astype(dtype.newbyteorder("="))
