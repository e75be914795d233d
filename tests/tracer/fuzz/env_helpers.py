"""Another module of the user's (issue 35's fuzzer): the classes its environment objects are made
of and helper functions a generated step calls to read a value.

A generated step imports this module as ``lib``: reads inside these helpers happen in code
defined elsewhere than the step (a module of the user's own, followed by the probe), and
``lib.HELD`` is an attribute of another module that a root stores its object in.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class Box:
    """A plain object with one attribute ``val`` (an ordinary config object)."""

    def __init__(self, val: Any) -> None:
        self.val = val


class Ranked:
    """An item of a list chosen by ``max``/``min``/``sorted`` on ``rank``; ``on`` marks the one a
    comprehension keeps."""

    def __init__(self, rank: int, val: Any, on: bool = False) -> None:
        self.rank, self.val, self.on = rank, val, on


class Prop:
    """An object whose ``val`` is a property over ``_val``."""

    def __init__(self, val: Any) -> None:
        self._val = val

    @property
    def val(self) -> Any:
        return self._val


@dataclass
class Conf:
    """A dataclass config (``dataclasses.asdict`` and attribute reads)."""

    val: Any
    other: int = 0


def ranked(inner: Any) -> list[Ranked]:
    """Three ranked items; the one of rank 5 (the max, and the last when sorted) holds ``inner``.

    Example:
        >>> [r.rank for r in ranked(1.0)], max(ranked(1.0), key=lambda r: r.rank).val
        ([1, 5, 3], 1.0)
    """
    return [Ranked(1, None), Ranked(5, inner, on=True), Ranked(3, None)]


def cell(value: Any) -> tuple[Callable[[], Any], Callable[[Any], None]]:
    """A closure cell: a getter reading it and a setter rebinding it (``nonlocal``).

    Example:
        >>> get, put = cell(1.0); put(2.0); get()
        2.0
    """

    def get() -> Any:
        return value

    def put(new: Any) -> None:
        nonlocal value
        value = new

    return get, put


def pick(d: Any) -> Any:
    """``d["val"]``, read in another module.

    Example:
        >>> pick({"val": 3})
        3
    """
    return d["val"]


def pick_attr(obj: Any, name: str = "val") -> Any:
    """``getattr(obj, name)`` with the name a default argument, read in another module.

    Example:
        >>> pick_attr(Box(2))
        2
    """
    return getattr(obj, name)


def keyword(**kwargs: Any) -> Any:
    """The ``cfg`` keyword: what a ``functools.partial(keyword, cfg=...)`` call returns.

    Example:
        >>> keyword(cfg=4)
        4
    """
    return kwargs["cfg"]


class Table:
    """A user mapping: ``table["val"]`` runs ``__getitem__`` over a dict it holds."""

    def __init__(self, val: Any) -> None:
        self._d = {"val": val}

    def __getitem__(self, key: str) -> Any:
        return self._d[key]


class Dynamic:
    """An object whose attributes come from ``__getattr__`` over a dict it holds."""

    def __init__(self, val: Any) -> None:
        self._d = {"val": val}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return self._d[name]


class Slotted:
    """An object with ``__slots__`` (no ``__dict__``, no weak references)."""

    __slots__ = ("val",)

    def __init__(self, val: Any) -> None:
        self.val = val


def with_classmethod(val: Any) -> type:
    """A fresh class holding ``val`` as a class attribute, read by a classmethod.

    Example:
        >>> with_classmethod(3).value()
        3
    """

    class Settings:
        @classmethod
        def value(cls) -> Any:
            return cls.val

    Settings.val = val
    return Settings


Pair = namedtuple("Pair", ["val", "other"])  # a namedtuple config
