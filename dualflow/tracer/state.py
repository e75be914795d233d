"""Captured state: what a trace reads by reference at every call, and how to check it still fits.

A ``StateRef`` is either a tensor (parameter, buffer, optimizer or RNG state) or the ``.grad``
slot of a tensor. A trace stays valid while every ref has the shape/dtype it was traced with,
the ``.grad`` slots it saw empty are still empty, and the Modules it read keep their versions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dualflow.device import Device, device_of
from dualflow.tensor.core import Tensor
from dualflow.tracer.env_guards import EnvGuards
from dualflow.tracer.module_reads import ANY_MODE


@dataclass
class StateRef:
    """One captured input of a trace: ``kind`` is ``"tensor"`` or ``"grad"`` (of ``tensor``)."""

    kind: str
    tensor: Tensor
    shape: tuple[int, ...]
    dtype: Any
    device: str
    name: str
    requires_grad: bool = False

    @classmethod
    def of(cls, kind: str, owner: Tensor, current: Tensor, name: str) -> StateRef:
        array = current.raw_array
        device = str(device_of(array))
        return cls(kind, owner, array.shape, array.dtype, device, name, current.requires_grad)

    @classmethod
    def of_array(cls, array: Any, name: str) -> StateRef:
        """A numpy array of the Python environment, read by reference (``kind="array"``)."""
        return cls("array", array, array.shape, array.dtype, "cpu", name)

    def read(self) -> Any:
        """The array to feed the plan now."""
        if self.kind == "tensor":
            return self.tensor.raw_array
        if self.kind == "array":
            return self.tensor
        return self.tensor.raw_grad.raw_array

    def mismatch(self) -> str | None:
        """Why this ref no longer fits the trace (None when it does)."""
        if self.kind == "array":
            array = self.tensor
            if array.shape != self.shape or array.dtype != self.dtype:
                was, now = f"{self.shape}/{self.dtype}", f"{array.shape}/{array.dtype}"
                return f"{self.name}: shape/dtype {was} -> {now}"
            return None
        current = self.tensor if self.kind == "tensor" else self.tensor.raw_grad
        label = self.name + (".grad" if self.kind == "grad" else "")
        if current is None:
            return f"{label} was set when traced and is None now"
        array = current.raw_array
        if array.shape != self.shape:
            return f"{label}.shape: {self.shape} -> {array.shape}"
        if array.dtype != self.dtype:
            return f"{label}.dtype: {self.dtype} -> {array.dtype}"
        # a numpy array is on the CPU: no Device built and printed per ref per call
        device = "cpu" if type(array) is np.ndarray else str(device_of(array))
        if device != self.device:
            return f"{label}.device: {self.device} -> {device_of(array)}"
        if current.requires_grad != self.requires_grad:
            return f"{label}.requires_grad: {self.requires_grad} -> {current.requires_grad}"
        return None


@dataclass
class StateChecks:
    """Everything besides the argument signature that must hold for a trace to be reused."""

    refs: list[StateRef] = field(default_factory=list)
    empty_grads: list[tuple[Tensor, str]] = field(default_factory=list)
    empty_input_grads: list[int] = field(default_factory=list)  # flat argument positions
    modules: list[tuple[Any, int, bool | None]] = field(default_factory=list)  # + training flag
    env: EnvGuards = field(default_factory=EnvGuards)  # the Python environment the trace read
    # (flat position, tensor, name): an argument that *was* a captured/environment tensor when
    # traced; the trace read both as one value, so it serves only calls passing that tensor
    same_as_state: list[tuple[int, Any, str]] = field(default_factory=list)

    def _aliasing(self, leaves: list[Any]) -> str | None:
        # A trace that reads w as captured state cannot serve a call passing w as an argument.
        # (The converse, a trace made by passing a captured tensor as the argument, cannot be
        # told apart from a plain argument: documented as a limitation.)
        arrays = [leaf.raw_array if isinstance(leaf, Tensor) else leaf for leaf in leaves]
        if arrays and self.refs:
            ids = {id(a) for a in arrays}
            for ref in self.refs:
                if id(ref.read()) in ids:
                    return f"an argument is now the captured tensor {ref.name}"
        return None

    def mismatch(self, leaves: list[Any] = ()) -> str | None:
        """The first reason the trace cannot run now with arguments ``leaves``, or None."""
        if self.env.entries:
            reason = self.env.mismatch()
            if reason is not None:
                return reason
        for position, tensor, name in self.same_as_state:
            if leaves[position] is not tensor:
                return (
                    f"argument {position} was the captured tensor {name} when traced (the trace "
                    "read both as one value); now it is another tensor"
                )
        for position in self.empty_input_grads:
            if leaves[position].raw_grad is not None:
                return f"argument {position} arrives with a .grad (it had none when traced)"
        for module, version, training in self.modules:
            if module._version != version:
                return (
                    f"{type(module).__name__} was modified (version {version} -> {module._version})"
                )
            if training is not ANY_MODE and getattr(module, "training", None) != training:
                return f"{type(module).__name__}.training: {training} -> {module.training}"
        for owner, name in self.empty_grads:
            if owner.raw_grad is not None:
                return f"{name}.grad was None when traced and is set now"
        for ref in self.refs:
            reason = ref.mismatch()
            if reason is not None:
                return reason
        return self._aliasing(leaves)  # last: it reads every ref, which must exist by now


def plan_device(leaves: list[Any], refs: list[StateRef]) -> Device:
    """The device a trace's plan runs on: where its arguments and captured state live.

    Example:
        >>> import numpy as np
        >>> plan_device([np.zeros(2)], [])
        Device('cpu')
    """
    for leaf in leaves:
        device = device_of(leaf.raw_array if isinstance(leaf, Tensor) else leaf)
        if device.kind != "cpu":
            return device
    for ref in refs:
        if ref.device != "cpu":
            return Device(ref.device)
    return Device("cpu")
