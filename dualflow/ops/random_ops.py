"""Random ops (``dropout_mask``, ``random_uniform``, ``random_normal``) and ``dropout``.

Each op is a pure function of a key: a uint64 tensor [seed, counter] drawn from a
``dualflow.random.Generator``. Element i gets the bits ``mix(stream + i * GOLDEN)`` (SplitMix64,
counter-based), computed with ``xp``, so the same key gives the same values on numpy and cupy.
The ops are ``impure`` so the compiler never merges, removes or reorders them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dualflow._config import config
from dualflow._installed import installed
from dualflow.errors import DTypeError, ShapeError
from dualflow.ops.arithmetic import multiply
from dualflow.ops.dispatch import apply
from dualflow.ops.registry import Meta, primitive
from dualflow.ops.validate import require_float
from dualflow.symbolic_containers import as_shape

GOLDEN = 0x9E3779B97F4A7C15  # 2**64 / golden ratio: SplitMix64's counter increment
_MIX1, _MIX2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def _mix(xp: Any, z: Any) -> Any:
    """SplitMix64's finalizer, in place on a uint64 array (arithmetic wraps modulo 2**64)."""
    # In place with one scratch buffer: fresh temporaries of this size cost more than the math.
    tmp = xp.empty_like(z)
    for shift, multiplier in ((30, _MIX1), (27, _MIX2)):
        xp.right_shift(z, shift, out=tmp)
        z ^= tmp
        z *= np.uint64(multiplier)
    xp.right_shift(z, 31, out=tmp)
    z ^= tmp
    return z


def random_bits(xp: Any, key: Any, n: int) -> Any:
    """``n`` pseudo-random uint64 values for ``key`` = [seed, counter] (a uint64 array).

    Value i (from 1) is ``mix(stream + i * GOLDEN)`` with ``stream = mix(seed + mix(counter +
    GOLDEN))``, where ``mix`` is SplitMix64's finalizer.

    Example:
        >>> random_bits(np, np.array([0, 1], np.uint64), 2).dtype
        dtype('uint64')
    """
    # Shape-(1,) slices, not scalars: numpy array arithmetic wraps silently, scalars warn.
    stream = _mix(xp, key[0:1] + _mix(xp, key[1:2] + np.uint64(GOLDEN)))
    z = xp.arange(1, n + 1, dtype=xp.uint64)
    z *= np.uint64(GOLDEN)
    z += stream
    return _mix(xp, z)


