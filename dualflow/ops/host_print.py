"""``debug_print``: print values from inside a compiled step, at every call, with its values.

An impure op (never removed, merged or reordered) whose forward formats its inputs' values into
a message. Eagerly it prints at once; a compiled plan holds its messages until the run has
passed every guard (``held_messages``), so a call that falls back to eager does not print twice.
"""

from __future__ import annotations

import contextlib
import string
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from dualflow._thread_local import ThreadDefaults
from dualflow.ops.dispatch import apply
from dualflow.ops.registry import OPS, Meta, primitive

_HELD = ThreadDefaults(messages=None)  # a list while a plan runs on this thread


@contextlib.contextmanager
def held_messages() -> Iterator[list[str]]:
    """Collect the messages printed on this thread in the body (a plan run) instead of printing.

    Example:
        >>> with held_messages() as messages:
        ...     _ = debug_print("x={}", np.float32(2.5))
        >>> messages
        ['x=2.5']
    """
    outer = _HELD.messages
    _HELD.messages = messages = []
    try:
        yield messages
    finally:
        _HELD.messages = outer


def _emit(text: str) -> None:
    held = _HELD.messages
    if held is None:
        sys.stdout.write(text + "\n")
    else:
        held.append(text)


def _host(array: Any) -> Any:
    value = np.asarray(array.get() if hasattr(array, "get") else array)
    return value.item() if value.ndim == 0 else value


@primitive("debug_print", impure=True, prints=True)
class DebugPrint:
    """Print ``format`` filled with the inputs (the last ``len(names)`` by keyword)."""

    def infer(*metas: Meta, format: str, names: tuple[str, ...]) -> tuple[Meta]:
        if len(names) > len(metas):
            raise ValueError(f"debug_print: {len(names)} keyword names for {len(metas)} values")
        return (Meta((), np.dtype(np.bool_)),)

    def forward(xp, *arrays, format, names):
        values = [_host(a) for a in arrays]
        split = len(values) - len(names)
        _emit(format.format(*values[:split], **dict(zip(names, values[split:]))))
        return xp.zeros((), dtype=bool)


def debug_print(format: Any, *args: Any, **kwargs: Any) -> None:
    """Print ``format.format(*args, **kwargs)`` with the values of tensors, at every call.

    Eagerly it prints at once. Inside ``@dualflow.compile`` it becomes a graph node, so every
    plan run prints that call's values (``print(tensor)`` would fail the trace closed instead).
    Called like ``print`` (a tensor first, or a text without ``{}`` fields followed by values)
    it prints its arguments separated by spaces, as ``print`` does.

    Example:
        >>> import dualflow
        >>> debug_print("loss {:.2f}", dualflow.tensor(0.25))
        loss 0.25
        >>> debug_print("loss", dualflow.tensor(0.5)); debug_print(dualflow.tensor([1.0, 2.0]))
        loss 0.5
        [1. 2.]
    """
    if not isinstance(format, str):  # debug_print(t): print's meaning
        format, args = " ".join(["{}"] * (len(args) + 1)), (format, *args)
    elif args and not kwargs and not _has_fields(format):  # debug_print("loss", loss)
        format = " ".join([format.replace("{", "{{").replace("}", "}}")] + ["{}"] * len(args))
    names = tuple(kwargs)
    apply(OPS["debug_print"], *args, *kwargs.values(), format=format, names=names)


def _has_fields(text: str) -> bool:
    """Whether ``text`` has replacement fields (``{}``, ``{:.2f}``, ``{name}``)."""
    try:
        return any(field is not None for _, field, _, _ in string.Formatter().parse(text))
    except ValueError:  # unbalanced braces: not a format string
        return False
