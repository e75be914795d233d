"""A restricted unpickler for ``torch.save``'s ``data.pkl``: it rebuilds tensors and dicts only.

``pickle.Unpickler`` resolves every global (``GLOBAL``, ``STACK_GLOBAL``, ``INST``, ``OBJ``,
``EXT``) through ``find_class``; here that answers only from ``ALLOWED``, an explicit table of
PyTorch's names mapped onto dualflow-side stand-ins (torch is never imported), and refuses any
other name with a CheckpointError naming it, before anything is called. Storages arrive as
persistent ids and are read by the caller's ``read_storage``; tensors are views into them whose
offset, sizes and strides are checked against the storage before any array is built.
"""

from __future__ import annotations

import collections
import io
import math
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np

from dualflow.errors import CheckpointError
from dualflow.tensor.core import Tensor


class _Frozen:
    """Objects the pickle can reach: no ``__dict__``, no attribute writes, so a ``BUILD``
    opcode aimed at one fails instead of changing it."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise CheckpointError(f"the pickle tries to set {name!r} on a {type(self).__name__}")

    def _init(self, **fields: Any) -> None:
        for name, value in fields.items():
            object.__setattr__(self, name, value)


class StorageType(_Frozen):
    """Stands in for ``torch.FloatStorage`` & co: the dtype of a storage's elements."""

    __slots__ = ("dtype", "name")

    def __init__(self, name: str, dtype: str) -> None:
        self._init(name=name, dtype=dtype)  # dtype: numpy's, or "bfloat16" (widened when read)

    @property
    def itemsize(self) -> int:
        """Bytes per element in the file."""
        return 2 if self.dtype == "bfloat16" else np.dtype(self.dtype).itemsize


class Storage(_Frozen):
    """One storage read from the archive (a 1-D array), as the pickle's persistent id."""

    __slots__ = ("array", "key")

    def __init__(self, key: str, array: np.ndarray) -> None:
        self._init(key=key, array=array)


class Rebuilt(_Frozen):
    """A tensor rebuilt from a storage; made a Tensor once the whole pickle has been read."""

    __slots__ = ("array", "requires_grad")

    def __init__(self, array: np.ndarray, requires_grad: bool) -> None:
        self._init(array=array, requires_grad=requires_grad)


