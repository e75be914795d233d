"""Hand-made ``torch.save``-style archives for tests: pickles written opcode by opcode, so that
tests can name torch's globals (and malicious ones) without importing torch or faking modules."""

from __future__ import annotations

import struct
import zipfile
from dataclasses import dataclass
from typing import Any


@dataclass
class Global:
    module: str
    name: str


@dataclass
class Call:
    fn: Any
    args: tuple


@dataclass
class Persistent:
    pid: tuple


@dataclass
class Build:
    obj: Any
    state: Any


def storage(kind: str, key: str, numel: int) -> Persistent:
    return Persistent(("storage", Global("torch", kind), key, "cpu", numel))


def tensor(store: Persistent, offset: int, size: tuple, stride: tuple) -> Call:
    rebuild = Global("torch._utils", "_rebuild_tensor_v2")
    hooks = Call(Global("collections", "OrderedDict"), ())
    return Call(rebuild, (store, offset, size, stride, False, hooks))


def ops(obj: Any) -> bytes:
    """Protocol-2 opcodes that build ``obj``."""
    if isinstance(obj, Global):
        return b"c" + f"{obj.module}\n{obj.name}\n".encode()
    if isinstance(obj, Call):
        return ops(obj.fn) + ops(obj.args) + b"R"
    if isinstance(obj, Persistent):
        return ops(obj.pid) + b"Q"
    if isinstance(obj, Build):
        return ops(obj.obj) + ops(obj.state) + b"b"
    if obj is None:
        return b"N"
    if isinstance(obj, bool):
        return b"\x88" if obj else b"\x89"
    if isinstance(obj, int):
        return b"J" + struct.pack("<i", obj)
    if isinstance(obj, str):
        data = obj.encode()
        return b"X" + struct.pack("<I", len(data)) + data
    if isinstance(obj, tuple):
        return b"(" + b"".join(ops(v) for v in obj) + b"t"
    if isinstance(obj, dict):
        return b"}(" + b"".join(ops(k) + ops(v) for k, v in obj.items()) + b"u"
    raise TypeError(type(obj))


def pickled(obj: Any) -> bytes:
    return b"\x80\x02" + ops(obj) + b"."


def archive(path: Any, data_pkl: bytes, storages: dict[str, bytes], extra: dict | None = None):
    """Write a zip laid out as torch.save does (entries under ``archive/``)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", data_pkl)
        z.writestr("archive/byteorder", "little")
        for key, raw in storages.items():
            z.writestr(f"archive/data/{key}", raw)
        for name, raw in (extra or {}).items():
            z.writestr(name, raw)
