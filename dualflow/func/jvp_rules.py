"""Forward-mode rules: each op's ``jvp`` (tangents of its outputs from its inputs' tangents),
written in dualflow ops so a tangent is itself differentiable (jvp composes with reverse mode).

Every registered op is in exactly one table (``tests/func/test_jvp_rules.py`` checks it):
``RULES`` (a rule of one of the kinds below), ``FALLBACK`` (the double-vjp identity, with the
reason it has no rule yet) or ``NO_TANGENT`` (its outputs carry no tangent, with the reason).
``attach`` (run at import) puts each op's rule on its ``OpDef`` as the ``jvp`` fact, next to
``backward``; the rules are written here, not in the ops modules, because the generic ones
build tape nodes and call the engine, which sit above the ops layer.

Kinds: ``diagonal`` (elementwise ops and softmax, whose Jacobian is symmetric: the tangent is
the op's own backward applied to the tangent, input by input, with no broadcast reduction),
``linear_in(k)`` (the op applied to the tangent of input ``k``), ``joint_linear`` (concat: the
op on all tangents), ``bilinear`` (matmul and the convolutions: one term per input),
``reduction`` (prod, max, min: the backward on ones times the tangent, summed over each
slice; max/min share ties as their backward does), and a few written out.
"""

from __future__ import annotations

from collections.abc import Callable

from dualflow import ops
from dualflow._config import enable_grad
from dualflow.autograd import grad as engine_grad
from dualflow.func.level import Level, share_tangents
from dualflow.ops.dispatch import apply
from dualflow.ops.registry import OPS, OpDef
from dualflow.tensor.core import Tensor
from dualflow.tensor.tape import record

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
        tuple(outs[i].raw_array for i in op.save_outputs),
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


def _ones_backward(op: OpDef, args: tuple, attrs: dict, outs: tuple) -> Tensor:
    """The op's backward on ones: every output element's derivative by each element of input
    0 (laid out as that input), for ops whose outputs depend on disjoint slices of it."""
    node = record(
        op,
        attrs,
        args,
        tuple(args[i] for i in op.save_inputs),
        tuple(outs[i].raw_array for i in op.save_outputs),
    )
    for i in op.save_outputs:  # ctx.y re-wraps the output: enclosing levels must know it
        share_tangents(outs[i], node.output(i))
    node.needs = tuple(j == 0 for j in range(len(args)))
    gxs = op.backward(node, ops.ones_like(outs[0]))
    return (gxs if type(gxs) is tuple else (gxs,))[0]


def reduction(op: OpDef, args: tuple, attrs: dict, outs: tuple, tangents: list) -> list:
    """prod, max, min: each output element reduces its own slice, so ``J t`` sums the
    backward-on-ones (d y / d x, with backward's tie-sharing) times ``t`` over the slice."""
    g = _ones_backward(op, args, attrs, outs)
    return [ops.sum(g * tangents[0], axis=attrs["axis"], keepdims=attrs["keepdims"])]


def cross_entropy_rule(op: OpDef, args: tuple, attrs: dict, outs: tuple, tangents: list) -> list:
    """softmax_cross_entropy: each loss element depends on its own row of logits (summed or
    averaged over rows), so ``J t`` sums the backward-on-ones times ``t`` (over the class
    axis for reduce='no', over everything otherwise)."""
    if tangents[0] is None:
        return [None]
    g = _ones_backward(op, args, attrs, outs)
    axis = 1 if attrs["reduce"] == "no" else None
    return [ops.sum(g * tangents[0], axis=axis, keepdims=False)]


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


def max_pool_rule(op: OpDef, args: tuple, attrs: dict, outs: tuple, tangents: list) -> list:
    """The tangent at each window's argmax (the first of equal maxima, as backward picks)."""
    return [apply(OPS["max_pool2d_gather"], args[0], tangents[0], **attrs)]


def running_extreme_rule(op: OpDef, args: tuple, attrs: dict, outs: tuple, tangents: list) -> list:
    """cummax / cummin: each value is the input at its index, which a small change does not
    move: the tangent at that index; the indices carry none."""
    t = tangents[0]
    if t is None or t.ndim == 0:
        return [t, None]
    return [ops.take_along_axis(t, outs[1], attrs["axis"]), None]


def pooled_linear(op: OpDef, args: tuple, attrs: dict, outs: tuple, tangents: list) -> list:
    """max_pool2d_grad / max_pool2d_gather: linear in input 1, piecewise constant in the pooled
    input 0 (the argmax does not move under a small change): no term from its tangent."""
    if tangents[1] is None:
        return [None]
    return [apply(op, args[0], tangents[1], **attrs)]


