"""How in-place methods write (``inplace_methods`` holds the methods): PyTorch's autograd rules,
the aliases ``detach()``/``.data`` that writes go through, and ``x[i] = v``'s value.

Every write is one ``ops.assign`` of a value computed with ops, so a compiled function records
it: a state update for captured tensors (parameters, buffers, ``.grad``), a new value for
tensors made inside the function. Autograd rules: with grad mode on, an in-place write to a leaf
that requires grad raises (as in PyTorch); dualflow does not record in-place ops in the autograd
graph, so writes into other tensors that require grad, or of values that require grad into plain
tensors, raise too instead of losing gradients silently. Write under ``no_grad()``, through
``.data``, or use the out-of-place method.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from dualflow import ops
from dualflow._config import config, no_grad
from dualflow.errors import DTypeError, TracingError, with_location
from dualflow.ops.dispatch import tracing

# id(alias) -> (weak reference to the alias, the tensor whose array it shares). The alias keeps
# its owner alive, as a PyTorch .data tensor keeps its storage.
_OWNERS: dict[int, tuple[weakref.ref, Any]] = {}


def _forget(key: int) -> Any:
    return lambda _ref: _OWNERS.pop(key, None)


def alias_of(x: Any) -> Any:
    """A new tensor sharing ``x``'s array without history (``detach()``, ``.data``).

    Example:
        >>> import dualflow
        >>> x = dualflow.tensor([1.0]); a = alias_of(x)
        >>> a is x, owner_of(a) is x
        (False, True)
    """
    owner = owner_of(x)
    alias = type(x).wrap(x.raw_array, None, 0, False)
    key = id(alias)
    _OWNERS[key] = (weakref.ref(alias, _forget(key)), owner)
    hooks = tracing()
    if hooks is not None:  # made inside a compiled call: eagerly a new alias of x's array at
        alias.value = hooks.value_of(x)  # every call, so the trace reads x, never this object
    return alias


def owner_of(x: Any) -> Any:
    """The tensor whose array ``x`` shares through ``detach()``/``.data`` (else ``x``).

    Example:
        >>> import dualflow
        >>> x = dualflow.tensor([1.0]); owner_of(x) is x
        True
    """
    entry = _OWNERS.get(id(x))
    return entry[1] if entry is not None and entry[0]() is x else x


def _aliases(owner: Any) -> list[Any]:
    live = (ref() for ref, o in list(_OWNERS.values()) if o is owner)
    return [a for a in live if a is not None]


def _requires_grad(value: Any) -> bool:
    return bool(getattr(value, "requires_grad", False))


def _check_autograd(target: Any, operands: tuple, op: str) -> None:
    if not config.grad_enabled:
        return
    if target.requires_grad:
        if target.creator is None:
            raise RuntimeError(
                with_location(
                    f"{op}: a leaf Variable that requires grad is being used in an in-place "
                    "operation; do it under dualflow.no_grad() or through .data"
                )
            )
        raise RuntimeError(
            with_location(
                f"{op}: in-place write into a tensor that is part of an autograd graph; dualflow "
                "does not record in-place ops for autograd, so use the out-of-place form "
                f"(y = y.{op.rstrip('_')}(...)) or write under dualflow.no_grad()"
            )
        )
    if id(target) not in _OWNERS and any(_requires_grad(v) for v in operands):
        raise RuntimeError(
            with_location(
                f"{op}: writing a value that requires grad into a tensor in place would drop its "
                "gradient (dualflow does not record in-place ops for autograd); use the "
                "out-of-place form, or detach the value / write under dualflow.no_grad()"
            )
        )


def write(target: Any, value: Any, op: str, operands: tuple = ()) -> Any:
    """Assign ``value`` into ``target`` (and the tensor it aliases) in place; returns target.

    Example:
        >>> import dualflow
        >>> x = dualflow.tensor([1.0, 2.0])
        >>> write(x.data, 5.0, "fill_") is not x, x.tolist()
        (True, [5.0, 5.0])
    """
    _check_autograd(target, operands, op)
    owner = owner_of(target)
    traced = tracing() is not None
    if traced and owner.raw_array.base is not None:
        raise TracingError(
            with_location(
                f"{op}: in-place write into a view (of view/reshape/indexing/transpose...) inside "
                "a compiled function; the graph cannot see the write reach the viewed tensor. "
                "Write into the base tensor (e.g. base[index] = value), or compute out of place"
            )
        )
    with no_grad():
        ops.assign(owner, value)
        if traced:  # every alias now reads the written value (eager: the same memory)
            for alias in _aliases(owner):
                ops.assign(alias, owner)
    return target


def arith(target: Any, op: str, compute: Any, *operands: Any) -> Any:
    """An arithmetic in-place method: ``target = compute()``, keeping target's dtype kind.

    Example:
        >>> import dualflow
        >>> x = dualflow.tensor([1.0])
        >>> arith(x, "mul_", lambda: x * 3.0) is x, x.tolist()
        (True, [3.0])
    """
    _check_autograd(target, operands, op)
    with no_grad():
        value = compute()
    kind_ok = np.can_cast(np.dtype(value.dtype), target.dtype, "same_kind")
    if not kind_ok:
        raise DTypeError(
            with_location(
                f"{op}: result type {value.dtype} can't be cast to the desired output type "
                f"{target.dtype}; cast the tensor first (e.g. x = x.float())"
            )
        )
    return write(target, value, op, operands)


def random_fill(target: Any, op: str, draw: Any, generator: Any) -> Any:
    """Write ``draw(key, shape, dtype)`` into ``target`` with a key from ``generator``.

    Example:
        >>> import dualflow
        >>> x = dualflow.ops.zeros(2)
        >>> random_fill(x, "fill", lambda key, shape, dtype: ops.ones(shape, dtype), None).tolist()
        [1.0, 1.0]
    """
    key = ops.random_ops.next_key(generator, target)
    return write(target, draw(key, tuple(target.shape), target.dtype.name), op)


def put(x: Any, index: Any, value: Any) -> Any:
    """``x`` with ``value`` written at ``index`` (the value ``x[index] = value`` leaves).

    Example:
        >>> import dualflow
        >>> put(dualflow.tensor([1.0, 2.0, 3.0]), slice(1, None), 0.0).tolist()
        [1.0, 0.0, 0.0]
    """
    mask = index
    if isinstance(mask, tuple) and len(mask) == 1:
        mask = mask[0]
    dtype = getattr(mask, "dtype", None)
    if dtype is not None and dtype.kind == "b" and 0 < len(mask.shape) <= x.ndim:
        if tuple(mask.shape) != tuple(x.shape[: len(mask.shape)]):
            raise DTypeError(
                with_location(
                    f"setitem: a boolean mask of shape {tuple(mask.shape)} must match the "
                    f"leading dimensions of the tensor {tuple(x.shape)}"
                )
            )
        spread = ops.reshape(mask, tuple(mask.shape) + (1,) * (x.ndim - len(mask.shape)))
        return ops.where(spread, _as_dtype(value, x.dtype), x)
    picked = ops.getitem(x, index)
    src = ops.broadcast_to(_as_dtype(value, x.dtype), tuple(picked.shape))
    hit = ops.getitem_grad(ops.ones_like(picked), tuple(x.shape), index)
    written = ops.getitem_grad(src, tuple(x.shape), index)
    if _has_array(index):  # a repeated position gets the mean of its values (PyTorch: one)
        written = ops.cast(written / ops.maximum(hit, 1), x.dtype)
    return ops.where(ops.greater(hit, 0), written, x)


def _has_array(index: Any) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(hasattr(item, "shape") or isinstance(item, list) for item in items)


def _as_dtype(value: Any, dtype: Any) -> Any:
    if hasattr(value, "shape") and hasattr(value, "requires_grad"):
        return ops.cast(value, dtype)
    return ops.cast(np.asarray(value), dtype) if np.ndim(value) else value