def random_bits32(xp: Any, key: Any, n: int) -> Any:
    """``n`` uint32 values: the low then the high half of each of ``random_bits`` (half the work).

    Example:
        >>> random_bits32(np, np.array([0, 1], np.uint64), 3).dtype
        dtype('uint32')
    """
    # Little-endian on both CPUs and CUDA devices, so the halves come out in the same order.
    return random_bits(xp, key, (n + 1) // 2).view(xp.uint32)[:n]


def _unit_floats(xp: Any, key: Any, n: int, bits: int) -> Any:
    # The top `bits` bits as a float64 in [0, 1); exact in any float type with that precision.
    return (random_bits(xp, key, n) >> (64 - bits)).astype(xp.float64) * (2.0**-bits)


def _random_infer(op: str, key: Meta, shape: tuple, dtype: str) -> tuple[Meta]:
    if np.dtype(key.dtype) != np.uint64 or tuple(key.shape) != (2,):
        raise DTypeError(
            f"{op}: key must be a uint64 tensor of shape (2,) from Generator.next_key(), got "
            f"{np.dtype(key.dtype)} {tuple(key.shape)}"
        )
    if any(d < 0 for d in shape):  # compared, not int(): a size stays an expression
        raise ShapeError(f"{op}: shape {shape} has a negative dimension")
    out = require_float(op, Meta((), np.dtype(dtype)), "dtype")
    return (Meta(tuple(shape), out),)


@primitive("dropout_mask", impure=True, layout="C", aliasing="fresh")
class DropoutMask:
    """A mask of 0 (probability ``ratio``) and ``1 / (1 - ratio)``; a function of ``key``."""

    def infer(key: Meta, *, shape: tuple, ratio: float, dtype: str) -> tuple[Meta]:
        if not 0.0 <= ratio <= 1.0:
            raise ValueError(f"dropout_mask: ratio must be in [0, 1], got {ratio}")
        return _random_infer("dropout_mask", key, shape, dtype)

    def forward(xp, key, *, shape, ratio, dtype):
        if ratio >= 1.0:
            return xp.zeros(shape, dtype)
        threshold = np.uint32(min(int(ratio * 2.0**32), 2**32 - 1))
        mask = (random_bits32(xp, key, math.prod(shape)) >= threshold).astype(dtype)
        mask *= np.dtype(dtype).type(1.0 / (1.0 - ratio))
        return mask.reshape(shape)


@primitive("random_uniform", impure=True, layout="C", aliasing="fresh")
class RandomUniform:
    """Uniform samples in ``[low, high)``; a function of ``key``."""

    def infer(key: Meta, *, shape: tuple, low: float, high: float, dtype: str) -> tuple[Meta]:
        return _random_infer("random_uniform", key, shape, dtype)

    def forward(xp, key, *, shape, low, high, dtype):
        bits = np.finfo(dtype).nmant + 1
        u = _unit_floats(xp, key, math.prod(shape), bits)
        return (low + (high - low) * u).astype(dtype).reshape(shape)


@primitive("random_normal", impure=True, layout="C", aliasing="fresh")
class RandomNormal:
    """Normal samples with ``mean`` and ``std`` (Box–Muller); a function of ``key``."""

    def infer(key: Meta, *, shape: tuple, mean: float, std: float, dtype: str) -> tuple[Meta]:
        return _random_infer("random_normal", key, shape, dtype)

    def forward(xp, key, *, shape, mean, std, dtype):
        n = math.prod(shape)
        u = _unit_floats(xp, key, 2 * n, 53)
        radius = xp.sqrt(-2.0 * xp.log1p(-u[:n]))  # log(1 - u) with 1 - u in (0, 1]
        z = radius * xp.cos((2.0 * math.pi) * u[n:])
        return (mean + std * z).astype(dtype).reshape(shape)


def _shape(shape: Any) -> tuple[int, ...]:
    return as_shape(shape)


def dropout_mask(key: Any, shape: Any, ratio: float = 0.5, dtype: Any = "float32") -> Any:
    """The dropout mask for ``key``: 0 with probability ``ratio``, else ``1 / (1 - ratio)``.

    Example:
        >>> import numpy as np
        >>> from dualflow import ops
        >>> m = ops.dropout_mask(np.array([7, 1], np.uint64), (1000,), 0.25)
        >>> sorted(set(m.tolist())), 0.2 < float((m.numpy() == 0).mean()) < 0.3
        ([0.0, 1.3333333730697632], True)
    """
    return apply(
        DropoutMask, key, shape=_shape(shape), ratio=float(ratio), dtype=np.dtype(dtype).name
    )


def random_uniform(
    key: Any, shape: Any, low: float = 0.0, high: float = 1.0, dtype: Any = "float32"
) -> Any:
    """Uniform samples in ``[low, high)`` determined by ``key``.

    Example:
        >>> import numpy as np
        >>> from dualflow import ops
        >>> u = ops.random_uniform(np.array([0, 1], np.uint64), (2, 3))
        >>> u.shape, bool(((u.numpy() >= 0) & (u.numpy() < 1)).all())
        ((2, 3), True)
    """
    return apply(
        RandomUniform,
        key,
        shape=_shape(shape),
        low=float(low),
        high=float(high),
        dtype=np.dtype(dtype).name,
    )


def random_normal(
    key: Any, shape: Any, mean: float = 0.0, std: float = 1.0, dtype: Any = "float32"
) -> Any:
    """Normal samples with ``mean`` and ``std`` determined by ``key``.

    Example:
        >>> import numpy as np
        >>> from dualflow import ops
        >>> z = ops.random_normal(np.array([0, 1], np.uint64), (10000,), 2.0, 0.5)
        >>> abs(float(z.numpy().mean()) - 2.0) < 0.05
        True
    """
    return apply(
        RandomNormal,
        key,
        shape=_shape(shape),
        mean=float(mean),
        std=float(std),
        dtype=np.dtype(dtype).name,
    )


# The default generator for an input (per device) is supplied by dualflow.tensor.random, a layer
# above: dualflow/__init__ installs it (dualflow/_installed.py), set here at the first use.
_default_generator_for: list[Callable[[Any], Any]] = []


def set_default_generator_source(source: Callable[[Any], Any]) -> None:
    """Install ``source(like) -> Generator`` giving the default generator for ``like``'s device."""
    _default_generator_for[:] = [source]


def _next_key(generator: Any, like: Any) -> Any:
    if generator is None:
        if not _default_generator_for:
            set_default_generator_source(installed("generator_source"))
        generator = _default_generator_for[0](like)
    return generator.next_key()


def next_key(generator: Any, like: Any) -> Any:
    """A fresh key from ``generator``, or from the default generator of ``like``'s device.

    Example:
        >>> import numpy as np
        >>> next_key(None, np.zeros(1)).dtype
        dtype('uint64')
    """
    return _next_key(generator, like)


def dropout(x: Any, ratio: float = 0.5, train: bool | None = None, generator: Any = None) -> Any:
    """Zero each element with probability ``ratio`` and scale the rest by ``1 / (1 - ratio)``.

    Identity in eval mode (``train=False``, or ``train=None`` with ``config.train`` off). The
    mask comes from ``generator`` (default: the per-device default generator), so the same
    seed gives the same masks.

    Example:
        >>> import dualflow
        >>> from dualflow import ops
        >>> x = dualflow.tensor([1.0, 2.0, 3.0, 4.0])
        >>> ops.dropout(x, 0.5, train=False) is x
        True
        >>> ones = dualflow.tensor([1.0] * 64)
        >>> sorted(set(ops.dropout(ones, 0.5, generator=dualflow.random.Generator(0)).tolist()))
        [0.0, 2.0]
    """
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"dropout: ratio must be in [0, 1], got {ratio}")
    train = config.train if train is None else bool(train)
    if not train or ratio == 0.0:
        return x
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        x = np.asarray(x)
    dtype = require_float("dropout", Meta(tuple(x.shape), x.dtype), "x")
    key = _next_key(generator, x)
    return multiply(x, dropout_mask(key, tuple(x.shape), ratio, dtype))
