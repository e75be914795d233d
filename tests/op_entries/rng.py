"""Op-table entries for the random ops and dropout.

The references re-implement the documented counter-based scheme (SplitMix64 of stream + i * gamma)
with Python integers, one element at a time, independently of the vectorized ``xp`` code.
"""

from __future__ import annotations

import math

import numpy as np

from dualflow import ops
from dualflow.tensor.random import Generator
from tests.opinfo import OpInfo, Sample

_MASK = 2**64 - 1
_GAMMA = 0x9E3779B97F4A7C15


def _mix(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def reference_bits(key: np.ndarray, n: int) -> list[int]:
    """The uint64 draws for ``key`` = [seed, counter], as Python ints."""
    seed, counter = int(key[0]), int(key[1])
    stream = _mix((seed + _mix((counter + _GAMMA) & _MASK)) & _MASK)
    return [_mix((stream + i * _GAMMA) & _MASK) for i in range(1, n + 1)]


def reference_mask(key: np.ndarray, shape: tuple, ratio: float, dtype: str = "float32"):
    n = math.prod(shape)
    halves = [h for b in reference_bits(key, (n + 1) // 2) for h in (b & 0xFFFFFFFF, b >> 32)]
    keep = [h >= int(ratio * 2.0**32) for h in halves[:n]]
    # The op scales in the output dtype, so the reference rounds the same way.
    return np.array(keep, dtype).reshape(shape) * np.dtype(dtype).type(1.0 / (1.0 - ratio))


def _uniform_ref(key, shape, low=0.0, high=1.0, dtype="float32"):
    bits = np.finfo(dtype).nmant + 1
    u = [(b >> (64 - bits)) / 2.0**bits for b in reference_bits(key, math.prod(shape))]
    return (low + (high - low) * np.array(u).reshape(shape)).astype(dtype)


def _normal_ref(key, shape, mean=0.0, std=1.0, dtype="float32"):
    n = math.prod(shape)
    u = [(b >> 11) / 2.0**53 for b in reference_bits(key, 2 * n)]
    z = [math.sqrt(-2 * math.log(1 - u[i])) * math.cos(2 * math.pi * u[n + i]) for i in range(n)]
    return (mean + std * np.array(z).reshape(shape)).astype(dtype)


_KEY = np.array([123, 7], np.uint64)


def _random_samples(**kwargs: object) -> object:
    return lambda rng: [
        Sample((_KEY, (3, 4)), dict(kwargs), name="f32"),
        Sample((np.array([2**64 - 1, 0], np.uint64), (5,)), {**kwargs, "dtype": "float64"}),
    ]


def _dropout_fixed(x: object, ratio: float = 0.4) -> object:
    # A fresh generator per call: every evaluation (gradcheck included) sees the same mask.
    return ops.dropout(x, ratio, train=True, generator=Generator(5))


def _dropout_ref(x: np.ndarray, ratio: float = 0.4) -> np.ndarray:
    return x * reference_mask(np.array([5, 1], np.uint64), x.shape, ratio, x.dtype)


ENTRIES = [
    OpInfo(
        "dropout_mask",
        ops.dropout_mask,
        reference_mask,
        _random_samples(ratio=0.3),
        differentiable=False,
    ),
    OpInfo(
        "random_uniform",
        ops.random_uniform,
        _uniform_ref,
        _random_samples(low=-2.0, high=3.0),
        differentiable=False,
    ),
    OpInfo(
        "random_normal",
        ops.random_normal,
        _normal_ref,
        _random_samples(mean=1.0, std=2.0),
        differentiable=False,
    ),
    OpInfo(
        "dropout",
        _dropout_fixed,
        _dropout_ref,
        lambda rng: [
            Sample((rng.normal(size=(4, 5)),), name="0.4"),
            Sample((rng.normal(size=(3, 2, 2)), 0.75), name="0.75"),
        ],
        ops=("dropout_mask",),
        composite=True,
    ),
]
