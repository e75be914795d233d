"""Backward of a compiled call: a second graph traced from the forward trace's tape.

When a compiled function returns outputs that require grad and did not run backward itself, the
backward graph is traced right after the forward (the eager engine run under a second tracer):
forward values it needs ("residuals") become extra forward outputs, and each plan call returns
tensors whose tape node runs the backward plan. Parameters are read by reference, like state.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dualflow._config import config, no_grad
from dualflow.autograd.engine import grad
from dualflow.device import Device, get_array_module
from dualflow.errors import CompileError
from dualflow.graph_ir.ir import Graph, Value
from dualflow.ops.dispatch import interpreting
from dualflow.ops.registry import OpDef
from dualflow.runtime.plan import Plan
from dualflow.tensor.core import Tensor
from dualflow.tensor.tape import GraphReleasedError, Node, record
from dualflow.tracer.interpreter import TracingInterpreter
from dualflow.tracer.pipeline import build_plan
from dualflow.tracer.state import StateChecks


@dataclass
class Backward:
    """The backward of one trace: its plan and where its inputs and outputs go."""

    graph: Graph
    plan: Plan
    checks: StateChecks
    residuals: list[Value]  # forward values appended to the forward graph's outputs
    input_positions: list[int]  # flat-argument positions of the differentiable inputs
    state_slots: list[int]  # indices into the forward refs of differentiable captured state
    grad_outputs: list[int]  # which user outputs take a gradient
    op: OpDef
    mask: list[bool]  # per source: whether it receives a gradient
    source_graph: Graph | None = None  # as traced, before the passes (explain(passes=True))


def trace_backward(
    forward: TracingInterpreter,
    outputs: list[Tensor],
    leaves: list[Any],
    passes: Any = (),
    device: Device | str = "cpu",
    skip: Any = (),
) -> Backward | None:
    """Trace d(outputs)/d(differentiable inputs and state) while the forward tape is alive.

    Outputs in ``skip`` are returned as the very argument/state objects: they keep their own
    tape, so the compiled backward leaves them out.
    """
    # Outputs whose tape a backward inside the function already consumed take no gradient.
    wanted = [
        i
        for i, t in enumerate(outputs)
        if t.requires_grad and t.creator is not None and not t.creator.released and i not in skip
    ]
    positions = [
        i for i, leaf in enumerate(leaves) if isinstance(leaf, Tensor) and leaf.requires_grad
    ]
    slots = [
        i
        for i, ref in enumerate(forward.checks.refs)
        if ref.kind == "tensor" and ref.tensor.requires_grad
    ]
    sources = [leaves[i] for i in positions] + [forward.checks.refs[i].tensor for i in slots]
    if not wanted or not sources:
        return None
    tracer = TracingInterpreter(forward.builder.name + "_backward", parent=forward)
    grads = _traced_grads(tracer, [outputs[k] for k in wanted], wanted, sources)
    if grads is None:
        return None
    present = [g for g in grads if g is not None]
    tracer.builder.output(*(tracer.value_of(g) for g in present))
    source = tracer.builder.build()
    graph, plan, _ = build_plan(source, passes, device, debug=config.debug)
    mask = [g is not None for g in grads]
    op = backward_op(forward.builder.name, mask, len(outputs))
    return Backward(
        graph,
        plan,
        tracer.checks,
        tracer.residuals,
        positions,
        slots,
        wanted,
        op,
        mask,
        source,
    )


def _traced_grads(
    tracer: TracingInterpreter, outputs: list[Tensor], indices: list[int], sources: list[Tensor]
) -> list | None:
    """Gradients of ``outputs`` (each seeded by a graph input) w.r.t. ``sources``, traced; None
    when part of the tape was already consumed by a backward inside the function."""
    gys = []
    for k, out in zip(indices, outputs):
        gy = Tensor.wrap(out.raw_array * 0 + 1, None, 0, False)
        tracer.bind_input(gy, f"grad_output{k}")
        if tracer.shapes is not None:  # the seed has its output's (dynamic) shape
            tracer.shapes.alias(gy.value, out.value)
        gys.append(gy)
    with interpreting(tracer), no_grad():
        try:
            return grad(outputs, sources, gys, retain_graph=True, allow_unused=True)
        except GraphReleasedError:
            return None


def backward_op(name: str, mask: list[bool], n_outputs: int) -> OpDef:
    """The tape op of a compiled call's outputs; ``mask`` marks sources that get a gradient."""
    return OpDef(
        f"compiled:{name}", "compiled", None, None, backward=_make_backward(mask), nout=n_outputs
    )


_RELEASED: list[Node] = []


def released_node() -> Node:
    """The tape node of a compiled output whose tape the call consumed (``loss`` after its own
    ``backward()``): it requires grad, as in eager mode, and a backward through it raises.
    Released nodes hold nothing, so every such output shares one."""
    if not _RELEASED:
        op = OpDef("compiled:released", "compiled", None, None, backward=None)
        node = record(op, {}, ())
        node.release()
        _RELEASED.append(node)
    return _RELEASED[0]


def _make_backward(mask: list[bool]) -> Any:
    def backward(ctx: Node, *gys: Any) -> tuple:
        if config.grad_enabled:  # create_graph: gradients must be differentiable again
            return ctx.attrs["differentiable"](gys)
        return ctx.attrs["run"](gys, mask)

    return backward


def connect(
    bwd: Backward,
    outputs: list[Tensor],
    leaves: list[Any],
    refs: list[Any],
    residuals: tuple,
    replay: Callable[[], list[Tensor]],
    lock: Any = None,
) -> None:
    """Give a plan call's outputs a tape node whose backward runs the backward plan.

    With ``create_graph`` the backward instead differentiates ``replay()``, an eager re-run of
    the call (state restored to its values before the call), so higher orders work too.
    """
    sources = [leaves[i] for i in bwd.input_positions]
    sources += [refs[i].tensor for i in bwd.state_slots]

    def differentiable(gys: tuple) -> tuple:
        again = replay()
        wanted = [k for k in bwd.grad_outputs if gys[k] is not None]
        grads = grad(
            [again[k] for k in wanted],
            sources,
            [gys[k] for k in wanted],
            create_graph=True,
            allow_unused=True,
        )
        return tuple(grads)

    # what a missing output gradient is filled with; the outputs themselves are not kept (a
    # reference from their own tape node would be a cycle holding the residuals alive)
    zeros = {k: (outputs[k].raw_array.shape, outputs[k].raw_array.dtype) for k in bwd.grad_outputs}
    xp = get_array_module(outputs[bwd.grad_outputs[0]].raw_array) if bwd.grad_outputs else None

    def run(gys: tuple, mask: list[bool]) -> tuple:
        inputs = [
            gys[k].raw_array if gys[k] is not None else xp.zeros(*zeros[k])
            for k in bwd.grad_outputs
        ]
        with lock or contextlib.nullcontext():  # the backward plan's buffers: one run at once
            result = bwd.plan.run(inputs + list(residuals), [r.read() for r in bwd.checks.refs])
        if result.failed_guard is not None:
            raise CompileError(f"a guard in the backward graph failed at {result.failed_guard.loc}")
        arrays = iter(result.outputs)
        return tuple(Tensor.wrap(next(arrays), None, 0, False) if m else None for m in mask)

    node = record(bwd.op, {"run": run, "differentiable": differentiable}, sources)
    for k in bwd.grad_outputs:
        outputs[k].creator, outputs[k].output_index, outputs[k].requires_grad = node, k, True
