"""``vmap`` (torch.func's meaning) as a loop over the batch: slice every mapped input, call the
function once per example, stack the results along ``out_dims``.

No op has a batching rule yet, so every op takes this loop (docs/design-notes.md, "Functional
transforms"); the semantics (``in_dims``/``out_dims`` per input and output, nesting, the three
``randomness`` modes, composition with ``grad``) are the ones a rule-based vmap must keep.
Under ``@dualflow.compile`` the loop unrolls into one graph.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from dualflow import ops
from dualflow._config import no_grad
from dualflow._tensor import Tensor
from dualflow.random import set_draw_hook
from dualflow.tracer.pytree import flatten, unflatten

RANDOMNESS = ("error", "different", "same")
_RANDOM_ERROR = (
    "vmap: called random operation while in randomness error mode. Please either use the "
    "'same' or 'different' randomness flags on vmap or perform the randomness operation out "
    "of vmap"
)


def _dims_per_leaf(dims: Any, count: int, where: str) -> list[int | None]:
    if dims is None or isinstance(dims, int):
        return [dims] * count
    leaves = flatten(dims)[0]
    if len(leaves) != count or not all(d is None or isinstance(d, int) for d in leaves):
        raise ValueError(f"vmap: {where} must be an int, None or a structure like the value")
    return leaves


def _split_inputs(args: tuple, in_dims: Any) -> tuple[list, list, list, int]:
    """Each argument's leaves, trees and per-leaf dims, and the batch size."""
    if not isinstance(in_dims, tuple):
        in_dims = (in_dims,) * len(args)
    if len(in_dims) != len(args):
        raise ValueError(f"vmap: in_dims has {len(in_dims)} entries for {len(args)} arguments")
    trees, leaves_of, dims_of, sizes = [], [], [], set()
    for i, (arg, dims) in enumerate(zip(args, in_dims)):
        leaves, _, tree = flatten(arg)
        per_leaf = _dims_per_leaf(dims, len(leaves), f"in_dims[{i}]")
        for k, (leaf, d) in enumerate(zip(leaves, per_leaf)):
            if d is None:
                continue
            if not isinstance(leaf, Tensor):
                raise ValueError(
                    f"vmap: in_dim={d} for argument {i} of type {type(leaf).__name__}; only "
                    "Tensors can be mapped (use None)"
                )
            if not -leaf.ndim <= d < leaf.ndim:
                raise ValueError(f"vmap: in_dim={d} out of range for a {leaf.ndim}-d argument {i}")
            per_leaf[k] = d % leaf.ndim
            sizes.add(leaf.shape[d])
        trees.append(tree)
        leaves_of.append(leaves)
        dims_of.append(per_leaf)
    if not sizes:
        raise ValueError("vmap: at least one input must be mapped (have a non-None in_dim)")
    if len(sizes) > 1:
        raise ValueError(f"vmap: mapped inputs have different batch sizes {sorted(sizes)}")
    return trees, leaves_of, dims_of, sizes.pop()


def _example(trees: list, leaves_of: list, dims_of: list, b: int) -> list:
    args = []
    for tree, leaves, dims in zip(trees, leaves_of, dims_of):
        picked = [x if d is None else x[(slice(None),) * d + (b,)] for x, d in zip(leaves, dims)]
        args.append(unflatten(tree, picked))
    return args


def _stack(results: list, out_dims: Any) -> Any:
    """One output per example -> the batched output, each leaf stacked at its out_dim."""
    flats = [flatten(r) for r in results]
    tree = flats[0][2]
    if any(f[2] != tree for f in flats):
        raise ValueError("vmap: the function returned differently structured outputs per example")
    if isinstance(out_dims, tuple) and not (isinstance(results[0], tuple)):
        raise ValueError("vmap: out_dims is a tuple but the function returns one value")
    per_output = out_dims if isinstance(out_dims, tuple) else (out_dims,)
    if isinstance(results[0], tuple):
        if isinstance(out_dims, tuple) and len(out_dims) != len(results[0]):
            raise ValueError(f"vmap: {len(out_dims)} out_dims for {len(results[0])} outputs")
        counts = [len(flatten(item)[0]) for item in results[0]]
        dims = per_output * len(counts) if not isinstance(out_dims, tuple) else per_output
        per_leaf = [d for d, c in zip(dims, counts) for _ in range(c)]
    else:
        per_leaf = _dims_per_leaf(out_dims, len(flats[0][0]), "out_dims")
    stacked = []
    for k, d in enumerate(per_leaf):
        items = [f[0][k] for f in flats]
        if not isinstance(items[0], Tensor):
            raise ValueError(f"vmap: outputs must be Tensors, got {type(items[0]).__name__}")
        if d is None:
            stacked.append(items[0])
            continue
        rank = items[0].ndim + 1
        if not -rank <= d < rank:
            raise ValueError(f"vmap: out_dim={d} out of range for a {rank}-d result")
        stacked.append(ops.stack(items, d % rank))
    return unflatten(tree, stacked)


class _Randomness:
    """The draw hook of one vmap call: refuse draws ('error'), or rewind every generator to
    where the first example found it ('same'); 'different' lets the loop draw on."""

    def __init__(self, mode: str, previous: Any) -> None:
        self.mode, self.previous, self.snapshots = mode, previous, {}

    def __call__(self, generator: Any) -> None:
        if self.previous is not None:
            self.previous(generator)
        if self.mode == "error":
            raise RuntimeError(_RANDOM_ERROR)
        if self.mode == "same" and generator not in self.snapshots:
            with no_grad():
                self.snapshots[generator] = generator.state.clone()

    def rewind(self) -> None:
        with no_grad():
            for generator, state in self.snapshots.items():
                ops.assign(generator.state, state)


def vmap(
    func: Callable,
    in_dims: Any = 0,
    out_dims: Any = 0,
    randomness: str = "error",
    *,
    chunk_size: int | None = None,
) -> Callable:
    """``func`` mapped over a batch dimension (torch.func.vmap): ``in_dims`` per positional
    argument (an int, None for an unmapped one, or a structure like the argument), ``out_dims``
    per output; ``randomness`` 'error' refuses random ops, 'different' draws per example,
    'same' gives every example the same draws. ``chunk_size`` is accepted and unused (every
    example already runs alone). Keyword arguments are passed unmapped.

    Example:
        >>> import dualflow
        >>> vmap(lambda x, y: (x * y).sum(), in_dims=(0, None))(
        ...     dualflow.ones(3, 2), dualflow.tensor([1.0, 2.0])).tolist()
        [3.0, 3.0, 3.0]
    """
    del chunk_size
    if randomness not in RANDOMNESS:
        raise ValueError(f"vmap: randomness must be one of {RANDOMNESS}, got {randomness!r}")

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        trees, leaves_of, dims_of, size = _split_inputs(args, in_dims)
        if size == 0:  # a loop would have no example to learn the output's shape from
            raise ValueError("vmap: the batch dimension has size 0")
        hook = _Randomness(randomness, None)
        hook.previous = set_draw_hook(hook)
        try:
            results = []
            for b in range(size):
                if b:
                    hook.rewind()
                results.append(func(*_example(trees, leaves_of, dims_of, b), **kwargs))
        finally:
            set_draw_hook(hook.previous)
        return _stack(results, out_dims)

    return wrapper
