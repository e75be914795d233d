"""Random PyTorch names as composites of the random ops: ``randperm`` (argsort of uniform
draws), ``multinomial`` (the Gumbel-max trick) and ``Tensor.random_``'s integer fill.

Each draws its key from a generator (the default one of the tensor's device unless given), so a
compiled function records the generator's state update and the draws match the eager ones.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow import ops
from dualflow.errors import ShapeError, user_frame, with_location
from dualflow.tensor.methods.inplace import random_fill


def shape_error(message: str) -> ShapeError:
    """A ShapeError located at the user's line (the composites' input checks)."""
    return ShapeError(with_location(message, user_frame()))


def to_tensor(x: Any) -> Any:
    """``x`` as a Tensor (imported late: the tensor module imports this package)."""
    from dualflow.tensor.core import as_tensor  # noqa: PLC0415 - _tensor imports this package

    return as_tensor(x)


def constant_like(value: float, like: Any) -> Any:
    """A tensor of ``like``'s shape and dtype filled with ``value``."""
    return ops.full_like(like, value)


def randperm(
    n: int,
    *,
    generator: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Any:
    """A random permutation of ``0 .. n-1`` (int64 unless ``dtype``): the order that sorts
    ``n`` uniform draws.

    Example:
        >>> sorted(randperm(5).tolist())
        [0, 1, 2, 3, 4]
    """
    from dualflow.tensor.factories import finish  # noqa: PLC0415
    from dualflow.tensor.random import uniform  # noqa: PLC0415 - random imports the Tensor

    draws = uniform((int(n),), dtype=np.float64, generator=generator, device=device)
    return finish(ops.cast(ops.argsort(draws), np.dtype(dtype or np.int64)), requires_grad)


def _gumbel(key: Any, shape: tuple, dtype: str) -> Any:
    u = ops.random_uniform(key, shape, 0.0, 1.0, dtype)
    return -ops.log(-ops.log(u))  # u = 0 gives -inf: that draw never wins


def multinomial(
    input: Any, num_samples: int, replacement: bool = False, *, generator: Any = None
) -> Any:
    """Indices drawn from the categories of the last dim of ``input`` (non-negative weights,
    not necessarily normalized): ``num_samples`` per row, with or without replacement.

    The Gumbel-max trick (argmax of ``log p + Gumbel noise``; its top-k for draws without
    replacement), so it is a fixed-shape op sequence that compiles.

    Example:
        >>> import dualflow
        >>> multinomial(dualflow.tensor([0.0, 1.0, 0.0]), 2, replacement=True).tolist()
        [1, 1]
        >>> sorted(multinomial(dualflow.tensor([[1.0, 2.0, 3.0]]), 3).tolist()[0])
        [0, 1, 2]
    """
    p = to_tensor(input)
    if p.ndim not in (1, 2) or np.dtype(p.dtype).kind != "f":
        raise shape_error(
            f"multinomial: expected a 1-D or 2-D float tensor, got {p.shape} {p.dtype}"
        )
    n, k = p.shape[-1], int(num_samples)
    if k <= 0 or (not replacement and k > n):
        raise shape_error(
            f"multinomial: cannot draw {k} samples from {n} categories "
            f"{'with' if replacement else 'without'} replacement"
        )
    positive = ops.greater(p, 0)
    logp = ops.where(positive, ops.log(ops.where(positive, p, constant_like(1.0, p))), -np.inf)
    key = ops.random_ops.next_key(generator, p)
    name = np.dtype(p.dtype).name
    if replacement:
        shape = tuple(p.shape[:-1]) + (k, n)
        scores = ops.expand_dims(logp, -2) + _gumbel(key, shape, name)
        return ops.argmax(scores, axis=-1)
    scores = logp + _gumbel(key, tuple(p.shape), name)
    return to_tensor(scores).topk(k, dim=-1).indices


def _default_high(dtype: np.dtype) -> int:
    if dtype.kind == "f":  # every integer up to 2**mantissa is exact
        return 2 ** (np.finfo(dtype).nmant + 1) + 1
    if dtype.kind == "b":
        return 2
    return int(np.iinfo(dtype).max)


def fill_integers(target: Any, args: tuple, bounds: dict, generator: Any) -> Any:
    """``target.random_(*args, **bounds)``: integers uniform in ``[from, to)`` written in place.

    Example:
        >>> import dualflow
        >>> fill_integers(dualflow.ops.zeros(3, dtype="int64"), (1, 2), {}, None).tolist()
        [1, 1, 1]
    """
    low, high = (0, args[0]) if len(args) == 1 else (tuple(args) + (0, None))[:2]
    low, high = bounds.get("from", low), bounds.get("to", high)
    high = _default_high(np.dtype(target.dtype)) if high is None else int(high)
    if high <= int(low):
        raise ValueError(f"random_: expects 'from' < 'to', got from={low}, to={high}")
    span = high - int(low)

    def draw(key: Any, shape: tuple, dtype: str) -> Any:
        u = ops.random_uniform(key, shape, 0.0, 1.0, "float64")
        offset = ops.minimum(ops.cast(u * span, np.int64), span - 1)
        return ops.cast(offset + int(low), dtype)

    return random_fill(target, "random_", draw, generator)
