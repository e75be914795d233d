"""Forward mode: an interpreter level that carries a tangent beside every tensor computed from
its primals, pushing tangents through each op's jvp rule (``jvp_rules``) as the op runs.

A level sits on the dispatch slot above whatever interpreter was current (eager, the tracer,
an outer level): each op runs there first, then, if an input has a tangent of this level, the
op's rule runs with this level switched off, so the rule's own ops are seen by the levels and
the tape below (a tangent is differentiable, and an outer level gets its tangents too), never
by this one. Under ``@dualflow.compile`` the tracer is below: primal and tangent ops land in
one graph.
"""

from __future__ import annotations

from typing import Any

from dualflow import ops
from dualflow.errors import with_location
from dualflow.func.jvp_rules import rule_of
from dualflow.ops import dispatch
from dualflow.ops.dispatch import current_interpreter
from dualflow.ops.registry import OpDef
from dualflow.tensor.core import Tensor
from dualflow.tensor.tape import edge


def _holder(value: Tensor) -> Any:
    """What identifies ``value``'s tangent: the tape node and output index that made it (a
    backward re-wraps saved outputs in new Tensors, ``ctx.y``, which must find the tangent of
    the value they hold), else the Tensor itself (a detached alias has no tangent)."""
    return value if value.creator is None else edge(value)  # the tape's one edge rule


def _root(array: Any) -> Any:
    while getattr(array, "base", None) is not None:
        array = array.base
    return array


class ForwardLevel:
    """One jvp level: the tangents of the tensors this level tracks."""

    def __init__(self) -> None:
        self.below = current_interpreter.get()  # None: the default (eager) interpreter
        self.hooks = None if self.below is None else self.below.hooks
        self.tangents: dict[Any, tuple[Any, Tensor, Tensor]] = {}
        self.active = True

    def before_read(self, array: Any, writable: bool) -> None:
        """Data is about to be read outside an op (``dispatch.reading``, lazy re-execution):
        the interpreter below runs what it has recorded first, as it would without this level."""
        below = getattr(self.below, "before_read", None)
        if below is not None and self.below.hooks is None:
            below(array, writable)

    @staticmethod
    def _key(holder: Any) -> Any:
        return id(holder) if isinstance(holder, Tensor) else (id(holder[0]), holder[1])

    def tangent_of(self, value: Any) -> Tensor | None:
        """The tangent this level holds for ``value`` (None: a constant to it)."""
        holder = _holder(value)
        entry = self.tangents.get(self._key(holder))
        if entry is None:
            return None
        same = entry[0] is holder if isinstance(holder, Tensor) else entry[0][0] is holder[0]
        return entry[2] if same else None

    def set_tangent(self, primal: Tensor, tangent: Tensor | None) -> None:
        """Give ``primal`` this tangent (None: none); the entry holds the primal and its node,
        so their ids stay theirs."""
        holder = _holder(primal)
        if tangent is None:
            self.tangents.pop(self._key(holder), None)
        else:
            self.tangents[self._key(holder)] = (holder, primal, tangent)

    def _run_below(self, op: OpDef, args: tuple, attrs: dict[str, Any]) -> Any:
        if self.below is None:
            return dispatch.run_default(op, args, attrs)
        return self.below.apply(op, args, attrs)

    def apply(self, op: OpDef, args: tuple, attrs: dict[str, Any]) -> Any:
        """Run ``op`` below, then push this level's tangents through its rule."""
        if not self.active:
            return self._run_below(op, args, attrs)
        tangents = [self.tangent_of(a) if isinstance(a, Tensor) else None for a in args]
        if all(t is None for t in tangents):
            return self._run_below(op, args, attrs)
        if op.state_write:
            return self._write(op, args, attrs, tangents)
        result = self._run_below(op, args, attrs)
        outs = result if isinstance(result, tuple) else (result,)
        rule = rule_of(op)
        if rule is None:
            return result
        self.active = False
        try:
            pushed = rule(op, args, attrs, outs, tangents)
        finally:
            self.active = True
        for out, tangent in zip(outs, pushed):
            if tangent is not None and isinstance(out, Tensor) and out.dtype.kind == "f":
                if tangent.dtype != out.dtype:
                    tangent = tangent.to(out.dtype)
                self.set_tangent(out, tangent)
        return result

    def _write(self, op: OpDef, args: tuple, attrs: dict[str, Any], tangents: list) -> Any:
        """``assign(target, value)`` writes the whole target: its tangent becomes the value's
        (broadcast), or none. Refused, before writing, when another tracked tensor shares the
        target's memory: that view's tangent would go stale."""
        target, root = args[0], _root(args[0].raw_array)
        for _, primal, _ in self.tangents.values():
            if primal is not target and _root(primal.raw_array) is root:
                raise RuntimeError(
                    with_location(
                        f"jvp: {op.name} writes in place into a tensor whose memory another "
                        "tensor with a tangent shares (a view); compute out of place"
                    )
                )
        result = self._run_below(op, args, attrs)
        value_t = tangents[1] if len(tangents) > 1 else None
        if value_t is not None:
            self.active = False
            try:
                value_t = ops.broadcast_to(value_t, target.shape).to(target.dtype)
            finally:
                self.active = True
        self.set_tangent(target, value_t)
        return result
