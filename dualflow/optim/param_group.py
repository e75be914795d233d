"""``ParamGroup``: an optimizer's param-group dict, and the tensors that carry its scheduled values.

A compiled step bakes plain Python hyperparameters into its graph, so changing one must retrace.
Values a scheduler changes every step are tensors instead, read by reference: ``lr`` (the
group's 0-d lr tensor) and the keys an optimizer lists in ``_scheduled`` (SGD's ``momentum``,
Adam's ``betas``: what ``OneCycleLR`` cycles). The dict keeps the Python values users read;
assigning one writes its mirror tensor, and retraces only when a zero becomes non-zero or back
(optimizers branch on that, e.g. whether SGD keeps a momentum buffer).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow import ops
from dualflow._config import no_grad
from dualflow.device import get_array_module
from dualflow.ops.dispatch import tracing
from dualflow.tensor.core import Tensor


def as_float(value: Any) -> float:
    """A hyperparameter (Python number or one-element tensor) as a Python float.

    Example:
        >>> as_float(np.float32(0.5))
        0.5
    """
    return float(value.item()) if hasattr(value, "item") else float(value)


def as_dtype(value: Any, dtype: Any) -> Any:
    """A scalar ready to meet arrays of ``dtype``: a Python number as is (numpy rounds it to
    ``dtype``), a 0-d float64 tensor cast to ``dtype`` (the same rounding).

    Example:
        >>> as_dtype(0.5, np.float32), str(as_dtype(Tensor(np.asarray(0.5)), np.float32).dtype)
        (0.5, 'float32')
    """
    return ops.cast(value, dtype) if isinstance(value, Tensor) else value


def _items(value: Any) -> tuple:
    return tuple(value) if isinstance(value, tuple | list) else (value,)


def _zeros(value: Any) -> tuple[bool, ...]:
    return tuple(float(v) == 0 for v in _items(value))


class ParamGroup(dict):
    """A param group dict whose item assignments bump the optimizer's version (retrace).

    ``lr`` is a tensor: assigning a number writes it into that tensor. Keys in the optimizer's
    ``_scheduled`` have 0-d float64 mirror tensors (``hyper(key)``) written the same way.

    Example:
        >>> from dualflow.nn import Parameter
        >>> from dualflow.optim import SGD
        >>> opt = SGD([Parameter(np.zeros(2))], lr=0.1, momentum=0.9)
        >>> group = opt.param_groups[0]; before = opt._version
        >>> group["momentum"] = 0.5; group.hyper("momentum").item(), opt._version == before
        (0.5, True)
        >>> group["dampening"] = 0.1; opt._version == before + 1
        True
    """

    def __init__(self, owner: Any, values: dict[str, Any]) -> None:
        super().__init__(values)
        self._owner = owner
        dict.__setitem__(self, "params", ParamList(owner, values["params"]))
        self.lr_value = as_float(values["lr"])  # the last lr written as a Python number
        xp = get_array_module(values["params"][0].raw_array)
        self.tensors: dict[str, tuple[Tensor, ...]] = {}
        prefix = type(owner).__name__.lower()
        for key in getattr(owner, "_scheduled", ()):
            mirrors = tuple(Tensor(xp.asarray(as_float(v), np.float64)) for v in _items(self[key]))
            for index, t in enumerate(mirrors):
                t.name = f"{prefix}.{key}" + (f"[{index}]" if len(mirrors) > 1 else "")
            self.tensors[key] = mirrors
        # Also reachable from the optimizer's own attributes: the plan cache names captured
        # state by access paths, and it walks a dict's items, not a dict subclass's attributes.
        owner.__dict__.setdefault("_hyper_tensors", []).append(self.tensors)

    def hyper(self, key: str, index: int = 0) -> Tensor:
        """The 0-d float64 tensor holding ``self[key]`` (or its ``index``-th item)."""
        return self.tensors[key][index]

    def value(self, key: str, index: int = 0) -> Any:
        """What an update computes with: the Python number eagerly (no extra ops), the mirror
        tensor when traced (read by reference). Both round alike (see ``as_dtype``)."""
        if tracing() is None:
            return _items(self[key])[index]
        return self.tensors[key][index]

    def initial_lr(self) -> float:
        """The current lr as a Python float: the number last written, if the tensor holds it."""
        current = as_float(self["lr"])
        dtype = self["lr"].dtype if isinstance(self["lr"], Tensor) else np.float64
        return self.lr_value if np.dtype(dtype).type(self.lr_value) == current else current

    def _write_mirrors(self, key: str, value: Any) -> None:
        with no_grad():
            for mirror, v in zip(self.tensors[key], _items(value)):
                ops.assign(mirror, as_float(v))

    def restore(self, key: str, value: Any) -> None:
        """Set ``key`` without a version bump (loading a state dict bumps it once itself)."""
        dict.__setitem__(self, key, value)
        if key in self.tensors:
            self._write_mirrors(key, value)

    def __setitem__(self, key: str, value: Any) -> None:
        current = self.get("lr")
        if key == "lr" and isinstance(current, Tensor) and not isinstance(value, Tensor):
            with no_grad():  # lr is state: write it into its tensor, no retrace needed
                ops.assign(current, as_float(value))
            self.lr_value = as_float(value)
            return
        if key in self.tensors and len(_items(value)) == len(self.tensors[key]):
            same_zeros = _zeros(self[key]) == _zeros(value)
            self.restore(key, value)
            if same_zeros:  # the trace reads the mirrors: no retrace needed
                return
        else:
            if key == "params":
                value = ParamList(self._owner, value)
            super().__setitem__(key, value)
        self._owner._version += 1


def _bumping(name: str) -> Any:
    method = getattr(list, name)

    def changed(self: ParamList, *args: Any) -> Any:
        result = method(self, *args)
        self._owner._version += 1
        return self if name in ("__iadd__", "__imul__") else result

    changed.__name__ = name
    return changed


class ParamList(list):
    """A param group's ``params``: a list whose changes bump the optimizer's version, so a
    compiled step that read the old parameters retraces (``group["params"][0] = new``).

    Example:
        >>> from dualflow.nn import Parameter
        >>> from dualflow.optim import SGD
        >>> opt = SGD([Parameter(np.zeros(2))], lr=0.1); before = opt._version
        >>> opt.param_groups[0]["params"].append(Parameter(np.ones(2))); opt._version - before
        1
    """

    def __init__(self, owner: Any, params: Any) -> None:
        super().__init__(params)
        self._owner = owner

    def __reduce__(self) -> Any:  # copies and pickles are plain lists
        return list, (list(self),)

    __setitem__ = _bumping("__setitem__")
    __delitem__ = _bumping("__delitem__")
    __iadd__ = _bumping("__iadd__")
    __imul__ = _bumping("__imul__")
    append = _bumping("append")
    extend = _bumping("extend")
    insert = _bumping("insert")
    pop = _bumping("pop")
    remove = _bumping("remove")
    clear = _bumping("clear")
    sort = _bumping("sort")
    reverse = _bumping("reverse")
