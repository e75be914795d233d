"""``default_collate``: stack a list of samples into one batch of dualflow Tensors.

Samples may be arrays, Tensors, numbers or (nested) tuples, lists and dicts of them; the batch
has the same structure with every leaf stacked along a new first axis. Strings stay lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dualflow.errors import ShapeError
from dualflow.tensor.core import Tensor


def default_collate(samples: Sequence[Any]) -> Any:
    """Stack ``samples`` leaf by leaf into Tensors, keeping tuples, lists and dicts.

    Numpy data keeps its dtype (integer labels stay integer tensors); Python floats become
    float32 and Python ints int64, as in ``dualflow.tensor``.

    Args:
        samples: a non-empty list of samples that all have the same structure.

    Returns:
        The batch: the sample structure with a Tensor (or list of strings) at each leaf.

    Raises:
        TypeError: a leaf of a type that cannot be stacked, or samples of different structure.
        ShapeError: leaves of different shapes (ragged samples).

    Example:
        >>> xs, ys = default_collate([(np.zeros(2, np.float32), 1), (np.ones(2, np.float32), 0)])
        >>> xs.shape, ys.tolist(), ys.dtype
        ((2, 2), [1, 0], dtype('int64'))
    """
    first = samples[0]
    if isinstance(first, dict):
        _check_same(samples, dict)
        if any(s.keys() != first.keys() for s in samples):
            raise TypeError("default_collate: dict samples have different keys")
        return {key: default_collate([s[key] for s in samples]) for key in first}
    if isinstance(first, tuple | list):
        _check_same(samples, type(first))
        if len({len(s) for s in samples}) != 1:
            raise TypeError("default_collate: samples are sequences of different lengths")
        fields = [default_collate([s[i] for s in samples]) for i in range(len(first))]
        return tuple(fields) if isinstance(first, tuple) else fields
    if isinstance(first, str):
        return list(samples)
    return Tensor(stack_leaves(samples))


def stack_leaves(leaves: Sequence[Any]) -> np.ndarray:
    """Stack array-like leaves (arrays, Tensors, numbers) along a new first axis.

    Example:
        >>> stack_leaves([1.5, 2.0]).dtype
        dtype('float32')
    """
    arrays = []
    for leaf in leaves:
        if isinstance(leaf, Tensor):
            arrays.append(leaf.numpy())
        elif isinstance(leaf, np.ndarray | np.generic | bool | int | float):
            arrays.append(np.asarray(leaf))
        else:
            raise TypeError(
                f"default_collate: cannot stack a {type(leaf).__name__}; samples may hold "
                "arrays, Tensors, numbers, strings and tuples/lists/dicts of them "
                "(pass collate_fn= for anything else)"
            )
    shapes = [a.shape for a in arrays]
    if any(shape != shapes[0] for shape in shapes):
        odd = next(i for i, shape in enumerate(shapes) if shape != shapes[0])
        raise ShapeError(
            f"default_collate: samples of a batch must have one shape to be stacked, but sample "
            f"0 has shape {shapes[0]} and sample {odd} has shape {shapes[odd]} (ragged data); "
            "pad or crop them in the dataset, or pass a collate_fn that does"
        )
    batch = np.stack(arrays)
    if batch.dtype == np.float64 and not isinstance(leaves[0], np.ndarray | np.generic | Tensor):
        batch = batch.astype(np.float32)  # Python floats follow dualflow.tensor's default
    return batch


def _check_same(samples: Sequence[Any], kind: type) -> None:
    if not all(isinstance(s, kind) for s in samples):
        kinds = sorted({type(s).__name__ for s in samples})
        raise TypeError(f"default_collate: samples mix types {kinds}; they need one structure")
