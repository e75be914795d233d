"""Checks of public constructor arguments: layers, optimizers, schedulers, loaders, communicators.

Each check returns the argument as the Python type the constructor keeps (``int``, ``float``,
a tuple) or raises ``ArgumentError`` (a ValueError) naming the class, the argument, the bad
value, what it must be, and the user's line. Constructors call these instead of ``int(x)`` /
``float(x)``, which silently truncate ``2.5`` to ``2`` or accept NaN.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any

from dualflow.errors import ArgumentError, user_frame, with_location


def fail(owner: str, name: str, value: Any, problem: str) -> ArgumentError:
    """The error for argument ``name`` of ``owner`` (raise it): value, problem, user's line.

    Example:
        >>> str(fail("Linear", "in_features", 2.5, "must be an integer")).splitlines()[0]
        'Linear: in_features must be an integer, got 2.5'
    """
    return ArgumentError(with_location(f"{owner}: {name} {problem}, got {value!r}", user_frame()))


def integer(owner: str, name: str, value: Any, minimum: int | None = 1) -> int:
    """``value`` as an int, if it is an integer (not a bool or float) of at least ``minimum``.

    Example:
        >>> integer("Linear", "in_features", 3)
        3
        >>> integer("Linear", "in_features", 2.5)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dualflow.errors.ArgumentError: Linear: in_features must be a positive integer, got 2.5
        ...
    """
    kind = {None: "an integer", 0: "a non-negative integer", 1: "a positive integer"}.get(
        minimum, f"an integer >= {minimum}"
    )
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise fail(owner, name, value, f"must be {kind}")
    if minimum is not None and value < minimum:
        raise fail(owner, name, value, f"must be {kind}")
    return int(value)


def integers(owner: str, name: str, value: Any, n: int, minimum: int | None = 1) -> tuple:
    """An int or ``n`` ints (PyTorch's ``kernel_size=3`` or ``(3, 3)``) as a tuple of ``n``.

    Example:
        >>> integers("Conv2d", "kernel_size", 3, 2), integers("Conv2d", "stride", (1, 2), 2)
        ((3, 3), (1, 2))
    """
    items = (value,) * n if isinstance(value, numbers.Integral) else value
    if not isinstance(items, Sequence) or isinstance(items, str) or len(items) != n:
        raise fail(owner, name, value, f"must be an integer or a tuple of {n} integers")
    return tuple(integer(owner, name, v, minimum) for v in items)


def _as_real(owner: str, name: str, value: Any) -> float:
    if isinstance(value, bool):
        raise fail(owner, name, value, "must be a number, not a bool")
    if isinstance(value, numbers.Real):
        return float(value)
    shape, kind = getattr(value, "shape", None), getattr(getattr(value, "dtype", None), "kind", "")
    if shape == () and kind in "fiu" and kind:  # a 0-d tensor or array (PyTorch allows lr=t)
        return float(value.item())
    raise fail(owner, name, value, "must be a real number")


def real(
    owner: str,
    name: str,
    value: Any,
    low: float | None = None,
    high: float | None = None,
    *,
    open_low: bool = False,
    open_high: bool = False,
    what: str = "",
) -> float:
    """``value`` as a finite float within ``low``/``high`` (closed unless ``open_*``).

    ``what`` says in words what the argument is (``"the learning rate"``).

    Example:
        >>> real("SGD", "lr", 0.1, 0.0)
        0.1
        >>> real("BatchNorm2d", "eps", -1.0, 0.0, open_low=True)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dualflow.errors.ArgumentError: BatchNorm2d: eps must be a finite number > 0.0, got -1.0
        ...
    """
    number = _as_real(owner, name, value)
    too_low = low is not None and (number <= low if open_low else number < low)
    too_high = high is not None and (number >= high if open_high else number > high)
    if not math.isfinite(number) or too_low or too_high:
        about = f" ({what})" if what else ""
        bounds = _range(low, high, open_low, open_high)
        raise fail(owner, name, value, f"must be a finite number{bounds}{about}")
    return number


def _range(low: Any, high: Any, open_low: bool, open_high: bool) -> str:
    if low is not None and high is not None:
        return f" in {'(' if open_low else '['}{low}, {high}{')' if open_high else ']'}"
    if low is not None:
        return f" {'>' if open_low else '>='} {low}"
    if high is not None:
        return f" {'<' if open_high else '<='} {high}"
    return ""


def reals(owner: str, name: str, value: Any, n: int, **bounds: Any) -> tuple[float, ...]:
    """Exactly ``n`` numbers (Adam's ``betas``), each checked as :func:`real` does.

    Example:
        >>> reals("Adam", "betas", (0.9, 0.999), 2, low=0.0, high=1.0, open_high=True)
        (0.9, 0.999)
        >>> reals("Adam", "betas", (0.9,), 2)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dualflow.errors.ArgumentError: Adam: betas must be a tuple of 2 numbers, got (0.9,)
        ...
    """
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != n:
        raise fail(owner, name, value, f"must be a tuple of {n} numbers")
    return tuple(real(owner, f"{name}[{i}]", v, **bounds) for i, v in enumerate(value))


def choice(owner: str, name: str, value: Any, options: Sequence[Any]) -> Any:
    """``value`` if it is one of ``options``.

    Example:
        >>> choice("GELU", "approximate", "tanh", ("none", "tanh"))
        'tanh'
    """
    if isinstance(value, bool) or value not in options:
        raise fail(owner, name, value, f"must be one of {list(options)}")
    return value


def function(owner: str, name: str, value: Any, optional: bool = True) -> Callable | None:
    """``value`` if it is callable (or None when ``optional``).

    Example:
        >>> function("DataLoader", "collate_fn", None) is None
        True
    """
    if (value is None and optional) or callable(value):
        return value
    raise fail(owner, name, value, "must be a callable" + (" or None" if optional else ""))
