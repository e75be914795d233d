"""Forward-mode rules: each op's ``jvp`` (tangents of its outputs from its inputs' tangents),
written in dualflow ops so a tangent is itself differentiable (jvp composes with reverse mode).

Every registered op is in exactly one table (``tests/func/test_jvp_rules.py`` checks it):
``RULES`` (a rule of one of the kinds below), ``FALLBACK`` (the double-vjp identity, with the
reason it has no rule yet) or ``NO_TANGENT`` (its outputs carry no tangent, with the reason).
The rules live here, keyed by op name, rather than on ``OpDef`` because the generic ones build
tape nodes and call the engine, which sit above the ops layer.

Kinds: ``diagonal`` (elementwise ops and softmax, whose Jacobian is symmetric: the tangent is
the op's own backward applied to the tangent, input by input, with no broadcast reduction),
``linear_in(k)`` (the op applied to the tangent of input ``k``), ``joint_linear`` (concat: the
op on all tangents), ``bilinear`` (matmul and the convolutions: one term per input), and a few
written out.
"""

from __future__ import annotations

from collections.abc import Callable

from dualflow import ops
from dualflow._config import enable_grad
from dualflow._tensor import Tensor
from dualflow.autograd import grad as engine_grad
from dualflow.autograd.tape import record
from dualflow.func.level import Level, share_tangents
from dualflow.ops.dispatch import apply
from dualflow.ops.registry import OPS, OpDef

Rule = Callable[[OpDef, tuple, dict, tuple, list], list]


def diagonal(op: OpDef, args: tuple, attrs: dict, outs: tuple, tangents: list) -> list:
    """Symmetric Jacobian: ``J t = J^T t`` = the op's backward on ``t`` (one input at a time;
    inputs stated at the output's shape, so the backward reduces no broadcast)."""
    shape = outs[0].shape
    node = record(
        op,
        attrs,
        args,
        tuple(args[i] for i in op.save_inputs),
        tuple(outs[i]._array for i in op.save_outputs),
        tuple(shape if isinstance(a, Tensor) else getattr(a, "shape", ()) for a in args),
    )
    for i in op.save_outputs:  # ctx.y re-wraps the output: enclosing levels must know it
        share_tangents(outs[i], node.output(i))
    total = None
    for i, t in enumerate(tangents):
        if t is None:
            continue
        node.needs = tuple(j == i for j in range(len(args)))
        gxs = op.backward(node, ops.broadcast_to(t, shape))
        g = (gxs if type(gxs) is tuple else (gxs,))[i]
        if g is not None:
            total = g if total is None else total + g
    return [total]


def linear_in(k: int) -> Rule:
    """The op is linear in input ``k`` (the others are indices): apply it to the tangent."""

    def rule(op: OpDef, args: tuple, attrs: dict, outs: tuple, tangents: list) -> list:
        if any(t is not None for i, t in enumerate(tangents) if i != k):
            return double_vjp(op, args, attrs, outs, tangents)
        new = list(args)
        new[k] = tangents[k]
        return [apply(op, *new, **attrs)]

    return rule


def joint_linear(op: OpDef, args: tuple, attrs: dict, outs: tuple, tangents: list) -> list:
    filled = [ops.zeros_like(a) if t is None else t for a, t in zip(args, tangents)]
    return [apply(op, *filled, **attrs)]


def bilinear(op: OpDef, args: tuple, attrs: dict, outs: tuple, tangents: list) -> list:
    total = None
    for i, t in enumerate(tangents):
        if t is not None:
            new = list(args)
            new[i] = t
            term = apply(op, *new, **attrs)
            total = term if total is None else total + term
    return [total]


def cast_rule(op: OpDef, args: tuple, attrs: dict, outs: tuple, tangents: list) -> list:
    return [apply(op, tangents[0], **attrs)]  # linear; the tangent takes the result's dtype


def pad_rule(op: OpDef, args: tuple, attrs: dict, outs: tuple, tangents: list) -> list:
    return [apply(op, tangents[0], **{**attrs, "value": 0})]  # the fill value is a constant


def log_softmax_rule(op: OpDef, args: tuple, attrs: dict, outs: tuple, tangents: list) -> list:
    t = tangents[0]  # J = I - 1 softmax^T along the axis
    return [t - ops.sum(ops.exp(outs[0]) * t, axis=attrs["axis"], keepdims=True)]


