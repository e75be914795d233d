"""``vmap`` (torch.func's meaning): the function called once on logical tensors that carry
the batch hidden (``batching.BatchLevel``), every op batched by its rule, then each output's
batch moved to its ``out_dims``.

``in_dims``/``out_dims`` per input and output (an int, None or a structure like the value),
nesting, the three ``randomness`` modes, and composition with ``grad`` (whose backward runs
batched too) are torch.func's. Under ``@dualflow.compile`` the batched ops trace into one
graph: one op per op of the function, not one per example.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from dualflow import ops
from dualflow._config import no_grad
from dualflow.func import batch_table  # noqa: F401 - attaches the batching rules to the ops
from dualflow.func.batching import BatchLevel
from dualflow.func.level import detach
from dualflow.ops.dispatch import current_interpreter
from dualflow.tensor.core import Tensor
from dualflow.tensor.random import set_draw_hook
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


def _wrap_inputs(level: BatchLevel, trees: list, leaves_of: list, dims_of: list) -> list:
    args = []
    for tree, leaves, dims in zip(trees, leaves_of, dims_of):
        wrapped = [x if d is None else level.wrap(x, d) for x, d in zip(leaves, dims)]
        args.append(unflatten(tree, wrapped))
    return args


def _out_dims_per_leaf(result: Any, out_dims: Any, count: int) -> list[int | None]:
    if isinstance(out_dims, tuple) and not isinstance(result, tuple):
        raise ValueError("vmap: out_dims is a tuple but the function returns one value")
    if not isinstance(result, tuple):
        return _dims_per_leaf(out_dims, count, "out_dims")
    if isinstance(out_dims, tuple) and len(out_dims) != len(result):
        raise ValueError(f"vmap: {len(out_dims)} out_dims for {len(result)} outputs")
    per_output = out_dims if isinstance(out_dims, tuple) else (out_dims,) * len(result)
    per_leaf = []
    for item, dims in zip(result, per_output):
        n = len(flatten(item)[0])
        per_leaf.extend(_dims_per_leaf(dims, n, "out_dims"))
    return per_leaf


def _unwrap_output(level: BatchLevel, leaf: Any, d: int | None) -> Any:
    """One output leaf with the batch at ``d``: a batched one's physical tensor with its
    batch moved there, an unbatched one repeated for every example (torch.func's)."""
    if not isinstance(leaf, Tensor):
        raise ValueError(f"vmap: outputs must be Tensors, got {type(leaf).__name__}")
    physical, bdim = level.unwrap(leaf)
    if d is None:
        if bdim is not None:
            raise ValueError(
                "vmap: out_dims=None for an output that is batched (it differs per example); "
                "give it an int out_dim"
            )
        return leaf
    rank = leaf.ndim + 1
    if not -rank <= d < rank:
        raise ValueError(f"vmap: out_dim={d} out of range for a {rank}-d result")
    d %= rank
    if bdim is None:
        physical = ops.broadcast_to(ops.expand_dims(leaf, 0), (level.size, *leaf.shape))
        bdim = 0
    elif physical.requires_grad and not leaf.requires_grad:  # detached inside: detached here
        physical = detach(physical)
    if bdim == d:
        return physical
    axes = [i for i in range(rank) if i != bdim]
    axes.insert(d, bdim)
    return ops.transpose(physical, tuple(axes))


class _Randomness:
    """The draw hook of one vmap call: 'error' refuses every draw; 'same' and 'different'
    let it happen (one draw for the batch: ``BatchLevel`` batches it for 'different'). For
    'same' it remembers each generator where the first chunk found it (``rewind``)."""

    def __init__(self, mode: str, previous: Any, chunked: bool) -> None:
        self.mode, self.previous, self.snapshots = mode, previous, {}
        self.chunked = chunked  # only then is there a later chunk to rewind for

    def __call__(self, generator: Any) -> None:
        if self.previous is not None:
            self.previous(generator)
        if self.mode == "error":
            raise RuntimeError(_RANDOM_ERROR)
        if self.mode == "same" and self.chunked and generator not in self.snapshots:
            with no_grad():
                self.snapshots[generator] = generator.state.clone()

    def rewind(self) -> None:
        """'same': every chunk draws what the first one drew."""
        with no_grad():
            for generator, state in self.snapshots.items():
                ops.assign(generator.state, state)


def _run(func: Callable, size: int, randomness: str, inputs: tuple, out_dims: Any) -> tuple:
    """One batched call of ``func`` on ``inputs`` = (trees, leaves, dims, kwargs): its output
    leaves with the batch at their out_dims, the output's tree and the dims."""
    trees, leaves_of, dims_of, kwargs = inputs
    level = BatchLevel(size, randomness)
    token = current_interpreter.set(level)
    try:
        result = func(*_wrap_inputs(level, trees, leaves_of, dims_of), **kwargs)
    finally:
        current_interpreter.reset(token)
        level.live = False
    leaves, _, tree = flatten(result)
    dims = _out_dims_per_leaf(result, out_dims, len(leaves))
    return [_unwrap_output(level, x, d) for x, d in zip(leaves, dims)], tree, dims


def _chunk(leaves_of: list, dims_of: list, start: int, stop: int) -> list:
    """Every mapped leaf's examples ``start:stop``."""
    return [
        [
            x if d is None else ops.getitem(x, (slice(None),) * d + (slice(start, stop),))
            for x, d in zip(leaves, dims)
        ]
        for leaves, dims in zip(leaves_of, dims_of)
    ]


def _chunked(
    func: Callable, size: int, step: int, randomness: str, split: tuple, out_dims: Any
) -> Any:
    """The batch in chunks of ``step`` examples, each one batched call; outputs joined."""
    trees, leaves_of, dims_of, kwargs = split
    hook = _Randomness(randomness, set_draw_hook(None), step < size)
    set_draw_hook(hook)
    try:
        parts = []
        for start in range(0, size, step):
            if start:
                hook.rewind()
            stop = min(start + step, size)
            chunk = (trees, _chunk(leaves_of, dims_of, start, stop), dims_of, kwargs)
            parts.append(_run(func, stop - start, randomness, chunk, out_dims))
    finally:
        set_draw_hook(hook.previous)
    first, tree, dims = parts[0]
    if len(parts) > 1:
        first = [
            x if d is None else ops.concat([p[0][k] for p in parts], d % x.ndim)
            for k, (x, d) in enumerate(zip(first, dims))
        ]
    return unflatten(tree, first)


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
    'same' gives every example the same draws. ``chunk_size`` runs the batch that many
    examples at a time (less memory; None: all at once). Keyword arguments are passed
    unmapped.

    Example:
        >>> import dualflow
        >>> vmap(lambda x, y: (x * y).sum(), in_dims=(0, None))(
        ...     dualflow.ones(3, 2), dualflow.tensor([1.0, 2.0])).tolist()
        [3.0, 3.0, 3.0]
    """
    if randomness not in RANDOMNESS:
        raise ValueError(f"vmap: randomness must be one of {RANDOMNESS}, got {randomness!r}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"vmap: chunk_size must be None or a positive int, got {chunk_size!r}")

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        trees, leaves_of, dims_of, size = _split_inputs(args, in_dims)
        if size == 0:  # rules fold the batch into other axes: a size 0 would divide by 0
            raise ValueError("vmap: the batch dimension has size 0")
        step = size if chunk_size is None else min(chunk_size, size)
        split = (trees, leaves_of, dims_of, kwargs)
        return _chunked(func, size, step, randomness, split, out_dims)

    return wrapper
