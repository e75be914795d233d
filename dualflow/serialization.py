"""``save`` / ``load``: checkpoints of nested state dicts as one ``.npz`` without pickle.

Every array goes under a generated key; a JSON manifest (stored as a uint8 array) records the
nested structure and which leaves are Tensors, numpy arrays or plain Python values. Writes go to
a temporary file in the same directory and are renamed into place, so a crash never leaves a
half-written checkpoint (DESIGN §9).
"""

from __future__ import annotations

import io
import json
import os
import re
import socket
import tempfile
import time
import warnings
from typing import Any, BinaryIO

import numpy as np

from dualflow.checkpoint_reader import NpzArchive, decompression_limit
from dualflow.device import get_array_module, send
from dualflow.errors import CheckpointError
from dualflow.tensor.core import Tensor

_MANIFEST_KEY = "__manifest__"
_FORMAT = "dualflow-checkpoint"
_VERSION = 1
_ZIP_SIGNATURE = b"PK\x03\x04"  # a local file header: every non-empty zip starts with one
_PLAIN = (bool, int, float, str, type(None))
PathLike = str | os.PathLike


# ----- save ----------------------------------------------------------------------------------
def save(obj: Any, path: PathLike | BinaryIO) -> None:
    """Write ``obj`` (nested dicts/lists/tuples of Tensors, arrays and plain values) to ``path``.

    The whole structure is checked before anything is written; the file appears atomically.
    ``path`` may also be a binary file object opened by the caller (``torch.save(sd, f)``): the
    checkpoint is written to it at its position (atomic only as far as the caller makes it).

    Args:
        obj: e.g. ``{"model": model.state_dict(), "optim": opt.state_dict(), "step": 10}``.
            Dict keys must be ``str`` or ``int``; leaves must be Tensors, numpy arrays or
            numpy scalars, or ``bool``/``int``/``float``/``str``/``None``.
        path: the file to write (used as given: no ``.npz`` suffix is added), or a writable
            binary file object.

    Raises:
        TypeError: a leaf or key of an unsupported type, naming its key path.
        CheckpointError: the file could not be written (e.g. the directory does not exist).

    Example:
        >>> import os, tempfile, dualflow
        >>> path = os.path.join(tempfile.mkdtemp(), "ckpt.npz")
        >>> dualflow.save({"w": dualflow.tensor([1.0, 2.0]), "step": 3}, path)
        >>> dualflow.load(path)["step"]
        3
    """
    arrays: dict[str, np.ndarray] = {}
    root = _encode(obj, "<root>", arrays, set())
    manifest = {"format": _FORMAT, "version": _VERSION, "root": root}
    text = json.dumps(manifest, allow_nan=True, separators=(",", ":"))
    arrays[_MANIFEST_KEY] = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    if hasattr(path, "write"):
        try:
            _write_npz(path, arrays)
        except OSError as exc:
            where = getattr(path, "name", "<file object>")
            raise CheckpointError(f"cannot write checkpoint to {where!r}: {exc}") from exc
        return
    _atomic_write(os.fspath(path), arrays)


def _write_npz(file: BinaryIO, arrays: dict[str, np.ndarray]) -> None:
    # A seam of its own so tests can make the write fail halfway.
    np.savez(file, **arrays)


def _atomic_write(path: str, arrays: dict[str, np.ndarray]) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    remove_stale_temporaries(path)
    try:
        fd, tmp = tempfile.mkstemp(
            dir=directory, prefix=f"{temp_prefix(path)}{_HOST}-{os.getpid()}.", suffix=".tmp"
        )
    except OSError as exc:
        raise CheckpointError(f"cannot write checkpoint {path!r}: {exc}") from exc
    try:
        with os.fdopen(fd, "wb") as file:
            _write_npz(file, arrays)
            file.flush()
            os.fsync(file.fileno())  # the rename must not publish data still in the page cache
        os.replace(tmp, path)
    except BaseException as exc:
        if os.path.exists(tmp):
            os.remove(tmp)
        if isinstance(exc, OSError):  # a full disk, a quota, an I/O error: what save promises
            raise CheckpointError(f"cannot write checkpoint {path!r}: {exc}") from exc
        raise


# A temporary is ".<name>.<host>-<pid>.<mkstemp's 8 characters>.tmp": the next save of the same
# checkpoint removes those a crashed or killed writer left (43 files after 60 kills otherwise).
_HOST = "".join(c if c.isalnum() else "_" for c in socket.gethostname())[:64] or "host"
_RANDOM = re.compile(r"[a-z0-9_]{8}")
STALE_SECONDS = 900.0  # a temporary whose writer cannot be asked is stale after this long


def temp_prefix(path: str) -> str:
    """What every temporary of checkpoint ``path`` starts with (in its directory).

    Example:
        >>> temp_prefix("/runs/ckpt.npz")
        '.ckpt.npz.'
    """
    return f".{os.path.basename(path)}."


