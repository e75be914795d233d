"""Tensors across devices and libraries: ``to_device`` (differentiable) and ``from_dlpack``.

A move is taped like an op (its backward moves the gradient back), but it is not a registered
op: a compiled plan runs on one device, so a move inside a compiled function fails closed.
"""

from __future__ import annotations

from typing import Any

from dualflow._config import config
from dualflow.device import Device, array_from_dlpack, device_of, send
from dualflow.errors import TracingError, with_location
from dualflow.ops.dispatch import tracing
from dualflow.ops.registry import Meta, OpDef
from dualflow.tensor.core import Tensor
from dualflow.tensor.tape import Node
from dualflow.tensor.tape import record as record_node


def _forward(xp: Any, x: Any, *, device: str, source: str) -> Any:
    return send(x, device)


def _infer(x: Meta, *, device: str, source: str) -> tuple[Meta]:
    return (Meta(tuple(x.shape), x.dtype),)


def _backward(ctx: Node, gy: Tensor) -> Tensor:
    return to_device(gy, ctx.attrs["source"])  # itself taped: double backward works too


TO_DEVICE = OpDef("to_device", "transfer", _forward, _infer, backward=_backward)


def to_device(x: Tensor, device: Device | str) -> Tensor:
    """``x`` on ``device``: ``x`` itself when it is already there (zero-copy), else a copy
    through which gradients flow back to ``x`` (like PyTorch's ``.to``).

    Raises:
        DeviceError: an unknown device, cupy missing, or the CUDA device not visible.
        TracingError: a move to another device inside a compiled function (move the data
            before calling it: a compiled graph runs on one device).

    Example:
        >>> import dualflow
        >>> x = dualflow.tensor([1.0, 2.0], requires_grad=True)
        >>> to_device(x, "cpu") is x
        True
    """
    target = Device(device)
    source = device_of(x.raw_array)
    if source == target:
        return x
    if tracing() is not None:
        raise TracingError(
            with_location(
                f"to_device: moving a tensor from {source} to {target} inside a compiled "
                "function; a compiled graph runs on one device, so move inputs and the model "
                "(Module.to_device) before calling it"
            )
        )
    record = x.requires_grad and config.grad_enabled
    result = Tensor.wrap(send(x.raw_array, target), None, 0, record)
    if record:
        attrs = {"device": str(target), "source": str(source)}
        result.creator = record_node(TO_DEVICE, attrs, (x,))
    return result


def from_dlpack(obj: Any) -> Tensor:
    """A tensor sharing memory with ``obj``: a numpy/cupy/torch array or anything else with
    ``__dlpack__`` (host memory becomes a numpy array, CUDA memory a cupy one).

    Raises:
        TypeError: ``obj`` does not speak DLPack.
        DeviceError: its memory is on a device numpy and cupy cannot read.

    Example:
        >>> import numpy as np
        >>> a = np.arange(3.0, dtype=np.float32)
        >>> t = from_dlpack(a); a[0] = 7.0  # the same memory: the tensor sees the write
        >>> t.tolist(), t.dtype
        ([7.0, 1.0, 2.0], dtype('float32'))
    """
    return Tensor(array_from_dlpack(obj))
