"""numpy-array arguments seen by a traced function: graph inputs that stay numpy-compatible.

While tracing, each numpy array passed in is replaced by an ``ArrayArgument``. Handing it to
dualflow (ops, ``dualflow.tensor``, layers) reads the graph input, so every call computes with its
own array. Any numpy computation on it (``x / 255.0``, ``np.log(x)``, ``x[0]``, ``x.astype``)
still runs for real — the call stays correct — but makes the trace fail closed, because its
result would be baked into the graph. ``isinstance(x, np.ndarray)`` stays true.
"""

from __future__ import annotations

import math
import operator
import types
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from dualflow.tensor.core import Tensor
from dualflow.tracer import pytree


class ArrayArgument:
    """A traced numpy-array argument (see the module docstring)."""

    __slots__ = ("_fail", "_path", "_sizes", "raw_array")

    def __init__(
        self, array: np.ndarray, path: str, fail: Callable[[str], None], sizes: Any = None
    ) -> None:
        # weakly: an argument kept after its trace (an index array in a cached index spec)
        # must not keep the tracer and every array of its run alive
        bound = isinstance(fail, types.MethodType)
        self.raw_array, self._path = array, path
        self._sizes = sizes  # its shape with dynamic sizes as expressions (issue 39), or None
        self._fail = weakref.WeakMethod(fail) if bound else (lambda: fail)  # type: ignore

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # isinstance(x, np.ndarray) holds, as in eager mode
        return np.ndarray

    # metadata is part of the signature (cache key): reading it bakes nothing
    # (with dynamic dimensions the sizes are expressions: a decision on one is guarded)
    shape = property(lambda self: self.raw_array.shape if self._sizes is None else self._sizes)
    dtype = property(lambda self: self.raw_array.dtype)
    ndim = property(lambda self: self.raw_array.ndim)
    size = property(lambda self: math.prod(self.shape))

    def __len__(self) -> int:
        if self._sizes is not None and self._sizes:
            return self._sizes[0]  # a SymInt: len() then guards its value, as int() does
        return len(self.raw_array)

    def raw(self, what: str) -> np.ndarray:
        """The array itself, after recording that numpy computed with it (fail closed)."""
        fail = self._fail()
        if fail is not None:  # None: its trace has ended
            fail(
                f"numpy computation ({what}) on the numpy-array argument {self._path} inside a "
                "compiled function: its result would be baked into the graph. Convert it first "
                "with dualflow.tensor(x) and compute with dualflow ops"
            )
        return self.raw_array

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        array = self.raw("np.asarray")
        return array if dtype is None else array.astype(dtype)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        self.raw(f"np.{ufunc.__name__}")
        inputs = tuple(unwrap(x) for x in inputs)
        if "out" in kwargs:
            kwargs["out"] = tuple(unwrap(x) for x in kwargs["out"])
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __array_function__(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        self.raw(f"np.{func.__name__}")
        return func(*_unwrap_all(args), **{k: _unwrap_all(v) for k, v in kwargs.items()})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") and not name.startswith("__array"):
            return getattr(self.raw_array, name)  # probes such as hasattr(x, "_version")
        return getattr(self.raw(f".{name}"), name)

    def __getitem__(self, index: Any) -> Any:
        return self.raw("indexing")[index]

    def __setitem__(self, index: Any, value: Any) -> None:
        self.raw("an in-place write")[index] = unwrap(value)

    def __iter__(self) -> Any:
        return iter(self.raw("iteration"))

    def __bool__(self) -> bool:
        return bool(self.raw("bool()"))

    def __float__(self) -> float:
        return float(self.raw("float()"))

    def __int__(self) -> int:
        return int(self.raw("int()"))

    def __index__(self) -> int:
        return operator.index(self.raw("an index"))

    def __repr__(self) -> str:
        return repr(self.raw("repr()"))

    def __str__(self) -> str:
        return str(self.raw("str()"))

    def __format__(self, spec: str) -> str:
        return format(self.raw("format()"), spec)


_OPERATORS = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "truediv": operator.truediv,
    "floordiv": operator.floordiv,
    "mod": operator.mod,
    "pow": operator.pow,
    "matmul": operator.matmul,
    "and": operator.and_,
    "or": operator.or_,
}
_COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne")


def _binary(function: Callable, name: str, reflected: bool) -> Callable:
    def method(self: ArrayArgument, other: Any) -> Any:
        if isinstance(other, Tensor):  # numpy defers to Tensor too: a traced dualflow op
            return NotImplemented
        array = self.raw(f"the operator {name}")
        return function(unwrap(other), array) if reflected else function(array, unwrap(other))

    return method


