"""Containers that may hold size expressions: a trace's attributes, literals, results, shapes.

``map_symbols`` is the one walker (tuples, namedtuples, lists, dict values); ``hint_of`` (the
traced call's values, no guard), ``substitute`` (another binding's values) and ``has_symbols``
are built on it or beside it; ``as_shape``/``as_size`` normalize a shape argument, keeping
its expressions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dualflow.symbolic_shapes import SYMBOLIC, ShapeEnv, SymFloat, SymInt

__all__ = ["ShapeEnv", "as_shape", "as_size", "has_symbols", "hint_of", "map_symbols", "substitute"]


def map_symbols(value: Any, how: Callable[[Any], Any]) -> Any:
    """``value`` with ``how(s)`` for every SymInt/SymFloat ``s`` in it (tuples, namedtuples,
    lists and dict values walked); the same object where it holds none.

    Example:
        >>> env = ShapeEnv(); n = env.new_symbol(4)
        >>> map_symbols((n, 3, [n * 2]), lambda s: s.hint), env.guards
        ((4, 3, [8]), [])
    """
    if isinstance(value, SYMBOLIC):
        return how(value)
    kind = type(value)
    if kind is tuple or kind is list:
        if not any(isinstance(v, SymInt | SymFloat | tuple | list | dict) for v in value):
            return value  # the common case while tracing: plain sizes
        return kind(map_symbols(v, how) for v in value)
    if kind is dict:
        return {k: map_symbols(v, how) for k, v in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # namedtuples keep their type
        return kind(*(map_symbols(v, how) for v in value))
    return value


def hint_of(value: Any) -> Any:
    """``value`` with every size expression at its hint, without a guard: what the traced
    call's kernels run with.

    Example:
        >>> env = ShapeEnv(); hint_of({"shape": (env.new_symbol(4), -1)})
        {'shape': (4, -1)}
    """
    return map_symbols(value, lambda s: s.hint)


def has_symbols(value: Any) -> bool:
    """Whether ``value`` holds a SymInt (in tuples, lists and dict values).

    Example:
        >>> has_symbols((1, [2])), has_symbols({"a": ShapeEnv().new_symbol(2)})
        (False, True)
    """
    if isinstance(value, SYMBOLIC):
        return True
    if isinstance(value, tuple | list):
        return any(has_symbols(v) for v in value)
    if isinstance(value, dict):
        return any(has_symbols(v) for v in value.values())
    return False


def substitute(value: Any, binding: dict[str, int]) -> Any:
    """``value`` with every size expression evaluated for ``binding`` (a new call's sizes).

    Example:
        >>> env = ShapeEnv(); n = env.new_symbol(4)
        >>> substitute({"shape": (n * 2, -1), "scale": 1.0 / n}, {"s0": 10})
        {'shape': (20, -1), 'scale': 0.1}
    """
    return map_symbols(value, lambda s: s.value_for(binding))


def as_size(value: Any) -> Any:
    """One size as an ``int``, or the ``SymInt`` itself (no guard: it stays an expression).

    Example:
        >>> import numpy as np
        >>> as_size(np.int64(3)), as_size(ShapeEnv().new_symbol(5)).expr
        (3, 's0')
    """
    return value if isinstance(value, SymInt) else int(value)


def as_shape(shape: Any) -> tuple:
    """A shape given as one size or a sequence of sizes, as a tuple (SymInts kept).

    Example:
        >>> as_shape(4), as_shape([2, 3])
        ((4,), (2, 3))
    """
    if isinstance(shape, SymInt) or not hasattr(shape, "__iter__"):
        return (as_size(shape),)
    return tuple(as_size(d) for d in shape)