def double_vjp(op: OpDef, args: tuple, attrs: dict, outs: tuple, tangents: list) -> list:
    """Any differentiable op: ``J t = d/du <J^T u, t>``, by the engine's double backward on a
    recomputation of the op from this call's inputs (exact; two reverse passes)."""
    positions = [i for i, t in enumerate(tangents) if t is not None]
    level = Level([args[i] for i in positions], f"jvp of {op.name}")
    new = list(args)
    for i, x in zip(positions, level.flat()):
        new[i] = x
    with enable_grad():
        result = apply(op, *new, **attrs)
        results = result if isinstance(result, tuple) else (result,)
        floats = [r for r in results if r.dtype.kind == "f"]
        us = [ops.zeros_like(r).requires_grad_(True) for r in floats]
        gs = engine_grad(
            floats, level.flat(), us, create_graph=True, allow_unused=True, materialize_grads=True
        )
        ts = [tangents[i] for i in positions]
        keep = level.keeps_graph(floats) or any(t.requires_grad for t in ts)
        live = [(g, t) for g, t in zip(gs, ts) if g.requires_grad]
        pushed = iter(
            engine_grad(
                [g for g, _ in live],
                us,
                [t for _, t in live],
                create_graph=keep,
                allow_unused=True,
                materialize_grads=True,
            )
            if live
            else [ops.zeros_like(u) for u in us]
        )
    return [next(pushed) if r.dtype.kind == "f" else None for r in results]


_ELEMENTWISE = [name for name, op in OPS.items() if op.kind == "elementwise" and op.differentiable]
RULES: dict[str, Rule] = {name: diagonal for name in _ELEMENTWISE if name != "cast"}
RULES.update(
    cast=cast_rule,
    softmax=diagonal,
    log_softmax=log_softmax_rule,
    matmul=bilinear,  # the conv ops take no bias input (it is a separate add): bilinear too
    conv2d=bilinear,
    conv_transpose2d=bilinear,
    conv2d_grad_weight=bilinear,
    concat=joint_linear,
    pad=pad_rule,
    embedding=linear_in(1),
)
_LINEAR_IN_FIRST = (
    "copy reshape transpose broadcast_to sum_to sum flip getitem getitem_array take_along_axis "
    "avg_pool2d getitem_grad avg_pool2d_grad embedding_grad"
)
for _name in _LINEAR_IN_FIRST.split():
    RULES[_name] = linear_in(0)

_LATER = "nonlinear; a written-out rule is next (docs/design-notes.md)"
_BACKWARD_HELPER = "a backward's helper op (forward over reverse): linear in its gradient input"
FALLBACK: dict[str, str] = {
    "prod": _LATER,
    "max": _LATER + "; its tie-breaking must match backward's",
    "min": _LATER + "; its tie-breaking must match backward's",
    "max_pool2d": _LATER,
    "max_pool2d_gather": _BACKWARD_HELPER,
    "max_pool2d_grad": _BACKWARD_HELPER + ", nonlinear in the pooled input",
    "softmax_cross_entropy": _LATER,
    "batch_norm": _LATER,
    "lstm_scan": "a whole recurrence; its backward is written with ops (double-vjp is exact)",
    "getitem_array_grad": _BACKWARD_HELPER + "; scatter-add needs its shape attributes",
    "take_along_axis_grad": _BACKWARD_HELPER + "; scatter-add needs its shape attributes",
    "allreduce": "a collective: every rank must push a tangent equally often",
}
NO_TANGENT: dict[str, str] = {
    name: "integer, boolean, random or constant result: no derivative"
    for name, op in OPS.items()
    if not op.differentiable and op.kind != "synthetic"
}
NO_TANGENT.update(
    assign="a state write: the target's tangent becomes the value's (forward_mode._write)",
    stop_gradient="detach: its result is a constant to every transform",
    guard="a compiler node (speculation check), never called eagerly",
    fused="a compiler node (fusion region), never called eagerly",
)


def rule_of(op: OpDef) -> Rule | None:
    """The jvp rule of ``op`` (``double_vjp`` for the listed fallbacks; None: no tangent)."""
    rule = RULES.get(op.name)
    if rule is not None:
        return rule
    if op.name in FALLBACK or (op.differentiable and op.name not in NO_TANGENT):
        return double_vjp  # an op registered after this table: exact, just slower
    return None
