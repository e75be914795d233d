"""``autocast``: the context (and decorator) that turns on ``config.autocast``, which
``ops.dispatch.apply`` consults for every op (the op lists are in ``dualflow/ops/autocast.py``).

The setting is part of a compiled function's cache key, so a step traced under autocast runs its
casts as graph ops and is never reused outside it (nor the other way round). Backward runs with
autocast off: each gradient op runs in the types its forward op used, as in PyTorch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from dualflow._config import config
from dualflow.ops.autocast import low_dtype

_DEVICE_TYPES = ("cpu", "cuda")
_DEFAULT = {"cpu": "bfloat16", "cuda": "float16"}  # PyTorch's defaults per device type


def _device_types(device_type: str | None) -> tuple[str, ...]:
    if device_type is None:
        return _DEVICE_TYPES
    kind = str(device_type).split(":")[0]
    if kind not in _DEVICE_TYPES:
        raise ValueError(f"autocast: device_type must be 'cpu' or 'cuda', got {device_type!r}")
    return (kind,)


class autocast:
    """Run the enclosed ops with PyTorch's autocast policy in ``dtype`` (float16 or bfloat16).

    ``device_type`` ("cpu" or "cuda"; None: both) says which tensors it applies to; ``dtype``
    defaults to PyTorch's (bfloat16 on CPU, which needs ``ml_dtypes``; float16 on CUDA);
    ``enabled=False`` turns it off inside an outer one. Usable as a decorator.

    Example:
        >>> import dualflow
        >>> a = dualflow.ones(2, 2)
        >>> with autocast("cpu", dtype=dualflow.float16):
        ...     str((a @ a).dtype), str(dualflow.nn.functional.mse_loss(a @ a, a).dtype)
        ('float16', 'float32')
    """

    def __init__(
        self,
        device_type: str | None = None,
        dtype: Any = None,
        enabled: bool = True,
        cache_enabled: bool | None = None,
    ) -> None:
        del cache_enabled  # PyTorch's weight-cast cache: casts here are graph ops (CSE merges)
        self.kinds = _device_types(device_type)
        self.enabled = bool(enabled)
        names = {k: low_dtype(_DEFAULT[k] if dtype is None else dtype).name for k in self.kinds}
        self.names = names if self.enabled else {}
        self._saved: list[Any] = []

    def _setting(self) -> tuple[tuple[str, str], ...] | None:
        current = dict(config.autocast or ())
        for kind in self.kinds:
            current.pop(kind, None)
        current.update(self.names)
        return tuple(sorted(current.items())) or None

    def __enter__(self) -> autocast:
        self._saved.append(config.autocast)
        config.autocast = self._setting()
        return self

    def __exit__(self, *exc: Any) -> None:
        config.autocast = self._saved.pop()

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return wrapper


def is_autocast_enabled(device_type: str = "cpu") -> bool:
    """Whether autocast is on for ``device_type`` on this thread.

    Example:
        >>> is_autocast_enabled("cpu")
        False
    """
    return any(kind == device_type for kind, _ in config.autocast or ())


def get_autocast_dtype(device_type: str = "cpu") -> np.dtype:
    """The low type autocast uses on ``device_type`` (PyTorch's default when it is off).

    Example:
        >>> import dualflow
        >>> with autocast("cpu", dtype="float16"):
        ...     get_autocast_dtype("cpu")
        dtype('float16')
    """
    for kind, name in config.autocast or ():
        if kind == device_type:
            return low_dtype(name)
    return low_dtype(_DEFAULT[_device_types(device_type)[0]])
