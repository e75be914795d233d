"""How a trace sees ``.grad``: which slot a gradient lives in across calls, and its reads/writes.

A ``.grad`` read of captured state becomes a state input (or a check that it stays empty), a
write becomes an extra output the call commits; an argument arriving with a ``.grad`` makes the
trace single-use. Mixed into ``TracingInterpreter`` (``trace.py``), whose fields it uses.
"""

from __future__ import annotations

from typing import Any

from dualflow.tensor.core import Tensor


class GradSlots:
    """The ``.grad`` hooks of the tracing interpreter."""

    def grad_slot(self, owner: Tensor) -> tuple[str, Any]:
        """Where ``owner.grad`` lives across calls: ("input", position), ("state", owner),
        or ("temporary", None) for a tensor born inside this call (nothing to keep)."""
        if id(owner) in self.input_positions:
            return "input", self.input_positions[id(owner)]
        born_here = owner.value is not None and owner.value in self.values
        if born_here and id(owner) not in self.slots:
            return "temporary", None
        return "state", owner

    def on_grad_read(self, owner: Tensor, grad: Tensor | None) -> Tensor | None:
        key = id(owner)
        if key in self.grad_seen:
            return grad
        self.grad_seen[key] = owner
        kind, where = self.grad_slot(owner)
        if kind == "input":
            if grad is not None:  # an argument arriving with a .grad: not reusable
                self.single_use = True
            else:
                self.checks.empty_input_grads.append(where)
        elif kind == "state":
            name = self.names.get(key) or owner.name or "tensor"
            if grad is None:
                self.checks.empty_grads.append((owner, name))
            elif not (grad.value is not None and grad.value in self.values):
                self.capture(grad, "grad", owner)
        return grad

    def on_grad_write(self, owner: Tensor, grad: Tensor | None) -> None:
        self.grad_backups.setdefault(id(owner), (owner, owner.raw_grad))  # for rollback
        self.grad_seen.setdefault(id(owner), owner)
        if self.grad_slot(owner)[0] != "temporary":
            self.grad_written[id(owner)] = owner
        if grad is not None:
            self.value_of(grad)