def batch_norm_rule(op: OpDef, args: tuple, attrs: dict, outs: tuple, tangents: list) -> list:
    """Training batch norm written out: the statistics' tangents, then the normalized
    output's (``y = (x - mu) / sqrt(var + eps) * gamma + beta``)."""
    (x, gamma, _), (y, mu, var), (tx, tg, tb) = args, outs, tangents
    axes, shape = (0, *range(2, x.ndim)), (1, -1) + (1,) * (x.ndim - 2)
    count = y.numel() // y.shape[1]
    inv = ops.rsqrt(var + attrs["eps"])
    xc = x - ops.reshape(mu, shape)
    terms, t_mu, t_var = [], None, None
    if tx is not None:
        t_mu = ops.sum(tx, axis=axes) / count
        t_xc = tx - ops.reshape(t_mu, shape)
        t_var = ops.sum(xc * t_xc, axis=axes) * (2.0 / count)
        t_inv = -0.5 * inv * inv * inv * t_var
        t_hat = t_xc * ops.reshape(inv, shape) + xc * ops.reshape(t_inv, shape)
        terms.append(t_hat * ops.reshape(gamma, shape))
    if tg is not None:
        terms.append(xc * ops.reshape(inv * tg, shape))
    if tb is not None:
        terms.append(ops.broadcast_to(ops.reshape(tb, shape), y.shape))
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return [total, t_mu, t_var]


def layer_norm_rule(op: OpDef, args: tuple, attrs: dict, outs: tuple, tangents: list) -> list:
    """Layer norm written out, per row over the trailing ``gamma.ndim`` axes: the statistics'
    tangents, then the output's (``y = (x - mean) rstd gamma + beta``)."""
    (x, gamma, _), (y, mu, rstd), (tx, tg, tb) = args, outs, tangents
    axes = tuple(range(x.ndim - gamma.ndim, x.ndim))
    xc = x - mu
    terms, t_mu, t_rstd = [], None, None
    if tx is not None:
        t_mu = ops.mean(tx, axis=axes, keepdims=True)
        t_xc = tx - t_mu
        t_rstd = -(rstd * rstd * rstd) * ops.mean(xc * t_xc, axis=axes, keepdims=True)
        terms.append((t_xc * rstd + xc * t_rstd) * gamma)
    if tg is not None:
        terms.append(xc * rstd * tg)
    if tb is not None:
        terms.append(ops.broadcast_to(tb, y.shape))
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return [total, t_mu, t_rstd]


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
    sum_slice_grads=joint_linear,
    pad=pad_rule,
    embedding=linear_in(1),
    prod=reduction,
    max=reduction,
    min=reduction,
    softmax_cross_entropy=cross_entropy_rule,
    max_pool2d=max_pool_rule,
    max_pool2d_grad=pooled_linear,
    max_pool2d_gather=pooled_linear,
    batch_norm=batch_norm_rule,
    layer_norm=layer_norm_rule,
    cummax=running_extreme_rule,
    cummin=running_extreme_rule,
)
_LINEAR_IN_FIRST = (
    "copy reshape transpose broadcast_to sum_to sum flip getitem getitem_array take_along_axis "
    "avg_pool2d getitem_grad avg_pool2d_grad embedding_grad getitem_array_grad "
    "take_along_axis_grad cumsum"
)
for _name in _LINEAR_IN_FIRST.split():
    RULES[_name] = linear_in(0)

FALLBACK: dict[str, str] = {
    "lstm_scan": "a whole recurrence; its backward is written with ops (double-vjp is exact)",
    "lstm_scan_grad": "an LSTM's backward recurrence from the forward's saved arrays; its "
    "backward (the adjoint through the per-step factors) is written with ops",
    "gru_scan": "a whole recurrence; its backward is written with ops (double-vjp is exact)",
    "gru_scan_grad": "a GRU's backward recurrence from the forward's saved arrays; its "
    "backward (the adjoint through the per-step factors) is written with ops",
    "batch_norm_grad": "batch norm's backward for gy, the statistics as inputs; its backward is "
    "written with ops (double-vjp is exact)",
    "layer_norm_grad": "layer norm's backward for gy, the statistics as inputs; its backward is "
    "written with ops (double-vjp is exact)",
    "softmax_cross_entropy_grad": "softmax's adjoint per row, weighted by gy; its backward is "
    "written with ops (double-vjp is exact)",
    "allreduce": "a collective: every rank must push a tangent equally often",
    "cumprod": "y * cumsum(t / x) divides by zero inputs; the backward handles them exactly",
    "logcumsumexp": "the tangent sums exp(x_j - y_i) t_j, stable only in log space with t "
    "split by sign, as the backward does",
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


def attach() -> None:
    """Give every op its rule (``OpDef.jvp``): its ``RULES`` entry, ``double_vjp`` for the
    ``FALLBACK`` ops, None for ``NO_TANGENT``; idempotent.

    Example:
        >>> attach(); OPS["matmul"].jvp is bilinear, OPS["argmax"].jvp
        (True, None)
    """
    for name, op in OPS.items():
        op.jvp = RULES.get(name, double_vjp if name in FALLBACK else None)


def rule_of(op: OpDef) -> Rule | None:
    """The jvp rule of ``op``: its ``jvp`` fact; ``double_vjp`` for a differentiable op
    registered after this table (exact, just slower); None: no tangent."""
    if op.jvp is not None:
        return op.jvp
    if op.differentiable and op.name not in NO_TANGENT:
        return double_vjp
    return None


attach()
