"""``functional_call``: run a Module with its parameters and buffers taken from a dict.

The module's own tensors are swapped out for the call and put back in a ``finally``, straight
in its tables (no ``__setattr__``): the swap bumps no version, so a compiled function that calls
it reads the given tensors (graph inputs when they are its arguments) and its guards on the
module's structure still hold. A lock per root module serialises concurrent calls on one module
(another thread calling the module directly meanwhile sees the swapped tensors, as in PyTorch).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from dualflow.nn.module import Module
from dualflow.tensor.core import Tensor

_locks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_locks_guard = threading.Lock()
_SHARED = threading.RLock()  # for modules a weak dict cannot key


def _lock_of(module: Module) -> threading.RLock:
    """The re-entrant lock of ``module`` (a nested call on one thread is allowed)."""
    with _locks_guard:
        try:
            lock = _locks.get(module)
            if lock is None:
                lock = _locks[module] = threading.RLock()
        except TypeError:  # a Module subclass made unhashable (__eq__ without __hash__)
            lock = _SHARED
        return lock


def _slots(module: Module) -> dict[str, tuple[Module, str, str]]:
    """Every parameter and buffer name (duplicates under each of their names) -> (owning
    module, attribute, table)."""
    slots: dict[str, tuple[Module, str, str]] = {}
    for path, sub in module.named_modules(remove_duplicate=False):
        for table in ("_params", "_buffers"):
            for name, value in getattr(sub, table).items():
                if value is not None:
                    slots[f"{path}.{name}" if path else name] = (sub, name, table)
    return slots


def _merge(dicts: Mapping | Sequence[Mapping]) -> dict[str, Any]:
    if isinstance(dicts, Mapping):
        return dict(dicts)
    merged: dict[str, Any] = {}
    for d in dicts:
        repeated = set(merged) & set(d)
        if repeated:
            raise ValueError(f"functional_call: {sorted(repeated)} appear in more than one dict")
        merged.update(d)
    return merged


def _plan(module: Module, given: dict[str, Any], tie_weights: bool, strict: bool) -> list:
    """The swaps to make: (owner, attribute, table, new value), tied names following theirs."""
    slots = _slots(module)
    unknown = sorted(set(given) - set(slots))
    if unknown:
        raise KeyError(
            f"functional_call: {type(module).__name__} has no parameter or buffer {unknown}; "
            f"its names are {sorted(slots)}"
        )
    for name, value in given.items():
        if not isinstance(value, Tensor):
            raise TypeError(
                f"functional_call: {name!r} must be a Tensor, got {type(value).__name__}"
            )
    by_id: dict[int, Any] = {}
    for name, value in given.items():
        sub, attr, table = slots[name]
        by_id.setdefault(id(getattr(sub, table)[attr]), value)
    swaps = []
    for name, (sub, attr, table) in slots.items():
        if name in given:
            swaps.append((sub, attr, table, given[name]))
        elif tie_weights and id(getattr(sub, table)[attr]) in by_id:
            swaps.append((sub, attr, table, by_id[id(getattr(sub, table)[attr])]))
        elif strict:
            raise KeyError(f"functional_call(strict=True): missing {name!r}")
    return swaps


def functional_call(
    module: Module,
    parameter_and_buffer_dicts: Mapping[str, Tensor] | Sequence[Mapping[str, Tensor]],
    args: Any = None,
    kwargs: dict[str, Any] | None = None,
    *,
    tie_weights: bool = True,
    strict: bool = False,
) -> Any:
    """``module(*args, **kwargs)`` with the named parameters and buffers replaced (torch.func's
    meaning): the module's own tensors are untouched and back in place afterwards, even when
    the call raises. Names are dotted paths as ``named_parameters()`` gives them; a tied
    parameter given under one name is used under all of them (``tie_weights``); ``strict``
    requires every parameter and buffer to be given.

    Raises:
        KeyError: a name the module does not have, or (strict) a missing one.
        TypeError: a value that is not a Tensor.

    Example:
        >>> import dualflow
        >>> from dualflow import nn
        >>> lin = nn.Linear(2, 1)
        >>> w = {"weight": dualflow.ones(1, 2), "bias": dualflow.zeros(1)}
        >>> functional_call(lin, w, (dualflow.tensor([[1.0, 2.0]]),)).tolist()
        [[3.0]]
        >>> lin.weight is dict(lin.named_parameters())["weight"]
        True
    """
    given = _merge(parameter_and_buffer_dicts)
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with _lock_of(module):
        swaps = _plan(module, given, tie_weights, strict)
        saved = [(sub, attr, table, getattr(sub, table)[attr]) for sub, attr, table, _ in swaps]
        try:
            for sub, attr, table, value in swaps:
                getattr(sub, table)[attr] = value  # in place: the table keeps its order
            return module(*args, **(kwargs or {}))
        finally:
            for sub, attr, table, value in reversed(saved):
                getattr(sub, table)[attr] = value
