"""Random number generation: ``Generator`` (its state is a Tensor), per-device default
generators, ``seed``/``manual_seed``, and the samplers ``uniform``, ``normal`` and PyTorch's
``randn``, ``rand``, ``randint`` and their ``*_like`` forms.

A generator's state is a uint64 Tensor [seed, counter]. Drawing a key adds 1 to the counter and
writes it back with ``ops.assign``, so a compiled function sees the RNG state as captured state
with one recorded update, while the random ops stay pure functions of the key.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow import ops
from dualflow._config import no_grad
from dualflow._thread_local import ThreadDefaults
from dualflow.device import Device, device_of, send
from dualflow.errors import DTypeError
from dualflow.tensor.core import Tensor, tensor

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
        hook = _draw_hook.hook
        if hook is not None:  # vmap's randomness modes (dualflow.func.vmap)
            hook(self)
        with no_grad():
            key = self.state + self._step
            ops.assign(self.state, key)
        return key

    def __repr__(self) -> str:
        seed, counter = self.state.tolist()
        return f"Generator(seed={seed}, counter={counter}, device={self.device})"


_draw_hook = ThreadDefaults(hook=None)


def set_draw_hook(hook: Any) -> Any:
    """Call ``hook(generator)`` before every key this thread draws (None: no hook); returns
    the previous hook (vmap's randomness modes watch and rewind generators this way).

    Example:
        >>> seen = []; old = set_draw_hook(seen.append); _ = uniform((1,))
        >>> _ = set_draw_hook(old); len(seen)
        1
    """
    previous = _draw_hook.hook
    _draw_hook.hook = hook
    return previous


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


def default_generators() -> dict[Device, Generator]:
    """The default generators made so far, by device (a copy): the state a compiled call reads.

    Example:
        >>> default_generator("cpu") in default_generators().values()
        True
    """
    return dict(_defaults)


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


def default_generator_for(like: Any) -> Generator:
    """The default generator of ``like``'s device (a Tensor or an array; CPU for anything else):
    the random ops' source when no generator is given (``dualflow/__init__`` installs it).

    Example:
        >>> default_generator_for(np.zeros(2)) is default_generator("cpu")
        True
    """
    if isinstance(like, Tensor):
        return default_generator(like.device)
    return default_generator(device_of(like) if hasattr(like, "shape") else None)


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


def manual_seed(seed: int) -> Generator:
    """Seed every default generator (PyTorch's ``torch.manual_seed``); returns the CPU one.

    dualflow's streams are its own (counter-based), so the numbers differ from PyTorch's.

    Example:
        >>> manual_seed(3); a = rand(2).tolist()
        Generator(seed=3, counter=0, device=cpu)
        >>> _ = manual_seed(3); a == rand(2).tolist()
        True
    """
    globals()["seed"](seed)
    return default_generator("cpu")


def initial_seed() -> int:
    """The seed the default generators were last seeded with.

    Example:
        >>> _ = manual_seed(5); initial_seed()
        5
    """
    return _default_seed[0]


def _sample(kind: str, sizes: tuple, size: Any, dtype: Any, generator: Any, device: Any) -> Tensor:
    from dualflow.tensor.factories import size_of  # noqa: PLC0415 - factories imports tensor ops only

    dtype = np.dtype(dtype or np.float32)
    if dtype.kind != "f":
        raise DTypeError(f"{kind}: dtype must be floating point, got {dtype}")
    draw = normal if kind == "randn" else uniform
    return draw(size_of(sizes, size), dtype=dtype, generator=generator, device=device)


def randn(
    *sizes: Any,
    size: Any = None,
    generator: Generator | None = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """Standard normal samples of ``size`` (ints or one tuple), float32 by default.

    Example:
        >>> randn(2, 3).shape, str(randn((4,)).dtype)
        ((2, 3), 'float32')
    """
    return _sample("randn", sizes, size, dtype, generator, device).requires_grad_(requires_grad)


def rand(
    *sizes: Any,
    size: Any = None,
    generator: Generator | None = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """Uniform samples in [0, 1) of ``size``, float32 by default.

    Example:
        >>> bool(((rand(100).numpy() >= 0) & (rand(100).numpy() < 1)).all())
        True
    """
    return _sample("rand", sizes, size, dtype, generator, device).requires_grad_(requires_grad)


def _randint_arguments(args: tuple, low: Any, high: Any, size: Any) -> tuple:
    """(low, high, size) from PyTorch's forms: ``randint(high, size)``, ``randint(low, high,
    size)``, any of them as keywords (``randint(0, 10, size=(3,))``)."""
    given = [v for v in (low, high, size) if v is not None]
    named = dict(zip(("low", "high", "size"), (low, high, size)))
    order = ("high", "size") if len(args) + len(given) == 2 else ("low", "high", "size")
    free = iter(name for name in order if named.get(name) is None)
    for value in args:
        name = next(free, None)
        if name is None:
            raise TypeError("randint(high, size) or randint(low, high, size)")
        named[name] = value
    if named["high"] is None or named["size"] is None:
        raise TypeError("randint(high, size) or randint(low, high, size)")
    return (named["low"] or 0), named["high"], named["size"]


def randint(
    *args: Any,
    size: Any = None,
    low: int | None = None,
    high: int | None = None,
    generator: Generator | None = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """Integers uniform in ``[low, high)``: ``randint(high, size)`` or
    ``randint(low, high, size)`` (int64 by default).

    Example:
        >>> r = randint(3, 7, (1000,)).numpy(); int(r.min()), int(r.max()), str(r.dtype)
        (3, 6, 'int64')
        >>> randint(5, size=(2, 3)).shape, randint(low=1, high=2, size=(2,)).tolist()
        ((2, 3), [1, 1])
    """
    from dualflow.tensor.factories import size_of  # noqa: PLC0415

    low, high, size = _randint_arguments(args, low, high, size)
    if int(high) <= int(low):
        raise ValueError(f"randint: expected low < high, got low={low}, high={high}")
    shape, span = size_of((size,)), int(high) - int(low)
    if requires_grad:
        raise DTypeError("randint: integer tensors cannot require grad")
    u = uniform(shape, dtype=np.float64, generator=generator, device=device)
    offset = ops.minimum(ops.cast(u * span, np.int64), span - 1)  # u*span >= 0: truncation
    return ops.cast(offset + int(low), np.dtype(dtype or np.int64))


def _device_of(x: Any) -> Device:
    return x.device if isinstance(x, Tensor) else device_of(x)


def _like(kind: str, x: Any, dtype: Any, device: Any, requires_grad: bool) -> Tensor:
    dtype = dtype if dtype is not None else x.dtype
    device = device if device is not None else _device_of(x)
    draw = randn if kind == "randn" else rand
    return draw(tuple(x.shape), dtype=dtype, device=device, requires_grad=requires_grad)


def randn_like(
    input: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    """Standard normal samples shaped like ``input`` (its dtype and device by default).

    Example:
        >>> randn_like(rand(2, 2)).shape
        (2, 2)
    """
    return _like("randn", input, dtype, device, requires_grad)


def rand_like(
    input: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    """Uniform [0, 1) samples shaped like ``input``.

    Example:
        >>> str(rand_like(randn(3, dtype="float64")).dtype)
        'float64'
    """
    return _like("rand", input, dtype, device, requires_grad)


def randint_like(
    input: Any, low: int = 0, high: int | None = None, *, dtype: Any = None, device: Any = None
) -> Tensor:
    """Integers in ``[low, high)`` shaped like ``input`` (``randint_like(x, high)`` works too).

    Example:
        >>> randint_like(rand(4), 10).shape
        (4,)
    """
    if high is None:
        low, high = 0, low
    dtype = dtype if dtype is not None else input.dtype
    device = device if device is not None else _device_of(input)
    return randint(low, high, tuple(input.shape), dtype=dtype, device=device)