def _inplace(function: Callable, name: str) -> Callable:
    def method(self: ArrayArgument, other: Any) -> Any:
        function(self.raw(f"the in-place operator {name}="), unwrap(other))  # the caller's array
        return self

    return method


for _name, _function in _OPERATORS.items():
    setattr(ArrayArgument, f"__{_name}__", _binary(_function, _name, False))
    setattr(ArrayArgument, f"__r{_name}__", _binary(_function, _name, True))
    setattr(ArrayArgument, f"__i{_name}__", _inplace(getattr(operator, f"i{_name}"), _name))
for _name in _COMPARISONS:
    setattr(ArrayArgument, f"__{_name}__", _binary(getattr(operator, _name), _name, False))
for _name, _function in (("neg", operator.neg), ("pos", operator.pos), ("abs", abs)):
    setattr(ArrayArgument, f"__{_name}__", lambda self, f=_function, n=_name: f(self.raw(n)))
ArrayArgument.__hash__ = None  # type: ignore[assignment]  # like ndarray


def unwrap(value: Any) -> Any:
    """The numpy array behind an ``ArrayArgument`` (anything else unchanged).

    Example:
        >>> a = np.zeros(2); unwrap(ArrayArgument(a, "x", print)) is a, unwrap(3)
        (True, 3)
    """
    return value.raw_array if type(value) is ArrayArgument else value


def _unwrap_all(value: Any) -> Any:
    if type(value) in (tuple, list):
        return type(value)(_unwrap_all(v) for v in value)
    return unwrap(value)


def wrap_arguments(
    args: tuple,
    kwargs: dict,
    paths: dict[int, str],
    fail: Callable[[str], None],
    sizes: dict[int, Any] | None = None,
) -> tuple[tuple, dict, Callable[[], None]]:
    """Replace numpy arrays (``paths``: id -> argument path) by ArrayArguments for one trace.

    Lists, dicts and dataclass fields are changed in place (the function sees the caller's own
    containers) and put back by the returned ``restore()``; tuples and namedtuples holding one
    are rebuilt. The containers are ``pytree``'s, as in the signature that found the arrays.
    """
    wrapping = _Wrapping(paths, fail, sizes or {})
    new_args = tuple(wrapping.walk(a) for a in args)
    new_kwargs = {k: wrapping.walk(v) for k, v in kwargs.items()}
    undo = wrapping.undo

    def restore() -> None:
        for step in reversed(undo):
            step()

    return new_args, new_kwargs, restore


class _Wrapping:
    """One ``wrap_arguments`` walk. A class: a nested function calling itself is a reference
    cycle, which kept ``fail``'s tracer and every array of its run until the garbage collector
    ran (issue 36)."""

    def __init__(
        self, paths: dict[int, str], fail: Callable[[str], None], sizes: dict[int, Any]
    ) -> None:
        self.paths, self.fail, self.sizes = paths, fail, sizes
        self.undo: list[Callable[[], None]] = []

    def walk(self, value: Any) -> Any:
        if isinstance(value, np.ndarray) and id(value) in self.paths:
            return ArrayArgument(value, self.paths[id(value)], self.fail, self.sizes.get(id(value)))
        kind = pytree.kind_of(value)  # the containers signature.flatten found the arrays in
        if kind in ("tuple", "namedtuple"):
            new = [self.walk(v) for v in value]
            if all(a is b for a, b in zip(new, value)):
                return value
            return tuple(new) if kind == "tuple" else type(value)._make(new)
        if kind == "list":
            _swap(value, range(len(value)), self.walk, self.undo)
        elif kind in pytree.DICTS:
            _swap(value, list(value), self.walk, self.undo)
        elif kind == "dataclass":
            for name, old in pytree.items(value, kind):
                new = self.walk(old)
                if new is not old:
                    object.__setattr__(value, name, new)
                    self.undo.append(lambda v=value, n=name, o=old: object.__setattr__(v, n, o))
        return value


def _swap(container: Any, keys: Any, walk: Callable, undo: list) -> None:
    for key in keys:
        old = container[key]
        new = walk(old)
        if new is not old:
            container[key] = new
            undo.append(lambda c=container, n=new, o=old: _put_back(c, n, o))


def _put_back(container: Any, proxy: Any, array: Any) -> None:
    # by identity: the function may have appended to or reordered the container meanwhile
    keys = range(len(container)) if isinstance(container, list) else list(container)
    for key in keys:
        if container[key] is proxy:
            container[key] = array
