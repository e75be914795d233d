"""``Module``: the container of parameters, buffers and submodules, in assignment order.

Assigning a Parameter, a Module or (for registered names) a buffer Tensor registers it; every
attribute assignment bumps the module's ``version`` so a compiled function can notice structural
changes. Names are dotted paths (``layer1.0.conv.weight``), stable across processes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from dualflow._config import config
from dualflow.device import Device, send
from dualflow.errors import ShapeError, TracingError, with_location
from dualflow.nn.parameter import Parameter
from dualflow.tensor import Tensor


class Module:
    """Base class of layers and models; subclasses define ``forward``.

    Example:
        >>> class Affine(Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.w = Parameter(np.ones((2,), np.float32))
        ...     def forward(self, x):
        ...         return x * self.w
        >>> [name for name, _ in Affine().named_params()]
        ['w']
    """

    def __init__(self) -> None:
        object.__setattr__(self, "_params", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_version", 0)

    # ----- registration --------------------------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        if "_params" not in self.__dict__:
            raise AttributeError(f"call super().__init__() before assigning {name!r}")
        if config.tracer is not None:  # fails closed: the graph cannot replay Python state
            config.tracer.on_module_write(self, name, value)
        if isinstance(value, Parameter):
            home = self._params
        elif isinstance(value, Module):
            home = self._modules
        elif name in self._buffers and (value is None or isinstance(value, Tensor)):
            home = self._buffers
        else:
            home = None
        for table in (self._params, self._buffers, self._modules):
            if table is not home and name in table:
                del table[name]
        if home is None:
            object.__setattr__(self, name, value)
        else:
            home[name] = value  # a re-assigned name keeps its place in the order (as PyTorch)
        object.__setattr__(self, "_version", self._version + 1)

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails: parameters, buffers and submodules live here.
        for table in ("_params", "_buffers", "_modules"):
            entries = self.__dict__.get(table)
            if entries is not None and name in entries:
                if config.tracer is not None:  # the trace depends on this module's structure
                    config.tracer.on_module_read(self)
                return entries[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def __delattr__(self, name: str) -> None:
        for table in (self._params, self._buffers, self._modules):
            if name in table:
                del table[name]
                break
        else:
            object.__delattr__(self, name)
        object.__setattr__(self, "_version", self._version + 1)

    def register_buffer(self, name: str, tensor: Tensor | None) -> None:
        """Register non-trainable state (e.g. running statistics) saved in the state dict."""
        self._buffers[name] = tensor
        object.__setattr__(self, "_version", self._version + 1)

    @property
    def version(self) -> int:
        """Counter bumped by every attribute assignment on this module."""
        return self._version

    # ----- traversal -------------------------------------------------------------------------
    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """This module and every submodule, depth first, with dotted names."""
        yield prefix, self
        for name, child in self._modules.items():
            if child is not None:
                yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self) -> Iterator[Module]:
        return (m for _, m in self.named_modules())

    def children(self) -> Iterator[Module]:
        return (m for m in self._modules.values() if m is not None)

    def named_children(self) -> Iterator[tuple[str, Module]]:
        return ((n, m) for n, m in self._modules.items() if m is not None)

    def named_params(self) -> Iterator[tuple[str, Parameter]]:
        """Every parameter with its dotted name, in registration order (shared ones once)."""
        seen: set[int] = set()
        for prefix, module in self.named_modules():
            for name, p in module._params.items():
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{prefix}.{name}" if prefix else name), p

    def params(self) -> Iterator[Parameter]:
        return (p for _, p in self.named_params())

    def named_buffers(self) -> Iterator[tuple[str, Tensor]]:
        for prefix, module in self.named_modules():
            for name, b in module._buffers.items():
                if b is not None:
                    yield (f"{prefix}.{name}" if prefix else name), b

    # ----- modes, grads, devices ---------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set training mode here and in every submodule (dropout, batch norm read it)."""
        for module in self.modules():  # compiled callers check the flag with the version
            object.__setattr__(module, "training", bool(mode))
        return self

    def eval(self) -> Module:
        """Inference mode: dropout off, batch norm uses running statistics."""
        return self.train(False)

    def zero_grad(self) -> None:
        """Clear ``.grad`` of every parameter."""
        for p in self.params():
            p.grad = None

    def to_device(self, device: Device | str) -> Module:
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
        if config.tracer is not None:  # a graph cannot replay a move of captured state
            raise TracingError(
                with_location(
                    f"Module.to_device({str(device)!r}) inside a compiled function; move the "
                    "model once before calling it"
                )
            )
        tensors = [*self.params(), *(b for _, b in self.named_buffers())]
        arrays = [send(t._array, device) for t in tensors]  # every copy before any write
        grads = [None if t._grad is None else send(t._grad._array, device) for t in tensors]
        for t, array, grad in zip(tensors, arrays, grads):
            t._array = array
            if grad is not None and grad is not t._grad._array:
                t._grad = Tensor._wrap(grad, None, 0, False)
        return self

    # ----- state ---------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Tensor]:
        """Parameters and buffers by dotted name (the tensors themselves, not copies)."""
        return {**dict(self.named_params()), **dict(self.named_buffers())}

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Copy values into this module's tensors by name; nothing changes if a check fails.

        ``strict`` requires the key sets to match exactly; shapes must always match.
        """
        own = self.state_dict()
        missing = sorted(set(own) - set(state))
        unexpected = sorted(set(state) - set(own))
        mismatched = [
            f"{k}: checkpoint {tuple(np.shape(_array_of(state[k])))} vs model {own[k].shape}"
            for k in own
            if k in state and tuple(np.shape(_array_of(state[k]))) != own[k].shape
        ]
        problems = []
        if strict and missing:
            problems.append(f"missing keys: {missing}")
        if strict and unexpected:
            problems.append(f"unexpected keys: {unexpected}")
        if mismatched:
            problems.append("shape mismatches: " + "; ".join(mismatched))
        if problems:
            raise ShapeError("load_state_dict: " + " | ".join(problems))
        for key, target in own.items():
            if key in state:
                value = _array_of(state[key])  # numpy or cupy: sent where the target lives
                value = value if hasattr(value, "shape") else np.asarray(value)
                target._array[...] = send(value, target.device)  # checked above: all-or-nothing

    # ----- calling -----------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if config.tracer is not None:  # modules without parameters matter too (Dropout.p)
            config.tracer.on_module_read(self)
        return self.forward(*args, **kwargs)

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for name, child in self.named_children():
            lines.append(f"  ({name}): " + repr(child).replace("\n", "\n  "))
        return lines[0] + ")" if len(lines) == 1 else "\n".join(lines) + "\n)"


def _array_of(value: Any) -> Any:
    return value._array if isinstance(value, Tensor) else value