def remove_stale_temporaries(path: str) -> list[str]:
    """Remove temporaries of checkpoint ``path`` left by writers that died; returns them.

    Only names this module gives ``path``'s temporaries are considered. One written on this
    host is removed when its writer process no longer exists; one from another host (or from an
    older dualflow, without a writer) when unmodified for ``STALE_SECONDS``. A save in progress
    elsewhere is never touched: its writer lives, and it keeps modifying its file.

    Example:
        >>> import tempfile
        >>> remove_stale_temporaries(os.path.join(tempfile.mkdtemp(), "ckpt.npz"))
        []
    """
    directory, prefix = os.path.dirname(os.path.abspath(path)), temp_prefix(path)
    removed = []
    try:
        entries = [e for e in os.scandir(directory) if e.name.startswith(prefix)]
    except OSError:
        return removed
    for entry in entries:
        middle = entry.name[len(prefix) :]
        if not middle.endswith(".tmp") or not _is_stale(middle[: -len(".tmp")], entry):
            continue
        try:
            os.remove(entry.path)
            removed.append(entry.path)
        except OSError:
            pass  # removed meanwhile by another save, or not ours to remove
    return removed


def _is_stale(middle: str, entry: os.DirEntry) -> bool:
    writer, dot, random = middle.rpartition(".")
    host, dash, pid = writer.rpartition("-")
    if not _RANDOM.fullmatch(random if dot else middle):
        return False  # not a temporary of this checkpoint (another file sharing the prefix)
    if dot and dash and host == _HOST and pid.isdigit():
        return not _alive(int(pid))
    if dot and not (dash and pid.isdigit()):
        return False
    try:
        return time.time() - entry.stat().st_mtime > STALE_SECONDS
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def _encode(obj: Any, where: str, arrays: dict[str, np.ndarray], active: set[int]) -> Any:
    """Return the manifest node for ``obj``; arrays are added to ``arrays`` under fresh keys."""
    if isinstance(obj, dict | list | tuple):
        if id(obj) in active:
            raise ValueError(f"dualflow.save: {where} contains itself (a reference cycle)")
        active.add(id(obj))
        try:
            return _encode_container(obj, where, arrays, active)
        finally:
            active.discard(id(obj))
    if isinstance(obj, Tensor):
        key = _add_array(send(obj.array, "cpu"), where, arrays)
        return {"t": "tensor", "key": key, "requires_grad": bool(obj.requires_grad)}
    if isinstance(obj, np.ndarray):
        return {"t": "ndarray", "key": _add_array(obj, where, arrays)}
    if isinstance(obj, np.generic):
        return {"t": "npscalar", "key": _add_array(np.asarray(obj), where, arrays)}
    if isinstance(obj, _PLAIN):
        return {"t": "value", "v": obj}
    if type(obj).__module__.startswith("cupy"):
        return {"t": "ndarray", "key": _add_array(send(obj, "cpu"), where, arrays)}
    hint = " (save its .state_dict() instead)" if hasattr(obj, "state_dict") else ""
    raise TypeError(
        f"dualflow.save: cannot save a value of type {type(obj).__name__} at {where}{hint}; "
        "supported leaves are Tensor, numpy array/scalar, bool, int, float, str and None"
    )


def _encode_container(obj: Any, where: str, arrays: dict[str, np.ndarray], active: set[int]) -> Any:
    if isinstance(obj, dict):
        items = []
        for key, value in obj.items():
            if isinstance(key, bool) or not isinstance(key, str | int):
                raise TypeError(
                    f"dualflow.save: dict key {key!r} at {where} has type {type(key).__name__}; "
                    "only str and int keys can be saved"
                )
            items.append([key, _encode(value, f"{where}[{key!r}]", arrays, active)])
        return {"t": "dict", "items": items}
    kind = "list" if isinstance(obj, list) else "tuple"
    return {
        "t": kind,
        "items": [_encode(v, f"{where}[{i}]", arrays, active) for i, v in enumerate(obj)],
    }


def _add_array(array: np.ndarray, where: str, arrays: dict[str, np.ndarray]) -> str:
    if array.dtype.hasobject:
        raise TypeError(
            f"dualflow.save: the array at {where} has dtype object, which cannot be saved "
            "without pickle; convert it to a numeric dtype"
        )
    key = f"a{len(arrays)}"
    arrays[key] = array
    return key


