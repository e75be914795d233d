"""What ``Module`` does to its tensors as a whole: state dicts, dtype/device moves, zeroing grads.

State dicts follow PyTorch exactly: keys module by module (own parameters, own persistent buffers,
then children), every path to a tied tensor kept, values written all-or-nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from dualflow import ops
from dualflow._config import no_grad
from dualflow.device import Device, send
from dualflow.errors import DTypeError, ShapeError
from dualflow.ops.dispatch import tracing
from dualflow.serialization import check_cast
from dualflow.tensor.core import Tensor

if TYPE_CHECKING:
    from dualflow.nn.module import Module


def fail_closed(what: str) -> None:
    """Inside a compiled function, fail the trace closed (``what`` names the act): a
    TracingError under ``fallback="error"``, else the call goes on eagerly and the function
    leaves the fast path, as for every other fail-closed event."""
    hooks = tracing()
    if hooks is not None:  # a graph cannot replay a Python-level structural change
        hooks.fail_closed(
            f"{what} inside a compiled function: a compiled graph cannot replay it. Do it "
            "once outside the compiled function (the function is then retraced)"
        )


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict`` returns: keys the dict lacked, and keys the model lacks."""

    missing_keys: list[str]
    unexpected_keys: list[str]


def state_items(module: Module, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
    """(key, tensor) of every parameter and persistent buffer, in PyTorch's order.

    Example:
        >>> from dualflow.nn import BatchNorm1d, Linear, Sequential
        >>> [k for k, _ in state_items(Sequential(Linear(2, 2), BatchNorm1d(2)))][:4]
        ['0.weight', '0.bias', '1.weight', '1.bias']
    """
    for name, p in module._params.items():
        if p is not None:
            yield prefix + name, p
    for name, b in module._buffers.items():
        if b is not None and name not in module._non_persistent:
            yield prefix + name, b
    for name, child in module._modules.items():
        if child is not None:
            yield from state_items(child, f"{prefix}{name}.")


def _array_of(value: Any) -> Any:
    if isinstance(value, Tensor):
        return value.raw_array
    return value if hasattr(value, "shape") and hasattr(value, "dtype") else np.asarray(value)


def load(module: Module, state: Any, strict: bool) -> IncompatibleKeys:
    """Check ``state`` against ``module`` and copy it in (each shared tensor once)."""
    if not hasattr(state, "keys"):
        raise TypeError(f"expected a dict-like state, got {type(state).__name__}")
    own = list(state_items(module))
    keys = {k for k, _ in own}
    missing = [k for k, _ in own if k not in state]
    unexpected = [k for k in state if k not in keys]
    arrays = {k: _array_of(state[k]) for k, _ in own if k in state}
    problems = [
        f"size mismatch for {k}: copying a param with shape {tuple(arrays[k].shape)} from "
        f"checkpoint, the shape in current model is {t.shape}"
        for k, t in own
        if k in arrays and tuple(arrays[k].shape) != t.shape
    ]
    if strict and unexpected:
        problems.insert(0, f"Unexpected key(s) in state_dict: {unexpected}")
    if strict and missing:
        problems.insert(0, f"Missing key(s) in state_dict: {missing}")
    if problems:
        raise ShapeError(
            f"Error(s) in loading state_dict for {type(module).__name__}:\n\t"
            + "\n\t".join(problems)
        )
    writes: dict[int, tuple[Tensor, Any]] = {}
    for key, target in own:  # a tied tensor is written once, with the last key's value
        if key in arrays:
            check_cast(
                arrays[key], target.dtype, f"load_state_dict of {type(module).__name__}: {key}"
            )
            writes[id(target)] = (target, arrays[key])
    with no_grad():  # checked above: all-or-nothing; a state write like any other (an undoable
        for target, value in writes.values():  # eager call saves it, lazy re-execution sees it)
            ops.assign(target, send(value, target.device))
    return IncompatibleKeys(missing, unexpected)


def zero_grads(params: Iterable[Tensor], set_to_none: bool) -> None:
    """Set each ``.grad`` to None, or (``set_to_none=False``) to zeros where one exists.

    Example:
        >>> import dualflow
        >>> p = dualflow.tensor([1.0], requires_grad=True); p.grad = dualflow.tensor([3.0])
        >>> zero_grads([p], set_to_none=False); p.grad.tolist()
        [0.0]
    """
    for p in params:
        if set_to_none or p.grad is None:
            p.grad = None
        else:  # a new zero tensor: a gradient array may be shared or a read-only view
            with no_grad():
                p.grad = ops.zeros_like(p.grad)


def _is_device(spec: Any) -> bool:
    if isinstance(spec, Device):
        return True
    return isinstance(spec, str) and spec.strip().lower().split(":")[0] in ("cpu", "cuda", "gpu")


def parse_to_args(args: tuple, kwargs: dict) -> tuple[Device | None, np.dtype | None]:
    """``(device, dtype)`` from PyTorch's ``to(...)`` call forms.

    Example:
        >>> parse_to_args(("cpu", "float64"), {})
        (Device('cpu'), dtype('float64'))
    """
    unknown = set(kwargs) - {"device", "dtype", "non_blocking", "copy", "memory_format"}
    if unknown or len(args) > 3:
        raise TypeError(f"to() got unexpected arguments {sorted(unknown) or args}")
    device, dtype = kwargs.get("device"), kwargs.get("dtype")
    for arg in args:
        if isinstance(arg, Tensor):
            device, dtype = arg.device, arg.dtype
        elif _is_device(arg):
            device = arg
        elif isinstance(arg, bool) or arg is None:
            continue  # PyTorch's positional non_blocking / copy flags
        else:
            dtype = arg
    try:
        dtype = None if dtype is None else np.dtype(dtype)
    except TypeError:
        raise DTypeError(f"to(): {dtype!r} is neither a device nor a dtype") from None
    if dtype is not None and dtype.kind != "f":
        raise DTypeError(f"Module.to() only accepts floating point dtypes, but got {dtype}")
    return (None if device is None else Device(device)), dtype


def convert(module: Module, device: Device | None, dtype: np.dtype | None) -> None:
    """Move/cast every parameter, gradient and buffer in place: all of them or none."""
    tensors = list({id(t): t for t in (*module.parameters(), *module.buffers())}.values())

    def moved(array: Any) -> Any:
        if device is not None:
            array = send(array, device)
        if dtype is not None and array.dtype.kind == "f" and array.dtype != dtype:
            array = array.astype(dtype)
        return array

    arrays = [moved(t.raw_array) for t in tensors]  # every copy before any write
    grads = [None if t.raw_grad is None else moved(t.raw_grad.raw_array) for t in tensors]
    for t, array, grad in zip(tensors, arrays, grads):
        t.raw_array = array
        if grad is not None and grad is not t.raw_grad.raw_array:
            t.raw_grad = Tensor.wrap(grad, None, 0, False)
    for m in module.modules():
        m._bump()


class ConversionMethods:
    """Module's dtype and device methods (``to``, ``cuda``, ``float``...): in-place moves."""

    def to(self, *args: Any, **kwargs: Any) -> Any:
        """Move and/or cast in place: ``to(device)``, ``to(dtype)``, ``to(device, dtype)`` or
        ``to(tensor)``; only floating-point parameters and buffers change dtype (as PyTorch).

        Example:
            >>> from dualflow.nn import Linear
            >>> str(Linear(2, 1).to("float64").weight.dtype)
            'float64'
        """
        device, dtype = parse_to_args(args, kwargs)
        fail_closed("Module.to()")
        convert(self, device, dtype)
        return self

    def to_device(self, device: Device | str) -> Any:
        """Move every parameter (with its ``.grad``) and buffer to ``device`` in place.

        Tensors already there are not copied; all are moved, or none when a copy fails.
        Optimizer state is not moved: build the optimizer after moving the model.

        Example:
            >>> from dualflow import nn
            >>> layer = nn.Linear(2, 3); w = layer.weight.array
            >>> layer.to_device("cpu") is layer, layer.weight.array is w
            (True, True)
        """
        device = Device(device)
        fail_closed(f"Module.to_device({str(device)!r})")
        convert(self, device, None)
        return self

    def cuda(self, device: int | str | None = None) -> Any:
        """Move to the GPU (``cuda:device``, default ``cuda:0``)."""
        return self.to(f"cuda:{device}" if isinstance(device, int) else (device or "cuda"))

    def cpu(self) -> Any:
        """Move to the host."""
        return self.to("cpu")

    def float(self) -> Any:
        """Cast floating-point parameters and buffers to float32."""
        return self.to("float32")

    def double(self) -> Any:
        """Cast floating-point parameters and buffers to float64."""
        return self.to("float64")

    def half(self) -> Any:
        """Cast floating-point parameters and buffers to float16."""
        return self.to("float16")
