"""Forward-mode transforms (torch.func's ``jvp``, ``jacfwd``, ``hessian``) and ``hvp``.

``jvp`` runs the function once under a ``ForwardLevel`` (forward_mode.py): every op pushes the
tangents of its inputs through its jvp rule (jvp_rules.py) as it runs. ``jacfwd`` does that
once per input, vmapped over the input's basis vectors; ``hessian`` is ``jacfwd(jacrev(f))``;
``hvp`` is reverse over reverse, which needs no Hessian and no per-element loop.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from dualflow import ops
from dualflow._config import enable_grad, is_grad_enabled
from dualflow.autograd import grad as engine_grad
from dualflow.func.forward_mode import ForwardLevel
from dualflow.func.level import Level, argnums_tuple, detach, identity, tensor_leaves
from dualflow.func.reverse import _call, _split_aux, jacrev
from dualflow.func.vmap import vmap
from dualflow.ops.dispatch import interpreting
from dualflow.tensor.core import Tensor
from dualflow.tracer.pytree import flatten, unflatten


def _forward(func: Callable, args: list, nums: tuple, tangents: list, kwargs: dict) -> tuple:
    """Run ``func`` under a new ForwardLevel with ``tangents`` (pytrees, one per argument at
    ``nums``): (result, level). Each primal is aliased first (a reshape made below the level),
    so the tangent belongs to this call's use only, not to other uses of the same tensor."""
    level = ForwardLevel()
    new_args = list(args)
    for n, tangent in zip(nums, tangents):
        leaves, _, tree = flatten(args[n])
        t_leaves, _, t_tree = flatten(tangent)
        if t_tree != tree:
            raise ValueError("jvp: each tangent must have the structure of its primal")
        aliases = []
        for x, t in zip(leaves, t_leaves):
            _check_pair(x, t)
            alias = ops.reshape(x, x.shape)
            level.set_tangent(alias, t if t.dtype == x.dtype else t.to(x.dtype))
            aliases.append(alias)
        new_args[n] = unflatten(tree, aliases)
    with interpreting(level):
        result = func(*new_args, **kwargs)
    return result, level


def _check_pair(x: Any, t: Any) -> None:
    if not isinstance(x, Tensor) or not isinstance(t, Tensor):
        raise TypeError(f"jvp: primals and tangents must be Tensors, got {type(x).__name__}")
    if x.dtype.kind != "f":
        raise TypeError(f"jvp: primals must be floating-point tensors, got {x.dtype}")
    if tuple(t.shape) != tuple(x.shape):
        raise ValueError(f"jvp: tangent of shape {t.shape} for primal of shape {x.shape}")


def _tangents_out(level: ForwardLevel, outputs: list, tangents: list) -> list[Tensor]:
    """The output tangents (zeros for outputs that do not depend on the primals); detached
    unless a primal's graph or a tangent needs them differentiable."""
    tracked = any(t.requires_grad for t in tangents) or any(o.requires_grad for o in outputs)
    result = []
    for o in outputs:
        t = level.tangent_of(o)
        t = ops.zeros_like(o) if t is None else t
        result.append(t if tracked and is_grad_enabled() else detach(t))
    return result


