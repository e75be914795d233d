"""The typed protocol of the tracing interpreter's hooks: what Tensor, Module, Optimizer and the
autograd engine tell a trace in progress.

The tracer itself sits layers above; the code that calls it (the Tensor core, nn, optim, the
engine) reaches it through ``dispatch.tracing()``, which returns the current interpreter's hooks
(None when not tracing). ``tests/tracer/test_hooks_protocol.py`` checks that ``TracingInterpreter``
implements every member with the same signature.
"""

from __future__ import annotations

from typing import Any, Protocol

# What the annotations mean: a dualflow Tensor (dualflow/tensor/core.py) and a graph IR Value
# (dualflow/graph_ir/ir.py). Both live in layers above, which this one never imports, type-only
# imports included (tests/test_layering.py).
Tensor = Any
Value = Any


class TracingHooks(Protocol):
    """The events a trace must observe beyond op calls (DESIGN §3: fail closed, or record)."""

    def on_new_tensor(self, tensor: Tensor) -> None:
        """A Tensor built inside the traced function: a graph constant."""

    def unwrap(self, data: Any) -> Any:
        """The array behind a numpy-array argument of the traced call (else ``data`` itself)."""

    def on_copy(self, source: Any, copy: Tensor) -> None:
        """``tensor(source)`` inside the function: a copy of traced data stays traced."""

    def on_raw_access(self, tensor: Tensor, what: str) -> None:
        """A raw value read (``.array``, ``numpy()``...) that a graph cannot replay."""

    def on_concrete(self, tensor: Tensor, kind: str, value: Any) -> None:
        """``bool()``/``float()``/``.item()`` of a tensor: a guard on ``value``."""

    def symbolic_shape(self, tensor: Tensor) -> tuple | None:
        """The shape with dynamic sizes as ``SymInt`` expressions, or None when it has none
        (asked only while a trace with dynamic dimensions runs: ``symbolic_shapes.ACTIVE``)."""

    def on_grad_read(self, owner: Tensor, grad: Tensor | None) -> Tensor | None:
        """A ``.grad`` read; returns the gradient the caller sees."""

    def on_grad_write(self, owner: Tensor, grad: Tensor | None) -> None:
        """A ``.grad`` write (before it happens, so a failed trace can undo it)."""

    def on_module_read(self, module: Any) -> None:
        """The trace depends on a versioned object (Module, Optimizer)."""

    def on_train_mode(self, modules: list[Any], mode: bool) -> None:
        """``Module.train(mode)`` is about to set ``training`` on ``modules``."""

    def on_module_write(self, module: Any, name: str, value: Any) -> None:
        """A Python attribute assignment on a Module: the graph cannot replay it."""

    def fail_closed(self, message: str, line: str | None = None) -> None:
        """The trace cannot be used (a change a graph cannot replay): raised at once under
        ``fallback="error"``, else recorded; the run goes on, correct, eagerly."""

    def on_backward_node(self, node: Any) -> None:
        """The engine runs tape ``node``'s backward next (None: the backward pass ended)."""

    def value_of(self, tensor: Tensor) -> Value:
        """The graph value of ``tensor`` (captured as state when the trace has not seen it)."""
