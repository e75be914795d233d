"""Forward-mode transforms (torch.func's ``jvp``, ``jacfwd``, ``hessian``) and ``hvp``.

For now forward mode is the double-vjp identity, exact and built only from the engine's
double backward: with ``g(u) = J^T u`` (a vjp against a dummy cotangent ``u`` that requires
grad, so ``g`` is linear in ``u``), ``J t = d/du <g(u), t>``, one more reverse pass. It
composes with every transform (and traces under ``@dualflow.compile``) because every op's
backward is written in differentiable ops; it costs two reverse passes per tangent where a
per-op ``jvp`` rule would cost one forward pass (docs/design-notes.md, "Functional transforms").
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from dualflow import ops
from dualflow._config import enable_grad
from dualflow._tensor import Tensor
from dualflow.autograd import grad as engine_grad
from dualflow.func.level import Level, argnums_tuple, detach_tree, identity, tensor_leaves
from dualflow.func.reverse import _call, _split_aux, jacrev
from dualflow.tracer.pytree import unflatten


def _dual(level: Level, outputs: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
    """Dummy cotangents ``u`` (one per output) and ``g = J^T u`` per input, linear in ``u``."""
    us = [ops.zeros_like(o).requires_grad_(True) for o in outputs]
    gs = engine_grad(
        outputs,
        level.flat(),
        grad_outputs=us,
        create_graph=True,
        retain_graph=True,
        allow_unused=True,
        materialize_grads=True,
    )
    return us, list(gs)


def _push(gs: list, us: list, tangents: list, keep: bool) -> list[Tensor]:
    """``J t`` for each output: the gradient of ``<g(u), t>`` with respect to ``u``."""
    with enable_grad():
        out = engine_grad(
            gs,
            us,
            grad_outputs=tangents,
            create_graph=keep,
            retain_graph=True,
            allow_unused=True,
            materialize_grads=True,
        )
    return [o if keep else o.detach() for o in out]


def jvp(
    func: Callable, primals: tuple, tangents: tuple, *, strict: bool = False, has_aux: bool = False
) -> tuple:
    """``(func(*primals), J t)``: the Jacobian-vector product at ``primals`` along
    ``tangents`` (a tuple shaped as ``primals``), as torch.func.jvp; with ``has_aux``, a third
    item ``aux``. ``strict`` is accepted for PyTorch's signature and ignored.

    Example:
        >>> import dualflow
        >>> x, t = dualflow.tensor([1.0, 2.0]), dualflow.tensor([1.0, 0.5])
        >>> out, tangent = jvp(lambda x: x ** 2, (x,), (t,))
        >>> tangent.tolist()
        [2.0, 2.0]
    """
    del strict
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise TypeError("jvp: primals and tangents must be tuples")
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals but {len(tangents)} tangents")
    level, result = _call(func, primals, {}, tuple(range(len(primals))), "jvp")
    output, aux = _split_aux(result, has_aux, "jvp")
    outputs, tree = tensor_leaves(output, "jvp")
    ts = [t for tangent in tangents for t in tensor_leaves(tangent, "jvp")[0]]
    for t, x in zip(ts, level.flat()):
        if t.shape != x.shape:
            raise ValueError(f"jvp: tangent of shape {t.shape} for primal of shape {x.shape}")
    keep = level.keeps_graph(outputs) or (level.outer_grad and any(t.requires_grad for t in ts))
    with enable_grad():
        us, gs = _dual(level, outputs)
    pushed = unflatten(tree, _push(gs, us, ts, keep))
    shown = output if keep else unflatten(tree, [o.detach() for o in outputs])
    if has_aux:
        return shown, pushed, (aux if keep else detach_tree(aux))
    return shown, pushed


def jacfwd(func: Callable, argnums: int | tuple[int, ...] = 0, has_aux: bool = False) -> Callable:
    """The Jacobian of ``func`` by forward mode (torch.func.jacfwd): one Jacobian-vector
    product per input element; shapes and nesting as ``jacrev``.

    Example:
        >>> import dualflow
        >>> jacfwd(lambda x: x.sin())(dualflow.tensor([0.0, 0.0])).tolist()
        [[1.0, 0.0], [0.0, 1.0]]
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nums = argnums_tuple(argnums, len(args), "jacfwd")
        level, result = _call(func, args, kwargs, nums, "jacfwd")
        output, aux = _split_aux(result, has_aux, "jacfwd")
        outputs, tree = tensor_leaves(output, "jacfwd")
        keep = level.keeps_graph(outputs)
        with enable_grad():
            us, gs = _dual(level, outputs)
        per_input = [_columns(gs[k], us, outputs, x, keep) for k, x in enumerate(level.flat())]
        per_output = [level.regroup([cols[i] for cols in per_input]) for i in range(len(outputs))]
        jac = [j[0] if isinstance(argnums, int) else tuple(j) for j in per_output]
        jac = unflatten(tree, jac)
        if has_aux:
            return jac, (aux if keep else detach_tree(aux))
        return jac

    return wrapper


