"""Tensor: an array payload plus its place in the autograd graph; operators dispatch to ops.

A Tensor holds ``array`` (numpy or cupy), ``requires_grad``, ``grad`` and the tape node that
created it. When traced it also carries its IR ``value``. Users build tensors with ``tensor()``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow import ops
from dualflow._installed import installed
from dualflow._pending import Pending
from dualflow._undo import current as undo_current
from dualflow.device import Device, device_of, send
from dualflow.errors import DTypeError, with_location
from dualflow.ops import OPS
from dualflow.ops.dispatch import apply, reading, tracing
from dualflow.symbolic_shapes import ACTIVE as SYMBOLIC_TRACES
from dualflow.tensor.methods import TensorMethods
from dualflow.tensor.methods.layout import Reflected

_FLOAT_KINDS = "fc"


class Tensor(TensorMethods):
    """A multi-dimensional array that records the ops applied to it for autodiff.

    Methods follow PyTorch's names and meanings (``dualflow.tensor.methods``: ``x.size()``,
    ``x.view``, ``x.sum(dim=...)``, ``x.transpose(0, 1)``, in-place ``x.add_``...).

    The machinery's protocol (interpreters, the engine, the tracer, lazy re-execution, optimizers
    and modules that move state): fields that other packages read and write directly, because
    they must not run what the user-facing properties run.

    - ``raw_array``: the array slot as stored: a numpy/cupy array, or a lazy ``Pending``
      placeholder under lazy re-execution. Reading it neither computes pending values nor tells a
      trace; writing it replaces the payload without an undo record. User code (and anything
      that needs the values) reads ``array``, which tells a trace, lets lazy re-execution run
      what is pending (``dispatch.reading``) and resolves a ``Pending``.
    - ``raw_grad``: the gradient slot; ``grad`` is the property that tells a trace and the undo
      log (``dualflow/_undo.py``) about reads and writes.
    - ``creator`` and ``output_index``: the tape node that produced this tensor (None for leaves)
      and which of its outputs this is (``dualflow/tensor/tape.py``'s ``edge``).
    - ``wrap(array, creator, index, requires_grad)``: the constructor without checks.

    Example:
        >>> import dualflow
        >>> x = dualflow.tensor([1.0, 2.0], requires_grad=True)
        >>> (x * x).sum().backward(); x.grad.numpy()
        array([2., 4.], dtype=float32)
    """

    __slots__ = (
        "__weakref__",
        "creator",
        "name",
        "output_index",
        "raw_array",
        "raw_grad",
        "requires_grad",
        "value",
    )
    __array_priority__ = 1000  # numpy defers `ndarray * Tensor` to Tensor.__rmul__

    def __init__(self, array: Any, requires_grad: bool = False, name: str | None = None) -> None:
        if requires_grad and array.dtype.kind not in _FLOAT_KINDS:
            raise DTypeError(
                with_location(
                    f"only floating-point tensors can require grad, got dtype {array.dtype}; "
                    "cast first, e.g. tensor(data, dtype='float32', requires_grad=True)"
                )
            )
        self.raw_array = array
        self.creator = None
        self.output_index = 0
        self.requires_grad = requires_grad
        self.raw_grad: Tensor | None = None
        self.value = None
        self.name = name
        hooks = tracing()
        if hooks is not None:  # a tensor built inside a compiled function: a constant
            hooks.on_new_tensor(self)

    @classmethod
    def wrap(cls, array: Any, creator: Any, index: int, requires_grad: bool) -> Tensor:
        """A Tensor around ``array`` as output ``index`` of tape node ``creator``: the hot-path
        constructor of interpreters and the machinery (no validation, no notice to a trace).

        Example:
            >>> import numpy as np
            >>> Tensor.wrap(np.zeros(2), None, 0, False).raw_array.tolist()
            [0.0, 0.0]
        """
        t = cls.__new__(cls)
        t.raw_array, t.creator, t.output_index, t.requires_grad = (
            array,
            creator,
            index,
            requires_grad,
        )
        t.raw_grad = t.value = t.name = None
        return t

    # ----- payload -------------------------------------------------------------------------
    @property
    def array(self) -> Any:
        """The underlying numpy/cupy array (shared, not copied).

        Inside a compiled function this fails closed with a TracingError: a raw array would be
        baked into the graph as a constant.
        """
        hooks = tracing()
        if hooks is not None:
            hooks.on_raw_access(self, "reading .array")
        else:  # shared memory the caller may write: lazy re-execution computes what reads it
            reading(self.raw_array, True)
        if type(self.raw_array) is Pending:  # recorded lazily: the values, computed now
            self.raw_array = self.raw_array.resolve()
        return self.raw_array

    @property
    def grad(self) -> Tensor | None:
        """The accumulated gradient (a Tensor) or None."""
        hooks = tracing()
        if hooks is not None:
            return hooks.on_grad_read(self, self.raw_grad)
        return self.raw_grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        hooks = tracing()
        if hooks is not None:
            hooks.on_grad_write(self, value)
        log = undo_current()
        if log is not None:  # an all-or-nothing eager call (dualflow._undo)
            log.grad(self)
        self.raw_grad = value

    @property
    def shape(self) -> tuple[int, ...]:
        if SYMBOLIC_TRACES[0]:  # a trace with dynamic sizes: its sizes as expressions (issue 39)
            hooks = tracing()
            symbolic = None if hooks is None else hooks.symbolic_shape(self)
            if symbolic is not None:
                return symbolic
        return self.raw_array.shape

    @property
    def dtype(self) -> np.dtype:
        return self.raw_array.dtype

    @property
    def ndim(self) -> int:
        return self.raw_array.ndim

    @property
    def device(self) -> Device:
        return device_of(self.raw_array)

    @property
    def is_leaf(self) -> bool:
        return self.creator is None

    def numpy(self) -> np.ndarray:
        """A numpy array with the values (a copy from the GPU; shared on the CPU)."""
        return np.asarray(send(self.array, "cpu"))

    def to_device(self, device: Device | str) -> Tensor:
        """This tensor on ``device``: itself when already there (zero-copy), else a copy that
        gradients flow back through (see ``dualflow/tensor/transfer.py``)."""
        from dualflow.tensor.transfer import to_device  # noqa: PLC0415 - transfer imports this module

        return to_device(self, device)

    def __dlpack__(self, *, stream: Any = None, **kwargs: Any) -> Any:
        """The array as a DLPack capsule (zero-copy); ``dualflow.from_dlpack`` reads it back.

        A tensor that requires grad is refused, as in PyTorch: the consumer could write the
        shared memory behind autograd's back. Export ``t.detach()`` instead.
        """
        if self.requires_grad:
            raise RuntimeError(
                with_location(
                    "__dlpack__: can't export a tensor that requires grad (the consumer would "
                    "share its memory outside autograd); use t.detach() instead"
                )
            )
        return self.array.__dlpack__(stream=stream, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        """``(DLPack device type, index)`` of the array: ``(1, 0)`` on the CPU, 2 for CUDA."""
        return self.raw_array.__dlpack_device__()

    def _concrete(self, kind: str, convert: Any) -> Any:
        # A Python value from a tensor; inside a compiled function this adds a guard.
        reading(self.raw_array, False)
        if self.raw_array.size != 1:
            raise ValueError(f"{kind}() needs a tensor with one element, got shape {self.shape}")
        value = convert(self.raw_array.item())
        hooks = tracing()
        if hooks is not None:
            hooks.on_concrete(self, kind, value)
        return value

    def item(self) -> Any:
        """The value of a one-element tensor as a Python number (a guard when compiled)."""
        return self._concrete("item", lambda v: v)

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        array = self.numpy()
        return array if dtype is None else array.astype(dtype)

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __bool__(self) -> bool:
        return self._concrete("bool", bool)

    def __float__(self) -> float:
        return self._concrete("float", float)

    def __int__(self) -> int:
        return self._concrete("int", int)

    def __index__(self) -> int:
        if self.dtype.kind not in "iub":
            raise TypeError(f"only integer tensors can be used as an index, got {self.dtype}")
        return self._concrete("int", int)

    def __repr__(self) -> str:
        if hasattr(self.raw_array, "describe"):  # a payload that prints itself (vmap's batches)
            return self.raw_array.describe()
        body = np.array2string(self.numpy(), separator=", ", prefix="tensor(")
        grad = ", requires_grad=True" if self.requires_grad else ""
        return f"tensor({body}, dtype={self.dtype}{grad})"

    # ----- autograd ------------------------------------------------------------------------
    def backward(
        self, gy: Any = None, retain_graph: bool | None = None, create_graph: bool = False
    ) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad``.

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor(3.0, requires_grad=True)
            >>> (x * x).backward(); x.grad.item()
            6.0
        """
        # the engine (autograd, a layer above) as dualflow/__init__ installed it
        installed("backward")((self,), (gy,), retain_graph=retain_graph, create_graph=create_graph)

    def requires_grad_(self, flag: bool = True) -> Tensor:
        """Mark a leaf as requiring grad (in place); returns self."""
        if flag and self.dtype.kind not in _FLOAT_KINDS:
            raise DTypeError(f"only floating-point tensors can require grad, got {self.dtype}")
        self.requires_grad = flag
        return self

    def zero_grad(self) -> None:
        self.grad = None

    # ----- operators (each is one op) ---------------------------------------------------------
    def __add__(self, other: Any) -> Tensor:
        if type(other) is not Tensor and isinstance(other, Reflected):  # Tensor: the hot case
            return NotImplemented
        return apply(_ADD, self, other)

    def __radd__(self, other: Any) -> Tensor:
        return apply(_ADD, other, self)

    def __sub__(self, other: Any) -> Tensor:
        if type(other) is not Tensor and isinstance(other, Reflected):  # Tensor: the hot case
            return NotImplemented
        return apply(_SUB, self, other)

    def __rsub__(self, other: Any) -> Tensor:
        return apply(_SUB, other, self)

    def __mul__(self, other: Any) -> Tensor:
        if type(other) is not Tensor and isinstance(other, Reflected):  # Tensor: the hot case
            return NotImplemented
        return apply(_MUL, self, other)

    def __rmul__(self, other: Any) -> Tensor:
        return apply(_MUL, other, self)

    def __truediv__(self, other: Any) -> Tensor:
        if type(other) is not Tensor and isinstance(other, Reflected):  # Tensor: the hot case
            return NotImplemented
        return apply(_DIV, self, other)

    def __rtruediv__(self, other: Any) -> Tensor:
        return apply(_DIV, other, self)

    def __pow__(self, other: Any) -> Tensor:
        return ops.power(self, other)

    def __rpow__(self, other: Any) -> Tensor:
        return ops.power(other, self)

    def __neg__(self) -> Tensor:
        return apply(_NEG, self)

    def __pos__(self) -> Tensor:
        return self

    def __abs__(self) -> Tensor:
        return ops.abs(self)

    def __gt__(self, other: Any) -> Tensor:
        return ops.greater(self, other)

    def __ge__(self, other: Any) -> Tensor:
        return ops.greater_equal(self, other)

    def __lt__(self, other: Any) -> Tensor:
        return ops.less(self, other)

    def __le__(self, other: Any) -> Tensor:
        return ops.less_equal(self, other)

    def __eq__(self, other: Any) -> Tensor:  # type: ignore[override]
        return ops.equal(self, other)

    def __ne__(self, other: Any) -> Tensor:  # type: ignore[override]
        return ops.not_equal(self, other)

    __hash__ = object.__hash__  # identity hash, as in PyTorch, so tensors can key dicts

    def __getitem__(self, index: Any) -> Tensor:
        return ops.getitem(self, index)


_ADD, _SUB, _MUL, _DIV, _NEG = (
    OPS[n] for n in ("add", "subtract", "multiply", "divide", "negative")
)


def _default_dtype(data: Any) -> Any:
    # Python floats become float32 (the deep-learning default); arrays (numpy, cupy) keep theirs.
    if hasattr(data, "dtype"):
        return None
    array = np.asarray(data)
    return np.float32 if array.dtype == np.float64 else None


def tensor(
    data: Any, dtype: Any = None, device: Device | str | None = None, requires_grad: bool = False
) -> Tensor:
    """Create a leaf tensor from a list, scalar, numpy/cupy array or Tensor (always a copy).

    Example:
        >>> tensor([1, 2]).dtype
        dtype('int64')
        >>> tensor([1.5]).dtype
        dtype('float32')
    """
    hooks = tracing()
    source = data = data if hooks is None else hooks.unwrap(data)
    if isinstance(data, Tensor):
        data = data.raw_array
    if dtype is None:
        dtype = _default_dtype(data)
    target = device_of(data) if device is None else Device(device)
    if isinstance(data, np.ndarray) or type(data).__module__.startswith("cupy"):
        moved = send(data, target)  # a copy when it changes device (never through the host)
        array = moved.astype(dtype or moved.dtype, copy=moved is data)
    else:  # lists, scalars, other libraries' arrays
        array = send(np.array(data, dtype=dtype), target)
    result = Tensor(array, requires_grad=requires_grad)
    if hooks is not None:  # a copy of traced data is a graph node, not a constant
        hooks.on_copy(source, result)
    return result


def as_tensor(value: Any) -> Tensor:
    """Return ``value`` if it is a Tensor, else wrap it (no copy) as a constant tensor.

    Example:
        >>> as_tensor(2.0).shape
        ()
    """
    if isinstance(value, Tensor):
        return value
    hooks = tracing()
    if hooks is not None:  # a numpy-array argument of a traced call: its input
        value = hooks.unwrap(value)
    if not hasattr(value, "dtype") or isinstance(value, np.generic):
        value = np.asarray(value)
    return Tensor.wrap(value, None, 0, False)
