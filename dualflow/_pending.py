"""``Pending``: the array of a tensor whose op was recorded by lazy re-execution, not yet computed.

Lazy re-execution (``dualflow.tracer.lazy``) runs a compiled function's Python at every call with
tensor ops recorded, not computed; each result's array is a ``Pending`` with the shape and dtype
the op's ``infer`` gave. Reading its *metadata* (shape, dtype, ndim, size) costs nothing. Reading
its *data* in any way — ``np.asarray``, ``bool``, ``float``, ``.item()``, indexing, arithmetic,
any other numpy attribute — runs the graph recorded so far as a plan (a graph break), after which
the object stands for the real array it got. So code that is not an op, inside dualflow or the
user's, sees the values eager mode computes; nothing reads an uncomputed value.

It lives at the bottom layer so that the eager interpreter and ``Tensor`` can resolve one without
knowing the tracer; the recorder that owns a ``Pending`` is reached through ``owner.flush()``.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class Pending:
    """A recorded op's output: metadata now, data after the recorder has run its graph.

    Example:
        >>> class Owner:
        ...     def flush(self):
        ...         p.real = np.arange(3.0)
        >>> p = Pending((3,), np.dtype("float64"), Owner(), 0)
        >>> p.shape, p.real is None
        ((3,), True)
        >>> float(p.sum()), p.real is not None
        (3.0, True)
    """

    __slots__ = ("base_key", "dtype", "layout", "owner", "real", "shape", "source", "value")
    __slots__ += ("__weakref__",)

    def __init__(self, shape: tuple, dtype: Any, owner: Any, value: int) -> None:
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.owner, self.value = owner, value  # the recorder, and the graph value it stands for
        self.real: Any = None
        # (op, input arrays, attrs, index) for a result that may view its input: filled by the
        # op itself on the materialized inputs, so it shares memory as eager's result does
        self.source: Any = None
        self.base_key = id(self)  # whose memory it is: its own, or (a view) its base's
        self.layout = "any"  # "C" when the op's layout fact says eager's result is C-ordered

    # ----- metadata: never a break -------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        size = 1
        for n in self.shape:
            size *= n
        return size

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def device(self) -> str:
        return "cpu"  # lazy re-execution records host (numpy) programs only

    @property
    def flags(self) -> Any:
        if self.layout != "C":  # which strides eager's result has: only the data can say
            return self.resolve().flags
        big = sum(1 for n in self.shape if n > 1)
        return _Flags(True, big <= 1)

    @property
    def strides(self) -> tuple:
        if self.layout != "C":
            return self.resolve().strides
        strides, step = [], self.dtype.itemsize
        for n in reversed(self.shape):
            strides.append(step)
            step *= max(n, 1)
        return tuple(reversed(strides))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def settle(self, real: Any) -> None:
        """Stand for ``real`` from now on, and let the recorder go: a finished call's recorder
        holds that call's undo log (copies of every parameter it wrote) and, through the old
        ``.grad`` arrays the log keeps, the call before it, so a result that kept its recorder
        kept every earlier call's memory alive too."""
        self.real, self.owner = real, None

    # ----- data: resolve first ----------------------------------------------------------------
    def resolve(self) -> Any:
        """The real array: runs the recorder's pending graph first when it has not run yet."""
        if self.real is None:
            self.owner.flush()
            if self.real is None:  # the recorder let it go without computing it: a bug
                raise RuntimeError("dualflow: a lazily recorded value was never computed")
        return self.real

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        real = self.resolve()
        if dtype is None and not copy:
            return real
        return np.array(real, dtype=dtype, copy=True) if copy else real.astype(dtype, copy=False)

    def __getattr__(self, name: str) -> Any:  # every other numpy attribute reads the data
        return getattr(self.resolve(), name)

    def __repr__(self) -> str:
        if self.real is None:
            return f"Pending(shape={self.shape}, dtype={self.dtype})"
        return repr(self.real)


class _Flags:
    """The flags of a C-ordered result, known without its data (others read the data)."""

    __slots__ = ("c_contiguous", "contiguous", "f_contiguous")

    def __init__(self, c: bool, f: bool) -> None:
        self.c_contiguous = self.contiguous = c
        self.f_contiguous = f

    @property
    def writeable(self) -> bool:
        return True


def _forward(name: str) -> Any:
    def method(self: Pending, *args: Any) -> Any:
        return getattr(self.resolve(), name)(*args)

    method.__name__ = name
    return method


# Python looks special methods up on the type, not through __getattr__: forward each one.
_SPECIAL = """__bool__ __float__ __int__ __index__ __complex__ __iter__ __reversed__ __contains__
__getitem__ __setitem__ __str__ __format__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__ __neg__
__pos__ __abs__ __invert__ __round__ __dlpack__ __dlpack_device__ __copy__ __deepcopy__
__reduce__ __reduce_ex__"""
_BINARY = "add sub mul truediv floordiv mod pow matmul and or xor lshift rshift"
for _name in _SPECIAL.split():
    setattr(Pending, _name, _forward(_name))
for _name in _BINARY.split():
    for _form in (f"__{_name}__", f"__r{_name}__"):
        setattr(Pending, _form, _forward(_form))
Pending.__hash__ = None  # type: ignore[assignment]  # as numpy arrays: unhashable
del _name, _form


def resolved(array: Any) -> Any:
    """``array`` itself, or the real array of a ``Pending`` (computing it first).

    Example:
        >>> a = np.zeros(2); resolved(a) is a
        True
    """
    return array.resolve() if type(array) is Pending else array


__all__ = ["Pending", "resolved"]
