"""``save_safetensors`` / ``load_safetensors``: tensor files in Hugging Face's format, no pickle.

A safetensors file is an 8-byte little-endian header length, a JSON header (per tensor: dtype,
shape and ``data_offsets`` into the byte buffer that follows; an optional ``__metadata__`` of
string pairs), then the raw little-endian tensor bytes. Written here byte for byte as the
``safetensors`` library writes it (tensors ordered by dtype then name, the header padded with
spaces to 8 bytes) and read with its checks: offsets contiguous, covering the buffer exactly,
each matching its shape.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from typing import Any

import numpy as np

from dualflow.device import send
from dualflow.errors import CheckpointError
from dualflow.tensor.core import Tensor

PathLike = str | os.PathLike
MAX_HEADER = 100 * 2**20  # the library's own limit on the JSON header

# safetensors dtype name <-> numpy dtype (little-endian); BF16 has no numpy dtype (read below)
DTYPES = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U64": "<u8",
    "U32": "<u4",
    "U16": "<u2",
    "U8": "u1",
    "BOOL": "?",
    "C64": "<c8",
}
_NAMES = {np.dtype(v): k for k, v in DTYPES.items()}
# The library's dtype enum order; it writes tensors by descending rank, then by name
_RANK = ("BOOL", "U8", "I8", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "C64", "F64")
_RANK += ("I64", "U64")


def save_safetensors(
    state_dict: Mapping[str, Any], path: PathLike, metadata: Mapping[str, str] | None = None
) -> None:
    """Write a flat ``{name: tensor}`` dict to ``path`` in the safetensors format (atomically).

    Args:
        state_dict: str keys; Tensors (moved to the host) or numpy arrays of a supported dtype.
        path: the file to write.
        metadata: optional ``__metadata__`` of str -> str (e.g. ``{"format": "pt"}``).

    Raises:
        TypeError: a key that is not a str, a value that is not an array, an unsupported dtype.
        CheckpointError: the file could not be written.

    Example:
        >>> import os, tempfile, dualflow
        >>> path = os.path.join(tempfile.mkdtemp(), "w.safetensors")
        >>> dualflow.save_safetensors({"w": dualflow.tensor([1.0, 2.0])}, path)
        >>> dualflow.load_safetensors(path)["w"]
        tensor([1., 2.], dtype=float32)
    """
    arrays = {name: _as_array(name, value) for name, value in _checked_items(state_dict)}
    header: dict[str, Any] = {}
    if metadata:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise TypeError("save_safetensors: metadata must map str to str")
        header["__metadata__"] = dict(metadata)
    # The library's order, so that files match its own byte for byte
    order = sorted(arrays, key=lambda k: (-_RANK.index(_NAMES[arrays[k].dtype]), k))
    offset = 0
    for name in order:
        array = arrays[name]
        header[name] = {
            "dtype": _NAMES[array.dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + array.nbytes],
        }
        offset += array.nbytes
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    chunks = [len(text).to_bytes(8, "little"), text] + [arrays[k].tobytes() for k in order]
    _atomic_write_bytes(os.fspath(path), chunks)


def _checked_items(state_dict: Mapping[str, Any]) -> list[tuple[str, Any]]:
    if not isinstance(state_dict, Mapping):
        raise TypeError(
            f"save_safetensors: expected a dict of tensors, got {type(state_dict).__name__}"
        )
    items = list(state_dict.items())
    for name, _ in items:
        if not isinstance(name, str) or name == "__metadata__":
            raise TypeError(f"save_safetensors: key {name!r} is not a usable tensor name")
    return items


def _as_array(name: str, value: Any) -> np.ndarray:
    if isinstance(value, Tensor):
        value = send(value.detach().array, "cpu")
    elif type(value).__module__.startswith("cupy"):
        value = send(value, "cpu")
    if not isinstance(value, np.ndarray | np.generic):
        raise TypeError(
            f"save_safetensors: {name!r} is a {type(value).__name__}; only tensors and numpy "
            "arrays can be stored (safetensors holds no other values)"
        )
    array = np.asarray(value)
    if array.dtype.newbyteorder("<") not in _NAMES and array.dtype not in _NAMES:
        raise TypeError(
            f"save_safetensors: {name!r} has dtype {array.dtype}, which safetensors cannot hold"
        )
    little = array.astype(array.dtype.newbyteorder("<"), copy=False)
    return little if little.flags.c_contiguous else little.copy()  # (keeps 0-d arrays 0-d)


def _atomic_write_bytes(path: str, chunks: list[bytes]) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.")
    except OSError as exc:
        raise CheckpointError(f"cannot write {path!r}: {exc}") from exc
    try:
        with os.fdopen(fd, "wb") as file:
            for chunk in chunks:
                file.write(chunk)
            file.flush()
            os.fsync(file.fileno())  # the rename must not publish data still in the page cache
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def load_safetensors(path: PathLike, metadata: bool = False) -> Any:
    """Read a safetensors file as ``{name: Tensor}`` (CPU tensors, in the file's header order).

    BF16 tensors come back as float32 (numpy has no bfloat16; the widening is exact).

    Args:
        path: the file to read.
        metadata: also return the ``__metadata__`` dict: ``(tensors, metadata)``.

    Raises:
        CheckpointError: the file is missing, truncated, or its header is malformed (offsets
            that overlap, leave holes, run past the data or disagree with a shape).

    Example:
        >>> import os, tempfile, numpy as np, dualflow
        >>> path = os.path.join(tempfile.mkdtemp(), "w.safetensors")
        >>> dualflow.save_safetensors({"b": np.arange(3, dtype=np.int64)}, path, {"k": "v"})
        >>> dualflow.load_safetensors(path, metadata=True)
        ({'b': tensor([0, 1, 2], dtype=int64)}, {'k': 'v'})
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as exc:
        raise CheckpointError(f"cannot read safetensors file {path!r}: {exc}") from exc
    header, body = _split(data, path)
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise CheckpointError(f"{path!r}: __metadata__ must map str to str")
    spans = sorted((_span(name, entry, path), name) for name, entry in header.items())
    end = 0
    for (start, stop), name in spans:
        if start != end:
            raise CheckpointError(
                f"{path!r}: tensor {name!r} starts at byte {start}, expected {end} (the data "
                "offsets overlap or leave a hole)"
            )
        end = stop
    if end != len(body):
        raise CheckpointError(
            f"{path!r}: the header describes {end} bytes of data, the file holds {len(body)} "
            "(truncated or padded)"
        )
    tensors = {name: Tensor(_decode(name, header[name], body, path)) for name in header}
    return (tensors, dict(meta)) if metadata else tensors


def _split(data: bytes, path: str) -> tuple[dict[str, Any], bytes]:
    if len(data) < 8:
        raise CheckpointError(f"{path!r} is not a safetensors file ({len(data)} bytes)")
    size = int.from_bytes(data[:8], "little")
    if size > MAX_HEADER or 8 + size > len(data):
        raise CheckpointError(
            f"{path!r}: header length {size} runs past the file ({len(data)} bytes) or the "
            f"{MAX_HEADER}-byte limit; not a safetensors file, or truncated"
        )
    try:
        header = json.loads(data[8 : 8 + size].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path!r}: the header is not valid JSON: {exc}") from exc
    if not isinstance(header, dict):
        raise CheckpointError(f"{path!r}: the header is not a JSON object")
    return header, data[8 + size :]


def _span(name: str, entry: Any, path: str) -> tuple[int, int]:
    ok = isinstance(entry, dict) and entry.get("dtype") in (*DTYPES, "BF16")
    shape, offsets = (entry.get("shape"), entry.get("data_offsets")) if ok else (None, None)
    ok = ok and isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)
    ok = ok and isinstance(offsets, list) and len(offsets) == 2
    ok = ok and all(type(o) is int and o >= 0 for o in offsets) and offsets[0] <= offsets[1]
    if not ok:
        raise CheckpointError(f"{path!r}: malformed header entry for {name!r}: {entry!r}")
    itemsize = 2 if entry["dtype"] == "BF16" else np.dtype(DTYPES[entry["dtype"]]).itemsize
    if int(np.prod(shape, dtype=object)) * itemsize != offsets[1] - offsets[0]:
        raise CheckpointError(
            f"{path!r}: tensor {name!r} of shape {shape} and dtype {entry['dtype']} needs "
            f"{int(np.prod(shape, dtype=object)) * itemsize} bytes, its offsets span "
            f"{offsets[1] - offsets[0]}"
        )
    return offsets[0], offsets[1]


def _decode(name: str, entry: dict[str, Any], body: bytes, path: str) -> np.ndarray:
    start, stop = entry["data_offsets"]
    raw = body[start:stop]
    if entry["dtype"] == "BF16":  # the high half of a float32: widen exactly
        wide = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        return wide.view(np.float32).reshape(entry["shape"])
    array = np.frombuffer(raw, dtype=DTYPES[entry["dtype"]]).reshape(entry["shape"])
    return array.astype(array.dtype.newbyteorder("="), copy=True)  # writable, native order
