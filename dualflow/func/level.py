"""One level of a functional transform over the reverse-mode engine: its own inputs, and
whether its results must stay differentiable for an enclosing computation.

A transform differentiates with respect to *its* inputs only. An input that no one tracks
becomes a fresh leaf; one an enclosing transform (or the user) tracks is aliased through a
reshape node, so the inner gradient counts only the paths through the alias (a closed-over use
of the same tensor is a constant to the inner level, as in torch.func) while the enclosing
level still reaches it. The inner gradient keeps a graph (``create_graph``) exactly when grad
mode is on and something outside the level is tracked: an aliased input or a tracked tensor the
function closed over; otherwise results come back detached, as torch.func gives them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dualflow import ops
from dualflow._config import is_grad_enabled
from dualflow.ops.dispatch import current_interpreter
from dualflow.tensor.core import Tensor, tensor
from dualflow.tracer.pytree import flatten, unflatten

_FLOAT_KINDS = ("f", "c")


class Level:
    """The inputs of one transform call, made differentiable for this level only."""

    def __init__(self, values: Sequence[Any], what: str) -> None:
        self.outer_grad = is_grad_enabled()
        self.trees, self.leaves = [], []
        self.fresh: set[int] = set()
        self.aliased = False
        for value in values:
            leaves, _, tree = flatten(value)
            tracked = [self._track(leaf, what) for leaf in leaves]
            self.trees.append(tree)
            self.leaves.append(tracked)

    def _track(self, leaf: Any, what: str) -> Tensor:
        if not isinstance(leaf, Tensor):
            raise TypeError(f"{what}: differentiated inputs must be Tensors, got {type(leaf)}")
        if leaf.dtype.kind not in _FLOAT_KINDS:
            raise TypeError(
                f"{what}: can only differentiate with respect to floating-point tensors, got "
                f"{leaf.dtype}"
            )
        if leaf.requires_grad and self.outer_grad:
            self.aliased = True
            return ops.reshape(leaf, leaf.shape)  # a node of its own: this level's target
        fresh = detach(leaf).requires_grad_(True)
        self.fresh.add(id(fresh))
        return fresh

    def values(self) -> list[Any]:
        """The inputs rebuilt with this level's tensors in place of the given ones."""
        return [unflatten(tree, leaves) for tree, leaves in zip(self.trees, self.leaves)]

    def flat(self) -> list[Tensor]:
        """This level's tensors, in input order."""
        return [leaf for leaves in self.leaves for leaf in leaves]

    def regroup(self, flat: Sequence[Any]) -> list[Any]:
        """``flat`` (one value per tensor of ``flat()``) grouped back into the inputs' shapes."""
        out, start = [], 0
        for tree, leaves in zip(self.trees, self.leaves):
            out.append(unflatten(tree, flat[start : start + len(leaves)]))
            start += len(leaves)
        return out

    def keeps_graph(self, outputs: Sequence[Any]) -> bool:
        """Whether gradients of ``outputs`` must be differentiable for something outside."""
        if not self.outer_grad:
            return False
        return self.aliased or _reaches_outside(outputs, self.fresh)


def _reaches_outside(outputs: Sequence[Any], fresh: set[int]) -> bool:
    """Whether the tape of ``outputs`` reaches a tracked leaf that is not one of ``fresh``."""
    seen: set[int] = set()
    stack = []
    for out in outputs:
        if isinstance(out, Tensor) and out.requires_grad:
            if out.creator is None:
                if id(out) not in fresh:
                    return True
            else:
                stack.append(out.creator)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for e in node.edges or ():
            if type(e) is tuple:
                stack.append(e[0])
            elif e is not None and id(e) not in fresh:
                return True
    return False


def detach(value: Tensor) -> Tensor:
    """``value.detach()`` that keeps the tangents forward-mode levels hold for ``value``: a
    reverse transform cuts its results (and fresh inputs) from the tape, never from an
    enclosing ``jvp`` (``jvp(grad(f))`` is forward over reverse)."""
    cut = value.detach()
    share_tangents(value, cut)
    return cut


def share_tangents(source: Tensor, target: Tensor) -> None:
    """Give ``target`` the tangent of ``source`` in every enclosing forward-mode level (the
    same value under another Tensor: a detached cut, a rule's re-wrapped output)."""
    interpreter = current_interpreter.get()
    while interpreter is not None:  # ForwardLevels, and vmap's levels between them
        if hasattr(interpreter, "tangent_of"):
            tangent = interpreter.tangent_of(source)
            if tangent is not None:
                interpreter.set_tangent(target, tangent)
        interpreter = getattr(interpreter, "below", None)


def detach_tree(value: Any) -> Any:
    """``value`` with every Tensor leaf detached (results of a level that keeps no graph)."""
    leaves, _, tree = flatten(value)
    return unflatten(tree, [detach(x) if isinstance(x, Tensor) else x for x in leaves])


def tensor_leaves(value: Any, what: str) -> tuple[list[Tensor], Any]:
    """The Tensor leaves of an output pytree and its TreeDef; anything else is a TypeError."""
    leaves, _, tree = flatten(value)
    for leaf in leaves:
        if not isinstance(leaf, Tensor):
            raise TypeError(f"{what}: outputs must be Tensors, got {type(leaf).__name__}")
    return leaves, tree


def argnums_tuple(argnums: int | tuple[int, ...], count: int, what: str) -> tuple[int, ...]:
    """``argnums`` as a tuple of valid non-negative positions of ``count`` arguments."""
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums or not all(isinstance(n, int) for n in nums):
        raise TypeError(f"{what}: argnums must be an int or a non-empty tuple of ints")
    fixed = tuple(n + count if n < 0 else n for n in nums)
    if any(not 0 <= n < count for n in fixed):
        raise ValueError(f"{what}: argnums {argnums} out of range for {count} positional args")
    if len(set(fixed)) != len(fixed):
        raise ValueError(f"{what}: argnums {argnums} repeats an argument")
    return fixed


def identity(n: int, like: Tensor) -> Tensor:
    """The ``n x n`` identity in ``like``'s dtype and device (Jacobian seeds, one per row)."""
    return tensor(np.eye(n, dtype=like.dtype), device=like.device)