# ----- loading into existing tensors ------------------------------------------------------------
def check_cast(value: Any, dtype: Any, where: str) -> None:
    """Raise CheckpointError if storing ``value`` in a ``dtype`` tensor would change it beyond
    rounding: a finite number overflowing to inf (float64 1e300 into float32), a fraction, NaN
    or out-of-range number into an integer (``num_batches_tracked``), an imaginary part dropped.

    Example:
        >>> check_cast(np.array([1e300]), "float64", "w")
        >>> check_cast(np.array([1.5]), "float32", "w")  # rounding is fine
        >>> check_cast(np.array([1e300]), "float32", "w")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dualflow.errors.CheckpointError: w: the saved float64 value 1e+300 would become inf ...
    """
    source, target = np.dtype(value.dtype), np.dtype(dtype)
    if np.can_cast(source, target, "safe"):
        return
    xp = get_array_module(value)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy's ComplexWarning: the check below says it
        cast = value.astype(target)
        if target.kind in "iub":  # must round-trip exactly (NaN never does)
            bad = cast.astype(source) != value
        else:  # floating or complex: only overflow (and a lost imaginary part) is lossy
            bad = xp.isfinite(value) & ~xp.isfinite(cast)
            if source.kind == "c" and target.kind != "c":
                bad = bad | (value.imag != 0)
    if not bool(bad.any()):
        return
    index = tuple(int(i) for i in xp.argwhere(xp.asarray(bad))[0])
    raise CheckpointError(
        f"{where}: the saved {source} value {value[index].item()!r} would become "
        f"{cast[index].item()!r} in this {target} tensor; refusing a lossy load (fix the value, "
        f"or load it into a {source} tensor)"
    )


# ----- load ----------------------------------------------------------------------------------
def load(path: PathLike | BinaryIO, max_bytes: int | None = None) -> Any:
    """Read a checkpoint written by :func:`save`; tensor leaves come back as CPU Tensors.

    Args:
        path: the checkpoint file, or a readable binary file object positioned at one (read to
            its end into memory first, then verified as a file is).
        max_bytes: the most bytes its arrays may take once decompressed (default
            ``$DUALFLOW_CHECKPOINT_MAX_GB`` GiB, else 4 GiB): checked against the sizes the
            archive declares before reading, and against each array while it is read.

    Returns:
        The saved structure: dicts, lists and tuples as saved, Tensors (with their
        ``requires_grad`` flag), numpy arrays, numpy scalars and plain Python values.

    Raises:
        CheckpointError: the file is missing, truncated, corrupted, not an ``.npz``, has no
            dualflow manifest or is larger than ``max_bytes`` uncompressed; the message names
            the file and the problem.

    Example:
        >>> import os, tempfile, numpy as np, dualflow
        >>> path = os.path.join(tempfile.mkdtemp(), "ckpt.npz")
        >>> dualflow.save({"xs": [np.arange(3), None]}, path)
        >>> dualflow.load(path)
        {'xs': [array([0, 1, 2]), None]}
    """
    limit = decompression_limit(max_bytes)
    if hasattr(path, "read"):
        source: Any = io.BytesIO(path.read())
        path = str(getattr(path, "name", "<file object>"))
        signature = source.getvalue()[:4]
    else:
        source = path = os.fspath(path)
        if not os.path.isfile(path):
            raise CheckpointError(f"checkpoint {path!r} does not exist (or is not a file)")
        with open(path, "rb") as file:
            signature = file.read(4)
    if signature != _ZIP_SIGNATURE:
        raise CheckpointError(
            f"checkpoint {path!r} is not an .npz archive (it does not start with the zip "
            f"signature; first bytes {signature!r})"
        )
    try:
        with NpzArchive(source, path, limit) as npz:
            manifest = _read_manifest(npz, path)
            return _decode(manifest["root"], npz, path)
    except CheckpointError:
        raise
    except Exception as exc:  # zipfile, zlib, numpy-format and JSON errors all mean "corrupt"
        raise CheckpointError(
            f"checkpoint {path!r} is truncated or corrupted: {type(exc).__name__}: {exc}"
        ) from exc


def _read_manifest(npz: Any, path: str) -> dict[str, Any]:
    if _MANIFEST_KEY not in npz.files:
        raise CheckpointError(
            f"checkpoint {path!r} has no dualflow manifest (entry {_MANIFEST_KEY!r}); "
            "it was not written by dualflow.save"
        )
    manifest = json.loads(npz[_MANIFEST_KEY].tobytes().decode("utf-8"))
    if not isinstance(manifest, dict) or manifest.get("format") != _FORMAT:
        raise CheckpointError(f"checkpoint {path!r} has a manifest of an unknown format")
    if manifest.get("version") != _VERSION:
        raise CheckpointError(
            f"checkpoint {path!r} has format version {manifest.get('version')!r}; "
            f"this dualflow reads version {_VERSION}"
        )
    return manifest


def _decode(node: dict[str, Any], npz: Any, path: str) -> Any:
    kind = node["t"]
    if kind == "dict":
        return {key: _decode(value, npz, path) for key, value in node["items"]}
    if kind in ("list", "tuple"):
        items = [_decode(value, npz, path) for value in node["items"]]
        return items if kind == "list" else tuple(items)
    if kind == "value":
        return node["v"]
    if kind not in ("tensor", "ndarray", "npscalar"):
        raise CheckpointError(f"checkpoint {path!r}: unknown manifest node type {kind!r}")
    key = node["key"]
    if key not in npz.files:
        raise CheckpointError(f"checkpoint {path!r}: the manifest names array {key!r}, not stored")
    array = npz[key]
    if kind == "ndarray":
        return array
    if kind == "npscalar":
        return array[()]
    return Tensor(array, requires_grad=bool(node.get("requires_grad")) and array.dtype.kind in "fc")
