"""Conversion and creation methods with PyTorch's meanings: float()/long()/..., to(device|dtype),
cpu(), cuda(), clone(), detach(), ``.data``, new_zeros/new_ones/new_full/new_tensor, type(),
type_as.

Casts are ``ops.cast`` (a tensor already of the dtype is returned as is, as in PyTorch); moves
are ``to_device``; ``detach()`` and ``.data`` share the array, so in-place writes through them
reach the original tensor (``tensor_methods.inplace`` keeps track of that for compiled code).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow import ops
from dualflow.device import Device
from dualflow.errors import DTypeError, TracingError, with_location
from dualflow.ops.dispatch import tracing
from dualflow.tensor.methods.inplace import alias_of
from dualflow.tensor.methods.size import shape_args

_DEVICE_KINDS = ("cpu", "cuda", "gpu")


def _is_device(value: Any) -> bool:
    if isinstance(value, Device):
        return True
    return isinstance(value, str) and value.strip().lower().partition(":")[0] in _DEVICE_KINDS


def _parse_to(args: tuple, kwargs: dict) -> tuple[Any, Any]:
    """``(device, dtype)`` from ``to``'s PyTorch forms: (device), (dtype), (device, dtype),
    (tensor), with ``device=``/``dtype=`` keywords; ``non_blocking``/``copy`` are accepted."""
    device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    unknown = sorted(set(kwargs) - {"copy", "memory_format"})
    if unknown:
        raise TypeError(with_location(f"to() got unexpected arguments {unknown}"))
    for arg in args:
        if hasattr(arg, "shape") and hasattr(arg, "device"):  # to(other): its device and dtype
            device, dtype = arg.device, arg.dtype
        elif _is_device(arg):
            device = arg
        elif arg is not None:
            dtype = arg
    return device, dtype


# PyTorch's legacy tensor type names (x.type()): numpy dtype name -> "<name>Tensor"
_TYPE_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long"}
_TYPE_NAMES.update({"int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte"})
_TYPE_NAMES["bool"] = "Bool"


def _dtype_of_type_name(name: str) -> np.dtype:
    """The dtype of ``"torch.LongTensor"`` / ``"dualflow.FloatTensor"`` (CPU names only)."""
    prefix, _, short = name.rpartition(".")
    dtypes = {f"{v}Tensor": k for k, v in _TYPE_NAMES.items()}
    if prefix not in ("torch", "dualflow") or short not in dtypes:
        raise DTypeError(
            with_location(
                f"type({name!r}): not a tensor type name; use e.g. 'torch.LongTensor', or a "
                "dtype (x.type(dualflow.int64)); move devices with x.to('cuda')"
            )
        )
    return np.dtype(dtypes[short])


class ConvertMethods:
    """Tensor casts, moves, copies and same-device constructors."""

    __slots__ = ()

    def float(self) -> Any:
        """This tensor as float32 (itself when it already is).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1], dtype="int64").float().dtype
            dtype('float32')
        """
        return ops.cast(self, "float32")

    def double(self) -> Any:
        """As float64.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0]).double().dtype
            dtype('float64')
        """
        return ops.cast(self, "float64")

    def half(self) -> Any:
        """As float16.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0]).half().dtype
            dtype('float16')
        """
        return ops.cast(self, "float16")

    def long(self) -> Any:
        """As int64.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.7, -1.7]).long().tolist()
            [1, -1]
        """
        return ops.cast(self, "int64")

    def int(self) -> Any:
        """As int32.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([2.7]).int().tolist()
            [2]
        """
        return ops.cast(self, "int32")

    def short(self) -> Any:
        """As int16.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([2.7]).short().dtype
            dtype('int16')
        """
        return ops.cast(self, "int16")

    def byte(self) -> Any:
        """As uint8.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([2.7]).byte().tolist()
            [2]
        """
        return ops.cast(self, "uint8")

    def bool(self) -> Any:
        """As bool (non-zero is True).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([0.0, 2.0]).bool().tolist()
            [False, True]
        """
        return ops.cast(self, "bool")

    def type(self, dtype: Any = None, non_blocking: bool = False) -> Any:
        """PyTorch's ``x.type()``: without ``dtype`` the type name (``"dualflow.FloatTensor"``),
        with one this tensor as ``dtype`` (itself when it already is): ``x.type(dualflow.int64)``,
        also given as a name (``"torch.LongTensor"``, ``"dualflow.LongTensor"``).

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([1.5])
            >>> x.type(), x.type(dualflow.int64).tolist(), x.type("torch.DoubleTensor").dtype
            ('dualflow.FloatTensor', [1], dtype('float64'))
        """
        if dtype is None:
            name = _TYPE_NAMES.get(np.dtype(self.dtype).name, np.dtype(self.dtype).name)
            return f"dualflow.{'cuda.' if self.device.kind == 'cuda' else ''}{name}Tensor"
        if isinstance(dtype, str) and dtype.endswith("Tensor"):
            dtype = _dtype_of_type_name(dtype)
        return ops.cast(self, np.dtype(dtype))

    def type_as(self, other: Any) -> Any:
        """As ``other``'s dtype.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.5]).type_as(dualflow.tensor([1])).tolist()
            [1]
        """
        return ops.cast(self, other.dtype)

    def astype(self, dtype: Any) -> Any:
        """As ``dtype`` (numpy's name for a cast).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.5]).astype("float64").dtype
            dtype('float64')
        """
        return ops.cast(self, dtype)

    def to(self, *args: Any, **kwargs: Any) -> Any:
        """This tensor on a device and/or with a dtype: ``to("cuda")``, ``to("float64")``,
        ``to(device, dtype)``, ``to(other)``; itself when nothing changes (``copy=True``: a copy).

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([1.0])
            >>> x.to("cpu") is x, x.to(dualflow.float64).dtype, x.to("cpu", "int64").tolist()
            (True, dtype('float64'), [1])
        """
        device, dtype = _parse_to(args, dict(kwargs))
        out = self if dtype is None else ops.cast(self, np.dtype(dtype))
        out = out if device is None else out.to_device(device)
        if kwargs.get("copy") and out is self:
            out = self.clone()
        return out

    def cpu(self) -> Any:
        """This tensor on the CPU (itself when it is there).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0]).cpu().device
            Device('cpu')
        """
        return self.to_device("cpu")

    def cuda(self, device: Any = None, non_blocking: bool = False) -> Any:
        """This tensor on a CUDA device (``cuda:0`` by default; an int picks the device)."""
        if device is None:
            device = "cuda"
        elif isinstance(device, int):
            device = f"cuda:{device}"
        return self.to_device(device)

    @property
    def is_cuda(self) -> bool:
        """Whether the data lives on a CUDA device.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0]).is_cuda
            False
        """
        return self.device.kind == "cuda"

    def clone(self) -> Any:
        """A copy with its own memory; gradients flow back to this tensor.

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([1.0]); y = x.clone(); _ = y.add_(1.0)
            >>> x.tolist(), y.tolist()
            ([1.0], [2.0])
        """
        return ops.copy(self)

    def detach(self) -> Any:
        """A tensor sharing this one's data, cut from the graph (writes to it reach this one).

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([1.0], requires_grad=True)
            >>> d = x.detach(); d.requires_grad, d.is_leaf
            (False, True)
        """
        return alias_of(self)

    def detach_(self) -> Any:
        """Cut this tensor from the graph in place (it becomes a leaf without grad).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0], requires_grad=True).detach_().requires_grad
            False
        """
        self.creator = None
        self.requires_grad = False
        return self

    @property
    def data(self) -> Any:
        """A tensor sharing the data without autograd history (PyTorch's ``.data``): in-place
        writes to it (``p.data.add_(...)``) change this tensor, also in compiled functions.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0], requires_grad=True).data.requires_grad
            False
        """
        return alias_of(self)

    @data.setter
    def data(self, value: Any) -> None:
        if tracing() is not None:
            raise TracingError(
                with_location(
                    "assigning .data inside a compiled function; write in place instead: "
                    "with dualflow.no_grad(): p.copy_(value)"
                )
            )
        array = getattr(value, "raw_array", None)
        if array is None:
            raise DTypeError(with_location(".data must be set to a dualflow Tensor"))
        self.raw_array = array  # PyTorch's semantics: this tensor now shares value's data

    def new_tensor(self, data: Any, dtype: Any = None, device: Any = None) -> Any:
        """A new leaf tensor from ``data`` with this tensor's dtype and device by default.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0], dtype="float64").new_tensor([2, 3]).dtype
            dtype('float64')
        """
        from dualflow.tensor.core import tensor  # noqa: PLC0415 - tensor imports this module

        return tensor(data, dtype=dtype or self.dtype, device=device or self.device)

    def new_full(self, size: Any, fill_value: Any, **kwargs: Any) -> Any:
        """A tensor of ``size`` filled with ``fill_value``, with this tensor's dtype and device.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1], dtype="int32").new_full((2,), 7).tolist()
            [7, 7]
        """
        return _new(self, shape_args((size,)), fill_value, kwargs)

    def new_zeros(self, *size: Any, **kwargs: Any) -> Any:
        """Zeros of ``size`` with this tensor's dtype and device.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1], dtype="int32").new_zeros(2, 2).tolist()
            [[0, 0], [0, 0]]
        """
        return _new(self, _sized(size, kwargs), 0, kwargs)

    def new_ones(self, *size: Any, **kwargs: Any) -> Any:
        """Ones of ``size`` with this tensor's dtype and device.

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([1.0])
            >>> x.new_ones((2,)).tolist(), x.new_ones(size=3).shape
            ([1.0, 1.0], (3,))
        """
        return _new(self, _sized(size, kwargs), 1, kwargs)

    new_empty = new_zeros

    def element_size(self) -> int:
        """Bytes per element.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0]).element_size()
            4
        """
        return self.dtype.itemsize


def _sized(size: tuple, kwargs: dict) -> tuple:
    """``new_zeros(2, 3)``, ``new_zeros((2, 3))`` or PyTorch's ``new_zeros(size=(2, 3))``."""
    if "size" in kwargs:
        if size:
            raise TypeError(f"size given both positionally {size!r} and as size=")
        return shape_args((kwargs.pop("size"),))
    return shape_args(size)


def _new(x: Any, shape: tuple, value: Any, kwargs: dict) -> Any:
    dtype = kwargs.pop("dtype", None) or x.dtype
    device = kwargs.pop("device", None) or x.device
    requires_grad = kwargs.pop("requires_grad", False)
    if kwargs:
        raise TypeError(with_location(f"unexpected arguments {sorted(kwargs)}"))
    out = ops.full(shape, value, dtype)
    out = out if Device(device) == out.device else out.to_device(device)
    return out.requires_grad_(True) if requires_grad else out
