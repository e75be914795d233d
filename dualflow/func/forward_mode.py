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

from dualflow._tensor import Tensor
from dualflow.errors import with_location
from dualflow.func.jvp_rules import rule_of
from dualflow.ops import dispatch
from dualflow.ops.dispatch import current_interpreter
from dualflow.ops.registry import OpDef


class ForwardLevel:
    """One jvp level: the tangents (by tensor identity) of the tensors this level tracks."""

    def __init__(self) -> None:
        self.below = current_interpreter.get()  # None: the default (eager) interpreter
        self.hooks = None if self.below is None else self.below.hooks
        self.tangents: dict[int, tuple[Any, Tensor]] = {}
        self.active = True

    def tangent_of(self, value: Any) -> Tensor | None:
        """The tangent this level holds for ``value`` (None: a constant to it)."""
        array = getattr(value, "_array", None)
        entry = self.tangents.get(id(array))
        return entry[1] if entry is not None and entry[0] is array else None

    def set_tangent(self, primal: Tensor, tangent: Tensor) -> None:
        # Keyed by the array, not the Tensor: a backward re-wraps saved arrays in new Tensors
        # (ctx.y), which must find the tangent of the value they hold. The array is held, so
        # its id stays its own.
        self.tangents[id(primal._array)] = (primal._array, tangent)

    def _run_below(self, op: OpDef, args: tuple, attrs: dict[str, Any]) -> Any:
        if self.below is None:
            return dispatch._default_apply(op, args, attrs)
        return self.below.apply(op, args, attrs)

    def apply(self, op: OpDef, args: tuple, attrs: dict[str, Any]) -> Any:
        """Run ``op`` below, then push this level's tangents through its rule."""
        result = self._run_below(op, args, attrs)
        if not self.active:
            return result
        tangents = [self.tangent_of(a) if isinstance(a, Tensor) else None for a in args]
        if all(t is None for t in tangents):
            return result
        outs = result if isinstance(result, tuple) else (result,)
        rule = rule_of(op)
        if rule is None:
            if op.state_write:
                raise RuntimeError(
                    with_location(f"jvp: {op.name} writes state with a value that has a tangent")
                )
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
