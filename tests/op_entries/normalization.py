"""Op-table entries for batch_norm (training outputs, inference map, its backward as an op)
and layer_norm (output, statistics, its backward as an op)."""

from __future__ import annotations

import numpy as np

from dualflow import ops
from dualflow.ops import OPS
from dualflow.ops.dispatch import apply
from tests.opinfo import OpInfo, Sample

_EPS = 1e-5


def _bn_stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    axes = (0,) + tuple(range(2, x.ndim))
    return x.mean(axis=axes), x.var(axis=axes), (1, -1) + (1,) * (x.ndim - 2)


def _bn_train_ref(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    mu, var, shape = _bn_stats(x)
    xhat = (x - mu.reshape(shape)) / np.sqrt(var.reshape(shape) + _EPS)
    return gamma.reshape(shape) * xhat + beta.reshape(shape)


def _bn_all_ref(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> tuple:
    mu, var, _ = _bn_stats(x)
    return _bn_train_ref(x, gamma, beta), mu, var


def _bn_all(x: object, gamma: object, beta: object) -> tuple:
    # The primitive itself: its mean and variance outputs get gradients too.
    return apply(OPS["batch_norm"], x, gamma, beta, eps=_EPS)


def _per_channel(x: np.ndarray) -> tuple:
    # the shape that broadcasts a (C,) statistic over x (N, C, ...)
    return (1, -1) + (1,) * (x.ndim - 2)


def _xhat(x: np.ndarray, mean: np.ndarray, var: np.ndarray) -> np.ndarray:
    shape = _per_channel(x)
    return (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + _EPS)


def _bn_eval_ref(x: np.ndarray, gamma, beta, mean, var) -> np.ndarray:
    shape = _per_channel(x)
    return gamma.reshape(shape) * _xhat(x, mean, var) + beta.reshape(shape)


def _bn_eval(x: object, gamma: object, beta: object, mean: object, var: object) -> object:
    return ops.batch_norm(x, gamma, beta, mean, var, train=False)


def _bn_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for shape in [(5, 3), (2, 3, 2, 2)]:
        c = shape[1]
        x = rng.normal(1.0, 2.0, shape)
        out.append(Sample((x, rng.uniform(0.5, 1.5, c), rng.normal(size=c)), name=str(shape)))
    return out


def _bn_eval_samples(rng: np.random.Generator) -> list[Sample]:
    return [
        Sample(s.inputs + (rng.normal(size=s.inputs[1].shape), rng.uniform(0.5, 2, 3)), name=s.name)
        for s in _bn_samples(rng)
    ]


def _bn_grad_ref(gy, x, gamma, mean, var) -> tuple:
    shape = _per_channel(x)
    axes, n = (0,) + tuple(range(2, x.ndim)), x.size // x.shape[1]
    s, xhat = 1.0 / np.sqrt(var + _EPS), _xhat(x, mean, var)
    gbeta, ggamma = gy.sum(axis=axes), (gy * xhat).sum(axis=axes)
    gx = (gamma * s).reshape(shape) * (
        gy - (gbeta / n).reshape(shape) - xhat * (ggamma / n).reshape(shape)
    )
    return gx, ggamma, gbeta


def _bn_grad(gy: object, x: object, gamma: object, mean: object, var: object) -> tuple:
    return ops.batch_norm_grad(gy, x, gamma, mean, var, eps=_EPS)


def _bn_grad_samples(rng: np.random.Generator) -> list[Sample]:
    # the statistics are free inputs here (their own gradients flow through them)
    out = []
    for shape in [(5, 3), (2, 3, 2, 2)]:
        c = shape[1]
        gy, x = rng.normal(size=shape), rng.normal(1.0, 2.0, shape)
        stats = (rng.uniform(0.5, 1.5, c), rng.normal(size=c), rng.uniform(0.5, 2.0, c))
        out.append(Sample((gy, x, *stats), name=str(shape)))
    return out


def _ln_ref(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    axes = tuple(range(x.ndim - gamma.ndim, x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    return (x - mu) / np.sqrt(var + _EPS) * gamma + beta


def _ln_samples(rng: np.random.Generator) -> list[Sample]:
    x = rng.normal(size=(2, 3, 4))
    return [
        Sample((x, rng.uniform(0.5, 1.5, (4,)), rng.normal(size=(4,))), name="last"),
        Sample((x, rng.uniform(0.5, 1.5, (3, 4)), rng.normal(size=(3, 4))), name="last-two"),
        Sample((x[0, 0], rng.uniform(0.5, 1.5, (4,)), rng.normal(size=(4,))), name="one-row"),
    ]


def _ln_stats_ref(x: np.ndarray, gamma: np.ndarray) -> tuple:
    axes = tuple(range(x.ndim - gamma.ndim, x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    return mu, 1.0 / np.sqrt(((x - mu) ** 2).mean(axis=axes, keepdims=True) + _EPS)


def _ln_all_ref(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> tuple:
    return (_ln_ref(x, gamma, beta), *_ln_stats_ref(x, gamma))


def _ln_all(x: object, gamma: object, beta: object) -> tuple:
    # The primitive itself: its mean and rstd outputs get gradients too.
    return apply(OPS["layer_norm"], x, gamma, beta, eps=_EPS)


def _ln_grad_ref(gy, x, gamma, mean, rstd) -> tuple:
    axes = tuple(range(x.ndim - gamma.ndim, x.ndim))
    rows = tuple(range(x.ndim - gamma.ndim))
    xhat, g = (x - mean) * rstd, gy * gamma
    gx = rstd * (
        g - g.mean(axis=axes, keepdims=True) - xhat * (g * xhat).mean(axis=axes, keepdims=True)
    )
    return gx, (gy * xhat).sum(axis=rows), gy.sum(axis=rows)


def _ln_grad_samples(rng: np.random.Generator) -> list[Sample]:
    # the statistics are free inputs here (their own gradients flow through them)
    out = []
    for shape, k in [((5, 3), 1), ((2, 3, 4), 2)]:
        stats = shape[: len(shape) - k] + (1,) * k
        gy, x = rng.normal(size=shape), rng.normal(1.0, 2.0, shape)
        gamma = rng.uniform(0.5, 1.5, shape[len(shape) - k :])
        ins = (gy, x, gamma, rng.normal(size=stats), rng.uniform(0.5, 2.0, stats))
        out.append(Sample(ins, name=str(shape)))
    return out


_TOL = {"f32_tol": (1e-4, 1e-5), "grad_tol": (1e-4, 1e-6)}

ENTRIES = [
    OpInfo("batch_norm", ops.batch_norm, _bn_train_ref, _bn_samples, **_TOL),
    OpInfo("batch_norm_outputs", _bn_all, _bn_all_ref, _bn_samples, ops=("batch_norm",), **_TOL),
    OpInfo("batch_norm_grad", _bn_grad, _bn_grad_ref, _bn_grad_samples, **_TOL),
    OpInfo("batch_norm_eval", _bn_eval, _bn_eval_ref, _bn_eval_samples, composite=True, **_TOL),
    OpInfo("layer_norm", ops.layer_norm, _ln_ref, _ln_samples, **_TOL),
    OpInfo("layer_norm_outputs", _ln_all, _ln_all_ref, _ln_samples, ops=("layer_norm",), **_TOL),
    OpInfo("layer_norm_grad", ops.layer_norm_grad, _ln_grad_ref, _ln_grad_samples, **_TOL),
]
