"""Reverse-mode transforms (torch.func's ``grad``, ``grad_and_value``, ``vjp``, ``jacrev``)
over the eager engine's ``grad``; under ``@dualflow.compile`` they trace like any engine call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from dualflow import ops
from dualflow._config import enable_grad
from dualflow.autograd import grad as engine_grad
from dualflow.func.level import Level, argnums_tuple, detach, detach_tree, identity, tensor_leaves
from dualflow.func.vmap import vmap
from dualflow.tensor.core import Tensor
from dualflow.tracer.pytree import unflatten


def _split_aux(result: Any, has_aux: bool, what: str) -> tuple[Any, Any]:
    if not has_aux:
        return result, None
    if not (isinstance(result, tuple) and len(result) == 2):
        raise TypeError(f"{what}(has_aux=True): the function must return a (output, aux) tuple")
    return result


def _call(f: Callable, args: tuple, kwargs: dict, nums: tuple[int, ...], what: str) -> tuple:
    """Run ``f`` with the arguments at ``nums`` tracked by a new Level: (level, result)."""
    level = Level([args[n] for n in nums], what)
    new_args = list(args)
    for n, value in zip(nums, level.values()):
        new_args[n] = value
    with enable_grad():  # a transform differentiates even inside no_grad, as torch.func
        result = f(*new_args, **kwargs)
    return level, result


def _gradients(level: Level, outputs: list, cotangents: list, keep: bool) -> list:
    grads = engine_grad(
        outputs,
        level.flat(),
        grad_outputs=cotangents,
        create_graph=keep,
        retain_graph=True,
        allow_unused=True,
        materialize_grads=True,
    )
    return list(grads)


def grad_and_value(
    f: Callable, argnums: int | tuple[int, ...] = 0, has_aux: bool = False
) -> Callable:
    """A function returning ``(gradient, value)`` of the scalar function ``f`` with respect to
    the positional arguments at ``argnums`` (a tuple of those for a tuple of argnums; an
    argument may be a pytree of Tensors); with ``has_aux``, ``f`` returns ``(value, aux)`` and
    the result is ``(gradient, (value, aux))``.

    Example:
        >>> import dualflow
        >>> g, v = grad_and_value(lambda x: (x ** 3).sum())(dualflow.tensor([1.0, 2.0]))
        >>> g.tolist(), v.item()
        ([3.0, 12.0], 9.0)
    """

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nums = argnums_tuple(argnums, len(args), "grad")
        level, result = _call(f, args, kwargs, nums, "grad")
        value, aux = _split_aux(result, has_aux, "grad")
        if not isinstance(value, Tensor) or value.numel() != 1:
            shape = getattr(value, "shape", type(value).__name__)
            raise ValueError(f"grad: the function must return a one-element Tensor, got {shape}")
        keep = level.keeps_graph([value])
        grads = level.regroup(_gradients(level, [value], [None], keep))
        gradient = grads[0] if isinstance(argnums, int) else tuple(grads)
        if not keep:
            value, aux = detach(value), detach_tree(aux)
        return (gradient, (value, aux)) if has_aux else (gradient, value)

    return wrapper


def grad(f: Callable, argnums: int | tuple[int, ...] = 0, has_aux: bool = False) -> Callable:
    """The gradient of the scalar function ``f`` as a function (torch.func.grad): with respect
    to the argument at ``argnums`` (a tuple of gradients for a tuple); with ``has_aux``, ``f``
    returns ``(value, aux)`` and the result is ``(gradient, aux)``. Composes with itself and
    the other transforms: ``grad(grad(f))`` is the second derivative.

    Example:
        >>> import dualflow
        >>> d2 = grad(grad(lambda x: x ** 3))   # 6x
        >>> d2(dualflow.tensor(2.0)).item()
        12.0
    """
    inner = grad_and_value(f, argnums, has_aux)

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        gradient, value = inner(*args, **kwargs)
        return (gradient, value[1]) if has_aux else gradient

    return wrapper


def vjp(f: Callable, *primals: Any, has_aux: bool = False) -> tuple:
    """``(output, vjp_fn)``: ``f(*primals)`` and the function mapping cotangents (shaped as the
    output) to the vector-Jacobian products, one per primal (torch.func.vjp); with
    ``has_aux``, ``(output, vjp_fn, aux)``. ``vjp_fn`` may be called many times.

    Example:
        >>> import dualflow
        >>> out, vjp_fn = vjp(lambda x: x * x, dualflow.tensor([1.0, 3.0]))
        >>> vjp_fn(dualflow.ones(2))[0].tolist()
        [2.0, 6.0]
    """
    level, result = _call(f, primals, {}, tuple(range(len(primals))), "vjp")
    output, aux = _split_aux(result, has_aux, "vjp")
    outputs, tree = tensor_leaves(output, "vjp")
    outside = level.keeps_graph(outputs)

    def vjp_fn(cotangents: Any) -> tuple:
        cts, ct_tree = tensor_leaves(cotangents, "vjp_fn")
        if ct_tree != tree:
            raise ValueError("vjp_fn: the cotangents must have the structure of the output")
        for ct, out in zip(cts, outputs):
            if ct.shape != out.shape:
                raise ValueError(f"vjp_fn: cotangent of shape {ct.shape} for output {out.shape}")
        keep = outside or (level.outer_grad and any(c.requires_grad for c in cts))
        with enable_grad():
            grads = _gradients(level, outputs, cts, keep)
        return tuple(level.regroup(grads if keep else [detach(g) for g in grads]))

    shown = output if outside else unflatten(tree, [detach(o) for o in outputs])
    if has_aux:
        return shown, vjp_fn, (aux if outside else detach_tree(aux))
    return shown, vjp_fn


def jacrev(f: Callable, argnums: int | tuple[int, ...] = 0, has_aux: bool = False) -> Callable:
    """The Jacobian of ``f`` by reverse mode (torch.func.jacrev): a vector-Jacobian product per
    output element, all in one vmap; the result for an output of shape ``O`` and an argument
    of shape ``I`` has shape ``O + I`` (a tuple over argnums when it is a tuple; a pytree over
    the outputs).

    Example:
        >>> import dualflow
        >>> jacrev(lambda x: x ** 2)(dualflow.tensor([1.0, 3.0])).tolist()
        [[2.0, 0.0], [0.0, 6.0]]
    """

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nums = argnums_tuple(argnums, len(args), "jacrev")
        level, result = _call(f, args, kwargs, nums, "jacrev")
        output, aux = _split_aux(result, has_aux, "jacrev")
        outputs, tree = tensor_leaves(output, "jacrev")
        keep = level.keeps_graph(outputs)
        per_output = [_jacobian_rows(level, out, keep) for out in outputs]
        jac = [level.regroup(rows) for rows in per_output]
        jac = [j[0] if isinstance(argnums, int) else tuple(j) for j in jac]
        jac = unflatten(tree, jac)
        if has_aux:
            return jac, (aux if keep else detach_tree(aux))
        return jac

    return wrapper


def _jacobian_rows(level: Level, out: Tensor, keep: bool) -> list[Tensor]:
    """d out / d input for every input of ``level``: shape ``out.shape + input.shape``, by
    one batched vector-Jacobian product over the rows of the identity (vmap of the engine's
    backward, as torch.func's jacrev)."""
    inputs = level.flat()
    flat_out = ops.reshape(out, (-1,))
    if not inputs or flat_out.shape[0] == 0:
        return [ops.zeros(tuple(out.shape) + tuple(x.shape), x.dtype) for x in inputs]

    def row(u: Tensor) -> tuple:
        grads = _gradients(level, [flat_out], [u], keep)
        return tuple(g if keep else detach(g) for g in grads)

    rows = vmap(row)(identity(flat_out.shape[0], flat_out))
    return [ops.reshape(r, tuple(out.shape) + tuple(x.shape)) for r, x in zip(rows, inputs)]
