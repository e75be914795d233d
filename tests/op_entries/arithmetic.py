"""Op-table entries for the elementwise arithmetic, math and comparison ops."""

from __future__ import annotations

import math

import numpy as np

from dualflow import ops
from tests.opinfo import OpInfo, Sample
from tests.sampling import BINARY_SHAPES, away_from, binary_samples, unary_samples


def _binary(name: str, ref: object, **sample_kwargs: object) -> OpInfo:
    return OpInfo(name, getattr(ops, name), ref, binary_samples(**sample_kwargs))


def _unary(name: str, ref: object, **sample_kwargs: object) -> OpInfo:
    return OpInfo(name, getattr(ops, name), ref, unary_samples(**sample_kwargs))


def _ties(rng: np.random.Generator) -> list[Sample]:
    a = rng.uniform(-2, 2, (3, 4))
    b = away_from(rng.uniform(-2, 2, (3, 4)), ()) + 0.0
    b = np.where(np.abs(a - b) < 0.1, a + 0.3, b)
    return [Sample((a, b), name="3x4"), Sample((a, b[0]), name="broadcast")]


def _where_samples(rng: np.random.Generator) -> list[Sample]:
    cond = rng.uniform(size=(3, 4)) > 0.5
    return [
        Sample((cond, rng.normal(size=(3, 4)), rng.normal(size=(4,))), name="broadcast"),
        Sample((cond[0], rng.normal(size=(3, 4)), 0.5), name="scalar"),
    ]


def _clip_samples(rng: np.random.Generator) -> list[Sample]:
    x = away_from(rng.uniform(-2, 2, (3, 4)), (-1.0, 0.5))
    return [Sample((x, -1.0, 0.5), name="both"), Sample((x, None, 0.5), name="upper")]


def _cast_samples(rng: np.random.Generator) -> list[Sample]:
    return [
        Sample((rng.normal(size=(3, 4)), "float64"), name="to-float64"),
        Sample((rng.normal(size=(2,)) * 5, "int32"), name="to-int32", grad=()),
    ]


def _division_samples(rng: np.random.Generator) -> list[Sample]:
    """Mixed signs with quotients at least 0.1 from an integer (where remainder jumps), plus
    Python-scalar divisors and dividends."""
    out = []
    for sa, sb in BINARY_SHAPES:
        full = np.broadcast_shapes(sa, sb)
        b = rng.uniform(0.5, 2.0, sb) * rng.choice([-1.0, 1.0], sb)
        if full == sa:  # a quotient chosen per element
            a = (rng.integers(-3, 4, full) + rng.uniform(0.1, 0.9, full)) * b
        else:  # a broadcast dividend: small enough that every quotient lies in (-0.4, 0.4)
            a = rng.uniform(0.05, 0.2, sa) * rng.choice([-1.0, 1.0], sa)
        out.append(Sample((np.asarray(a), np.asarray(b)), name=f"{sa}x{sb}"))
    out.append(Sample((rng.uniform(-5.0, 5.0, (4,)).round() + 0.25, -1.5), name="array-scalar"))
    out.append(Sample((2.5, rng.uniform(0.5, 0.7, (4,)) + 0.1), name="scalar-array"))
    return out


def _division(name: str, ref: object, **kwargs: object) -> OpInfo:
    return OpInfo(name, getattr(ops, name), ref, _division_samples, **kwargs)


def _comparison(name: str, ref: object) -> OpInfo:
    return OpInfo(name, getattr(ops, name), ref, binary_samples(), differentiable=False)


_erf = np.vectorize(math.erf)

ENTRIES = [
    _binary("add", np.add),
    _binary("subtract", np.subtract),
    _binary("multiply", np.multiply),
    _binary("divide", np.divide, low_b=0.5, high_b=2.0),
    _unary("negative", np.negative),
    _binary("power", np.power, low=0.5, high=2.0),
    OpInfo("maximum", ops.maximum, np.maximum, _ties),
    OpInfo("minimum", ops.minimum, np.minimum, _ties),
    _division("remainder", np.remainder),
    _division("fmod", np.fmod),
    _division("floor_divide", np.floor_divide, differentiable=False),
    _unary("exp", np.exp),
    _unary("log", np.log, low=0.2, high=3.0),
    _unary("log1p", np.log1p, low=-0.5, high=2.0),
    _unary("expm1", np.expm1),
    _unary("sqrt", np.sqrt, low=0.2, high=3.0),
    _unary("rsqrt", lambda x: 1 / np.sqrt(x), low=0.2, high=3.0),
    _unary("square", np.square),
    _unary("abs", np.abs, kinks=(0.0,)),
    _unary("sin", np.sin),
    _unary("cos", np.cos),
    _unary("atan", np.arctan),
    _unary("erf", _erf),
    OpInfo("clip", ops.clip, lambda x, lo, hi: np.clip(x, lo, hi), _clip_samples),
    OpInfo("where", ops.where, np.where, _where_samples),
    OpInfo(
        "cast", ops.cast, lambda x, d: np.asarray(x).astype(d), _cast_samples, keeps_dtype=False
    ),
    _comparison("greater", np.greater),
    _comparison("greater_equal", np.greater_equal),
    _comparison("less", np.less),
    _comparison("less_equal", np.less_equal),
    _comparison("equal", np.equal),
    _comparison("not_equal", np.not_equal),
]
