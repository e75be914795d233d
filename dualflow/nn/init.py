"""Parameter initializers with PyTorch's names and formulas (``kaiming_uniform_``, ...).

Each fills a tensor in place by writing through ``ops.assign`` under ``no_grad`` (so the write is
a recorded state update, never part of autograd) and returns it. Random ones draw from a seeded
``dualflow.random.Generator`` (``generator=``, else the default one of the tensor's device), so
``dualflow.random.seed(s)`` makes model construction reproducible.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dualflow import ops
from dualflow._config import no_grad
from dualflow.device import Device
from dualflow.nn.parameter import Parameter
from dualflow.tensor.core import Tensor
from dualflow.tensor.methods.hints import missing
from dualflow.tensor.random import Generator, normal, uniform

_LINEAR_FNS = (
    "linear",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
)


def empty_parameter(shape: tuple[int, ...], dtype: Any = None, device: Any = None) -> Parameter:
    """A zero-filled Parameter (float32 unless ``dtype``) that a layer then initializes.

    Example:
        >>> p = empty_parameter((2, 3))
        >>> p.shape, str(p.dtype), p.requires_grad
        ((2, 3), 'float32', True)
    """
    xp = Device(device or "cpu").xp
    return Parameter(xp.zeros(tuple(shape), np.dtype(dtype or np.float32)))


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity (PyTorch's table).

    ``linear``/``conv*``/``sigmoid``: 1, ``tanh``: 5/3, ``relu``: √2, ``leaky_relu``:
    √(2 / (1 + slope²)) with slope ``param`` (default 0.01), ``selu``: 3/4.

    Example:
        >>> calculate_gain("relu") == math.sqrt(2), calculate_gain("tanh")
        (True, 1.6666666666666667)
    """
    if nonlinearity in _LINEAR_FNS or nonlinearity == "sigmoid":
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, int | float):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def fan_in_and_fan_out(tensor: Any) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight: dims 1 and 0 times the receptive field (dims 2...).

    Example:
        >>> fan_in_and_fan_out(empty_parameter((8, 3, 5, 5)))
        (75, 200)
    """
    shape = tuple(tensor.shape)
    if len(shape) < 2:
        raise ValueError(
            f"Fan in and fan out can not be computed for tensor with fewer than 2 dimensions "
            f"(got shape {shape})"
        )
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def _fan(tensor: Any, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _empty(tensor: Any) -> bool:
    # From the shape: Tensor.size is PyTorch's size() method, not numpy's element count.
    return math.prod(tensor.shape) == 0


def _write(tensor: Tensor, value: Any) -> Tensor:
    with no_grad():  # an initialization, not a differentiable computation
        ops.assign(tensor, value)
    return tensor


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill ``tensor`` with ``val``.

    Example:
        >>> constant_(empty_parameter((2,)), 0.5).tolist()
        [0.5, 0.5]
    """
    return _write(tensor, val)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill ``tensor`` with zeros.

    Example:
        >>> zeros_(constant_(empty_parameter((2,)), 3.0)).tolist()
        [0.0, 0.0]
    """
    return _write(tensor, 0.0)


def ones_(tensor: Tensor) -> Tensor:
    """Fill ``tensor`` with ones.

    Example:
        >>> ones_(empty_parameter((2,))).tolist()
        [1.0, 1.0]
    """
    return _write(tensor, 1.0)


def uniform_(
    tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Generator | None = None
) -> Tensor:
    """Fill ``tensor`` with samples of U(a, b).

    Example:
        >>> w = uniform_(empty_parameter((100,)), -2.0, 2.0, generator=Generator(0))
        >>> bool((w.numpy() >= -2).all() and (w.numpy() < 2).all())
        True
    """
    if _empty(tensor):  # PyTorch: initializing a zero-element tensor is a no-op
        return tensor
    sample = uniform(tensor.shape, a, b, tensor.dtype, generator, tensor.device)
    return _write(tensor, sample)


def normal_(
    tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: Generator | None = None
) -> Tensor:
    """Fill ``tensor`` with samples of N(mean, std²).

    Example:
        >>> w = normal_(empty_parameter((10000,)), 1.0, 0.5, generator=Generator(0))
        >>> abs(float(w.numpy().std()) - 0.5) < 0.02
        True
    """
    if _empty(tensor):
        return tensor
    sample = normal(tensor.shape, mean, std, tensor.dtype, generator, tensor.device)
    return _write(tensor, sample)


def xavier_uniform_(
    tensor: Tensor, gain: float = 1.0, generator: Generator | None = None
) -> Tensor:
    """Glorot uniform: U(-bound, bound) with ``bound = gain * √(6 / (fan_in + fan_out))``.

    Example:
        >>> w = xavier_uniform_(empty_parameter((30, 20)), generator=Generator(0))
        >>> float(abs(w.numpy()).max()) <= math.sqrt(6 / 50)
        True
    """
    fan_in, fan_out = fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    """Glorot normal: N(0, std²) with ``std = gain * √(2 / (fan_in + fan_out))``.

    Example:
        >>> w = xavier_normal_(empty_parameter((200, 300)), generator=Generator(0))
        >>> abs(float(w.numpy().std()) - math.sqrt(2 / 500)) < 1e-3
        True
    """
    fan_in, fan_out = fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float:
    fan = _fan(tensor, mode)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(
    tensor: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Generator | None = None,
) -> Tensor:
    """He uniform: U(-bound, bound) with ``bound = gain(nonlinearity, a) * √(3 / fan)``.

    ``a`` is the negative slope of a following leaky ReLU; ``mode`` picks fan_in (keeps the
    forward variance) or fan_out (keeps the backward variance).

    Example:
        >>> w = kaiming_uniform_(empty_parameter((64, 50)), a=math.sqrt(5), generator=Generator(0))
        >>> float(abs(w.numpy()).max()) <= 1 / math.sqrt(50)
        True
    """
    if _empty(tensor):
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(
    tensor: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Generator | None = None,
) -> Tensor:
    """He normal: N(0, std²) with ``std = gain(nonlinearity, a) / √fan``.

    Example:
        >>> w = kaiming_normal_(empty_parameter((500, 200)), nonlinearity="relu",
        ...                     generator=Generator(0))
        >>> abs(float(w.numpy().std()) - math.sqrt(2 / 200)) < 1e-3
        True
    """
    if _empty(tensor):
        return tensor
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


def lecun_normal_(tensor: Tensor, generator: Generator | None = None) -> Tensor:
    """LeCun normal: N(0, 1 / fan_in) (untruncated, unlike JAX/Keras's truncated variant).

    Example:
        >>> w = lecun_normal_(empty_parameter((400, 100)), generator=Generator(0))
        >>> abs(float(w.numpy().std()) - 0.1) < 2e-3
        True
    """
    if _empty(tensor):
        return tensor
    return normal_(tensor, 0.0, 1.0 / math.sqrt(_fan(tensor, "fan_in")), generator)


def linear_default_(
    weight: Tensor, bias: Tensor | None = None, generator: Generator | None = None
) -> None:
    """PyTorch's default init of Linear and Conv layers, whose fan_in comes from ``weight``.

    ``kaiming_uniform_(weight, a=√5)`` (i.e. U(±1/√fan_in)) and ``bias`` ~ U(±1/√fan_in).

    Example:
        >>> w, b = empty_parameter((4, 9)), empty_parameter((4,))
        >>> linear_default_(w, b, generator=Generator(0))
        >>> bool(abs(b.numpy()).max() <= 1 / 3 and abs(w.numpy()).max() <= 1 / 3)
        True
    """
    kaiming_uniform_(weight, a=math.sqrt(5), generator=generator)
    if bias is not None:
        fan_in, _ = fan_in_and_fan_out(weight)
        bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        uniform_(bias, -bound, bound, generator)


# More of PyTorch's initializers, kept in their own module (they import nothing from this one).
from dualflow.nn.init_extra import (  # noqa: E402, F401 - re-exported
    dirac_,
    eye_,
    orthogonal_,
    sparse_,
    trunc_normal_,
)


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    # PyTorch's deprecated spellings without "_" (init.normal) find the in-place name.
    raise missing("module 'dualflow.nn.init'", f"nn.init.{name}", name, {}, lambda: list(globals()))