class _Function(_Frozen):
    """An allowed callable, fresh per ``find_class`` so the pickle never holds ours."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable) -> None:
        self._init(fn=fn)

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)


_STORAGES = {
    "FloatStorage": "<f4",
    "DoubleStorage": "<f8",
    "HalfStorage": "<f2",
    "BFloat16Storage": "bfloat16",
    "LongStorage": "<i8",
    "IntStorage": "<i4",
    "ShortStorage": "<i2",
    "CharStorage": "i1",
    "ByteStorage": "u1",
    "BoolStorage": "?",
    "ComplexFloatStorage": "<c8",
    "ComplexDoubleStorage": "<c16",
}


def _rebuild_tensor_v2(
    storage: Storage,
    storage_offset: int,
    size: tuple,
    stride: tuple,
    requires_grad: bool,
    backward_hooks: Any = None,
    metadata: Any = None,
) -> Rebuilt:
    """``torch._utils._rebuild_tensor_v2``: a strided view of a storage, checked, then copied."""
    if not isinstance(storage, Storage):
        raise CheckpointError(f"a tensor's storage is a {type(storage).__name__}, not a storage")
    ok = isinstance(size, tuple) and isinstance(stride, tuple) and len(size) == len(stride)
    ints = (storage_offset, *size, *stride) if ok else ()
    if not ok or not all(type(i) is int for i in ints) or min(ints) < 0:
        raise CheckpointError(
            f"tensor in storage {storage.key!r}: malformed offset/size/stride "
            f"{(storage_offset, size, stride)!r:.200}"
        )
    array, numel = storage.array, math.prod(size)
    if numel > max(array.size, 1):  # stride-0 views may not multiply memory (a bomb)
        raise CheckpointError(
            f"tensor in storage {storage.key!r}: {numel} elements from a storage of {array.size}"
        )
    if numel == 0:
        return Rebuilt(np.zeros(size, dtype=array.dtype), bool(requires_grad))
    last = storage_offset + sum((d - 1) * s for d, s in zip(size, stride, strict=True))
    if last >= array.size:
        raise CheckpointError(
            f"tensor in storage {storage.key!r} of size {size}, stride {stride} at offset "
            f"{storage_offset} reads element {last} of {array.size}"
        )
    view = np.lib.stride_tricks.as_strided(
        array[storage_offset:], shape=size, strides=[s * array.itemsize for s in stride]
    )
    return Rebuilt(np.array(view), requires_grad is True)


def _rebuild_parameter(data: Rebuilt, requires_grad: bool, backward_hooks: Any = None) -> Rebuilt:
    """``torch._utils._rebuild_parameter``: the tensor itself (a state dict holds values)."""
    if not isinstance(data, Rebuilt):
        raise CheckpointError(f"a parameter wraps a {type(data).__name__}, not a tensor")
    return Rebuilt(data.array, requires_grad is True)


# (module, name) -> a factory of what find_class answers (fresh each time)
ALLOWED: dict[tuple[str, str], Callable[[], Any]] = {
    ("collections", "OrderedDict"): lambda: collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): lambda: _Function(_rebuild_tensor_v2),
    ("torch._utils", "_rebuild_parameter"): lambda: _Function(_rebuild_parameter),
}
for _name, _dtype in _STORAGES.items():
    ALLOWED["torch", _name] = lambda n=_name, d=_dtype: StorageType(n, d)


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickles ``data.pkl`` with only ``ALLOWED`` globals; storages come from ``read_storage``.

    Example:
        >>> import pickle
        >>> RestrictedUnpickler(io.BytesIO(pickle.dumps({"a": [1, 2.5]})), None).load()
        {'a': [1, 2.5]}
    """

    def __init__(
        self, file: io.BytesIO, read_storage: Callable[[StorageType, str, int], np.ndarray] | None
    ) -> None:
        super().__init__(file)
        self._read_storage = read_storage
        self._storages: dict[str, tuple[str, int, Storage]] = {}

    def find_class(self, module: str, name: str) -> Any:
        factory = ALLOWED.get((module, name))
        if factory is None:
            hint = ""
            if module.startswith(("torch.nn", "__main__", "__torch__")):
                hint = "; a whole model was saved: save and load model.state_dict() instead"
            raise CheckpointError(
                f"refusing the global {module}.{name}: a checkpoint may only name tensors, "
                f"storages and OrderedDict (the file may be malicious){hint}"
            )
        return factory()

    def persistent_load(self, pid: Any) -> Storage:
        ok = isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
        ok = ok and isinstance(pid[1], StorageType) and isinstance(pid[2], str)
        ok = ok and type(pid[4]) is int and pid[4] >= 0
        if not ok or self._read_storage is None:
            raise CheckpointError(f"unsupported persistent id in the pickle: {pid!r:.200}")
        _, kind, key, _, numel = pid
        if key not in self._storages:
            self._storages[key] = (
                kind.name,
                numel,
                Storage(key, self._read_storage(kind, key, numel)),
            )
        name, count, storage = self._storages[key]
        if (name, count) != (kind.name, numel):
            raise CheckpointError(
                f"storage {key!r} is named as {count} x {name} and as {numel} x {kind.name}"
            )
        return storage


def unpickle(data: bytes, read_storage: Callable[[StorageType, str, int], np.ndarray]) -> Any:
    """Run the restricted unpickler over ``data``, then turn rebuilt tensors into Tensors and
    OrderedDicts into dicts; any failure is a CheckpointError.

    Example:
        >>> unpickle(pickle.dumps({"a": [1, 2.5, ("x", None)]}), None)
        {'a': [1, 2.5, ('x', None)]}
        >>> unpickle(pickle.dumps(print), None)
        Traceback (most recent call last):
        ...
        dualflow.errors.CheckpointError: refusing the global builtins.print: a checkpoint may \
only name tensors, storages and OrderedDict (the file may be malicious)
    """
    try:
        raw = RestrictedUnpickler(io.BytesIO(data), read_storage).load()
        return _finish(raw, "<root>")
    except CheckpointError:
        raise
    except Exception as exc:  # malformed opcodes, wrong REDUCE arguments, truncation, nesting
        raise CheckpointError(
            f"the checkpoint's pickle is malformed: {type(exc).__name__}: {exc}"
        ) from exc


_PLAIN = (bool, int, float, complex, str, bytes, type(None))


def _finish(value: Any, where: str) -> Any:
    if isinstance(value, Rebuilt):
        return Tensor(
            value.array, requires_grad=value.requires_grad and value.array.dtype.kind in "fc"
        )
    if isinstance(value, dict):  # OrderedDict too: a plain dict keeps the order
        return {k: _finish(v, f"{where}[{k!r}]") for k, v in value.items()}
    if type(value) in (list, tuple):
        items = [_finish(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return items if type(value) is list else tuple(items)
    if type(value) in _PLAIN:
        return value
    raise CheckpointError(
        f"the checkpoint holds a {type(value).__name__} at {where}; only tensors, dicts, lists, "
        "tuples, numbers and strings are loaded"
    )
