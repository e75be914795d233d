"""Op-table entries for the activation functions."""

from __future__ import annotations

import math

import numpy as np

from dualflow import ops
from tests.opinfo import OpInfo, Sample
from tests.sampling import unary_samples

_erf = np.vectorize(math.erf)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def _grad_samples(low: float, high: float) -> object:
    def make(rng: np.random.Generator) -> list[Sample]:
        return [Sample((rng.uniform(low, high, (3, 4)), rng.normal(size=(3, 4))), name="3x4")]

    return make


ENTRIES = [
    OpInfo(
        "relu_grad",
        ops.relu_grad,
        lambda y, gy: np.where(y > 0, gy, 0.0),
        lambda rng: [
            Sample(
                (
                    np.maximum(rng.normal(size=(3, 4)), 0) + (rng.random((3, 4)) > 0.5) * 0.5,
                    rng.normal(size=(3, 4)),
                ),
                grad=(1,),
                name="3x4",
            )
        ],
    ),
    OpInfo("tanh_grad", ops.tanh_grad, lambda y, gy: gy * (1 - y * y), _grad_samples(-0.9, 0.9)),
    OpInfo(
        "sigmoid_grad", ops.sigmoid_grad, lambda y, gy: gy * y * (1 - y), _grad_samples(0.1, 0.9)
    ),
    OpInfo("tanh", ops.tanh, np.tanh, unary_samples()),
    OpInfo("sigmoid", ops.sigmoid, _sigmoid, unary_samples(-4, 4)),
    OpInfo("softplus", ops.softplus, lambda x: np.log1p(np.exp(x)), unary_samples(-4, 4)),
    OpInfo("relu", ops.relu, lambda x: np.maximum(x, 0), unary_samples(kinks=(0.0,))),
    OpInfo(
        "leaky_relu",
        ops.leaky_relu,
        lambda x, slope: np.where(x > 0, x, slope * x),
        unary_samples(kinks=(0.0,), slope=0.1),
    ),
    OpInfo(
        "elu",
        ops.elu,
        lambda x, alpha: np.where(x > 0, x, alpha * np.expm1(x)),
        unary_samples(kinks=(0.0,), alpha=1.3),
    ),
    OpInfo("gelu", ops.gelu, lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), unary_samples()),
    OpInfo("gelu_tanh", ops.gelu_tanh, _gelu_tanh, unary_samples()),
    OpInfo("silu", ops.silu, lambda x: x * _sigmoid(x), unary_samples(-4, 4)),
]
