"""Random number generation: ``Generator`` (its state is a Tensor), per-device default
generators, ``seed`` and the tensor factories ``uniform`` and ``normal``.

A generator's state is a uint64 Tensor [seed, counter]. Drawing a key adds 1 to the counter and
writes it back with ``ops.assign``, so a compiled function sees the RNG state as captured state
with one recorded update, while the random ops stay pure functions of the key.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow import ops
from dualflow._config import no_grad
from dualflow.device import Device, device_of, send
from dualflow.ops.random_ops import set_default_generator_source
from dualflow.tensor import Tensor, tensor

_STEP = np.array([0, 1], dtype=np.uint64)


def _seed_value(seed: Any) -> int:
    value = int(seed)
    if not 0 <= value < 2**64:
        raise ValueError(f"random: a seed must be an integer in [0, 2**64), got {seed!r}")
    return value


class Generator:
    """A counter-based random generator whose whole state is the Tensor ``state``.

    Example:
        >>> g = Generator(42)
        >>> g.next_key().tolist(), g.next_key().tolist()
        ([42, 1], [42, 2])
    """

    def __init__(self, seed: int = 0, device: Device | str = "cpu") -> None:
        self.state = tensor(np.array([_seed_value(seed), 0], np.uint64), device=device)
        self.state.name = "rng_state"
        self._step = send(_STEP, device)  # a constant on the state's device

    @property
    def device(self) -> Device:
        """The device the state (and so every key and sample) lives on."""
        return self.state.device

    def manual_seed(self, seed: int) -> Generator:
        """Restart the sequence from ``seed`` (in place); returns self."""
        value = np.array([_seed_value(seed), 0], np.uint64)
        with no_grad():
            ops.assign(self.state, send(value, self.device))
        return self

    def next_key(self) -> Tensor:
        """A fresh key [seed, counter] (a new tensor) and the state advanced past it."""
        with no_grad():
            key = self.state + self._step
            ops.assign(self.state, key)
        return key

    def __repr__(self) -> str:
        seed, counter = self.state.tolist()
        return f"Generator(seed={seed}, counter={counter}, device={self.device})"


_defaults: dict[Device, Generator] = {}
_default_seed = [0]


def default_generator(device: Device | str | None = None) -> Generator:
    """The default generator of ``device`` (CPU when None), created on first use.

    Example:
        >>> default_generator() is default_generator("cpu")
        True
    """
    device = Device(device or "cpu")
    if device not in _defaults:
        _defaults[device] = Generator(_default_seed[0], device)
    return _defaults[device]


def seed(value: int) -> None:
    """Reseed every default generator (each device's), e.g. for reproducible dropout.

    Example:
        >>> seed(0); a = uniform((2,)).tolist()
        >>> seed(0); a == uniform((2,)).tolist()
        True
    """
    _default_seed[0] = _seed_value(value)
    for generator in _defaults.values():
        generator.manual_seed(value)


def _generator_for(like: Any) -> Generator:
    if isinstance(like, Tensor):
        return default_generator(like.device)
    return default_generator(device_of(like) if hasattr(like, "shape") else None)


set_default_generator_source(_generator_for)


def uniform(
    shape: Any,
    low: float = 0.0,
    high: float = 1.0,
    dtype: Any = "float32",
    generator: Generator | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    """A new tensor of uniform samples in ``[low, high)``.

    Example:
        >>> u = uniform((3,), 2.0, 4.0, generator=Generator(1))
        >>> u.shape, bool(((u.numpy() >= 2) & (u.numpy() < 4)).all())
        ((3,), True)
    """
    generator = generator or default_generator(device)
    out = ops.random_uniform(generator.next_key(), shape, low, high, dtype)
    return out.requires_grad_(requires_grad)


def normal(
    shape: Any,
    mean: float = 0.0,
    std: float = 1.0,
    dtype: Any = "float32",
    generator: Generator | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    """A new tensor of normal samples with ``mean`` and ``std``.

    Example:
        >>> z = normal((2, 2), generator=Generator(1))
        >>> z.shape, str(z.dtype)
        ((2, 2), 'float32')
    """
    generator = generator or default_generator(device)
    out = ops.random_normal(generator.next_key(), shape, mean, std, dtype)
    return out.requires_grad_(requires_grad)