def jvp(
    func: Callable, primals: tuple, tangents: tuple, *, strict: bool = False, has_aux: bool = False
) -> tuple:
    """``(func(*primals), J t)``: the Jacobian-vector product at ``primals`` along
    ``tangents`` (a tuple shaped as ``primals``) by forward mode, as torch.func.jvp; with
    ``has_aux``, a third item ``aux``. ``strict`` is accepted for PyTorch's signature and
    ignored.

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
    nums = tuple(range(len(primals)))
    result, level = _forward(func, list(primals), nums, list(tangents), {})
    output, aux = _split_aux(result, has_aux, "jvp")
    outputs, tree = tensor_leaves(output, "jvp")
    ts = [t for tangent in tangents for t in flatten(tangent)[0]]
    pushed = unflatten(tree, _tangents_out(level, outputs, ts))
    return (output, pushed, aux) if has_aux else (output, pushed)


def jacfwd(
    func: Callable,
    argnums: int | tuple[int, ...] = 0,
    has_aux: bool = False,
    *,
    randomness: str = "error",
) -> Callable:
    """The Jacobian of ``func`` by forward mode (torch.func.jacfwd): one forward-mode run per
    input, vmapped over the basis vectors of its elements (``randomness`` is that vmap's, as
    in torch.func); shapes and nesting as ``jacrev``.

    Example:
        >>> import dualflow
        >>> jacfwd(lambda x: x.sin())(dualflow.tensor([0.0, 0.0])).tolist()
        [[1.0, 0.0], [0.0, 1.0]]
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nums = argnums_tuple(argnums, len(args), "jacfwd")
        inputs = [flatten(args[n])[::2] for n in nums]  # (leaves, tree) per argument
        flat_inputs = [x for leaves, _ in inputs for x in leaves]
        columns: list[list[Tensor] | None] = []  # [input] -> output tangents, batched last
        seen: dict[str, Any] = {}
        for k, x in enumerate(flat_inputs):
            _check_pair(x, x)
            if not x.numel():
                columns.append(None)
                continue

            def push(column: Tensor, k: int = k) -> tuple:
                tangents = _one_hot_tangents(inputs, k, column)
                result, level = _forward(func, list(args), nums, tangents, kwargs)
                seen["output"], seen["aux"] = _split_aux(result, has_aux, "jacfwd")
                outputs, seen["tree"] = tensor_leaves(seen["output"], "jacfwd")
                seen["outputs"] = outputs
                return tuple(_tangents_out(level, outputs, []))

            basis = ops.reshape(identity(x.numel(), x), (x.numel(), *x.shape))
            columns.append(list(vmap(push, out_dims=-1, randomness=randomness)(basis)))
        if not seen:  # every input is empty: one plain call gives the output's shape
            output, aux = _split_aux(func(*args, **kwargs), has_aux, "jacfwd")
            outputs, tree = tensor_leaves(output, "jacfwd")
        else:
            outputs, tree, aux = seen["outputs"], seen["tree"], seen["aux"]
        jac = _assemble(columns, flat_inputs, outputs, inputs, argnums)
        jac = unflatten(tree, jac)
        return (jac, aux) if has_aux else jac

    return wrapper


def _one_hot_tangents(inputs: list, k: int, column: Tensor) -> list:
    """Tangent pytrees for every differentiated argument: ``column`` at flat input ``k``."""
    out, seen = [], 0
    for leaves, tree in inputs:
        ts = [column if seen + i == k else ops.zeros_like(x) for i, x in enumerate(leaves)]
        out.append(unflatten(tree, ts))
        seen += len(leaves)
    return out


def _assemble(columns: list, flat_inputs: list, outputs: list, inputs: list, argnums: Any) -> list:
    """Per output: d output / d input (shape ``out.shape + in.shape``), grouped as argnums;
    ``columns[k][i]`` is output ``i``'s tangent for every basis vector of input ``k``, stacked
    last."""
    jac = []
    for i, o in enumerate(outputs):
        per_input = []
        for cols, x in zip(columns, flat_inputs):
            shape = tuple(o.shape) + tuple(x.shape)
            if cols is None:
                per_input.append(ops.zeros(shape, o.dtype))
            else:
                per_input.append(ops.reshape(cols[i], shape))
        grouped, start = [], 0
        for leaves, tree in inputs:
            grouped.append(unflatten(tree, per_input[start : start + len(leaves)]))
            start += len(leaves)
        jac.append(grouped[0] if isinstance(argnums, int) else tuple(grouped))
    return jac


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
    return (value if keep else detach(value)), tuple(level.regroup(hv))


def _push_grad(dot: Tensor, level: Level, keep: bool) -> list[Tensor]:
    with enable_grad():
        hv = engine_grad(
            [dot], level.flat(), create_graph=keep, allow_unused=True, materialize_grads=True
        )
    return [h if keep else detach(h) for h in hv]
