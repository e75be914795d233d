"""How a compiled function names itself and its caller: its qualified name, its positional
parameter names (argument paths in messages), and the warning stack level of the user's call."""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable
from typing import Any

_TRACER = os.path.dirname(os.path.abspath(__file__)) + os.sep


def caller_level() -> int:
    """``warnings.warn``'s stacklevel naming the first frame outside the tracer (the user's
    call of the compiled function), however many frames the call path has."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_TRACER):
        frame, level = frame.f_back, level + 1
    return level


def name_of(fn: Any) -> str:
    """``fn``'s qualified name, or its type's name for a callable object.

    Example:
        >>> name_of(len), name_of(object())
        ('len', 'object')
    """
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def positional_names(fn: Callable) -> list[str]:
    """The names of ``fn``'s positional parameters ([] when Python cannot tell).

    Example:
        >>> positional_names(lambda x, y=1, *, z: x)
        ['x', 'y']
    """
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in params if p.kind in kinds]