def _columns(g: Tensor, us: list, outputs: list, x: Tensor, keep: bool) -> list[Tensor]:
    """d output / d x for every output: one pushforward per element of ``x``."""
    n = x.numel()
    if n == 0 or not g.requires_grad:
        return [ops.zeros(tuple(o.shape) + tuple(x.shape), o.dtype) for o in outputs]
    basis = identity(n, g)
    cols: list[list[Tensor]] = [[] for _ in outputs]
    for j in range(n):
        for i, c in enumerate(_push([g], us, [ops.reshape(basis[j], x.shape)], keep)):
            cols[i].append(c)
    return [
        ops.reshape(ops.stack(c, -1), tuple(o.shape) + tuple(x.shape))
        for c, o in zip(cols, outputs)
    ]


def hessian(f: Callable, argnums: int | tuple[int, ...] = 0) -> Callable:
    """The Hessian of the scalar function ``f`` as ``jacfwd(jacrev(f))`` (torch.func.hessian).

    Example:
        >>> import dualflow
        >>> hessian(lambda x: (x ** 3).sum())(dualflow.tensor([1.0, 2.0])).tolist()
        [[6.0, 0.0], [0.0, 12.0]]
    """
    return jacfwd(jacrev(f, argnums), argnums)


def hvp(f: Callable, primals: tuple, tangents: tuple) -> tuple:
    """``(f(*primals), H v)``: the Hessian of the scalar ``f`` times ``tangents`` (one per
    primal) without forming the Hessian, by reverse over reverse (two passes), as
    torch.autograd.functional.hvp returns it.

    Example:
        >>> import dualflow
        >>> x = dualflow.tensor([1.0, 2.0])
        >>> value, (hv,) = hvp(lambda x: (x ** 3).sum(), (x,), (dualflow.ones(2),))
        >>> hv.tolist()
        [6.0, 12.0]
    """
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise TypeError("hvp: primals and tangents must be tuples")
    level, value = _call(f, primals, {}, tuple(range(len(primals))), "hvp")
    if not isinstance(value, Tensor) or value.numel() != 1:
        raise ValueError("hvp: the function must return a one-element Tensor")
    ts = [t for tangent in tangents for t in tensor_leaves(tangent, "hvp")[0]]
    keep = level.keeps_graph([value]) or (level.outer_grad and any(t.requires_grad for t in ts))
    with enable_grad():
        gs = engine_grad(
            [value], level.flat(), create_graph=True, allow_unused=True, materialize_grads=True
        )
        dot = sum((ops.sum(g * t) for g, t in zip(gs, ts) if g.requires_grad), start=0.0)
    if not isinstance(dot, Tensor):  # f is at most linear: the Hessian is zero
        hv = [ops.zeros_like(x) for x in level.flat()]
    else:
        hv = _push_grad(dot, level, keep)
    return (value if keep else value.detach()), tuple(level.regroup(hv))


def _push_grad(dot: Tensor, level: Level, keep: bool) -> list[Tensor]:
    with enable_grad():
        hv = engine_grad(
            [dot], level.flat(), create_graph=keep, allow_unused=True, materialize_grads=True
        )
    return [h if keep else h.detach() for h in hv]
