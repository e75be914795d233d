"""How a symbolic number (a size, or a float computed from sizes) becomes a plain Python value.

``Escapes`` is the base of ``SymInt`` and ``SymFloat``: every conversion (``float``, ``hash``,
``str``, ``format``, ``repr``, ``__array__``, an int's or float's own attributes) goes through
``concrete``, which records the guard that the value is the traced call's. It also makes the
number pass ``isinstance(n, int)`` (or ``float``) as in eager.
"""

from __future__ import annotations

from typing import Any


class Escapes:
    """How a symbolic number becomes a plain Python value: through ``concrete``, which records
    the guard that the value is the traced call's (what SymInt and SymFloat share)."""

    __slots__ = ()
    PLAIN: type = object  # the Python type it stands for

    def concrete(self, why: str = "a concrete value") -> Any:
        raise NotImplementedError

    # ``isinstance(n, int)`` is True as in eager (``unittest.mock``'s device): code that checks
    # an argument's kind (``split(n)``: a size or a list of sections?) takes eager's branch.
    # ``type(n)`` still tells them apart, and C code, which checks the real type, calls
    # ``__index__`` and so guards the value.
    __class__ = property(lambda self: self.PLAIN)  # type: ignore[assignment]

    def __copy__(self) -> Any:  # immutable
        return self

    def __deepcopy__(self, memo: Any) -> Any:
        return self

    def __reduce__(self) -> Any:  # pickled: the traced call's value, guarded
        return self.PLAIN, (self.concrete("pickle"),)

    def __float__(self) -> float:
        return float(self.concrete("float()"))

    def __hash__(self) -> int:
        return hash(self.concrete("hash()"))

    def __str__(self) -> str:
        return str(self.concrete("str()"))

    def __format__(self, spec: str) -> str:
        return format(self.concrete("format()"), spec)

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        import numpy as np  # noqa: PLC0415 - only a size turned into an array needs numpy

        return np.asarray(self.concrete("numpy array"), dtype=dtype)

    def __repr__(self) -> str:  # what eager's number shows (a shape printed into a string)
        return repr(self.concrete("repr()"))

    def __getattr__(self, name: str) -> Any:  # ``n.bit_length()``, ``f.is_integer()``: guarded
        if name.startswith("_") or not hasattr(self.PLAIN, name):
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")
        return getattr(self.concrete(f".{name}"), name)
