"""Property tests of binary elementwise ops over random broadcastable shapes and mixed dtypes:
forward (values, dtype with NEP 50 promotion, infer) equals numpy; gradients are numpy's sum_to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import dualflow
from dualflow import ops
from dualflow.autograd.eager import meta_of
from dualflow.ops import OPS

SETTINGS = settings(max_examples=40, deadline=None)

# Operand kinds: numpy dtypes, or Python scalars ("py...", weak under NEP 50).
PAIRS = [
    ("float32", "float32"),
    ("float64", "float64"),
    ("float32", "float64"),
    ("float64", "float32"),
    ("float32", "int64"),
    ("int64", "float32"),
    ("int32", "float64"),
    ("float32", "int32"),
    ("float32", "pyfloat"),
    ("pyfloat", "float64"),
    ("pyint", "float32"),
    ("float64", "pyint"),
    ("int64", "int32"),
]


def _partials(name: str) -> Callable[[Any, Any], tuple[Any, Any]]:
    """d out / d a and d out / d b of each op, in float64 numpy."""
    return {
        "add": lambda a, b: (np.ones_like(a * b), np.ones_like(a * b)),
        "subtract": lambda a, b: (np.ones_like(a * b), -np.ones_like(a * b)),
        "multiply": lambda a, b: (b + 0 * a, a + 0 * b),
        "divide": lambda a, b: (1 / b + 0 * a, -a / (b * b)),
        "maximum": lambda a, b: ((a >= b) * 1.0, (a < b) * 1.0),
        "minimum": lambda a, b: ((a <= b) * 1.0, (a > b) * 1.0),
        "power": lambda a, b: (b * a ** (b - 1), a**b * np.log(a)),
    }[name]


REFERENCE = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "power": np.power,
}


def np_sum_to(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Reduce a broadcast gradient back to ``shape`` (numpy reference of ``ops.sum_to``)."""
    g = g.sum(axis=tuple(range(g.ndim - len(shape))))
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True).reshape(shape)


def _operand(kind: str, shape: tuple, rng: np.random.Generator, positive: bool) -> Any:
    if kind == "pyfloat":
        return float(rng.choice([0.75, 1.5])) * (1.0 if positive else float(rng.choice([-1, 1])))
    if kind == "pyint":
        return int(rng.integers(1, 4))
    if kind.startswith("int"):
        return rng.integers(1, 4, shape).astype(kind)
    values = rng.uniform(0.5, 2.0, shape)
    if not positive:
        values = values * rng.choice([-1.0, 1.0], shape)
    return values.astype(kind)


def _as_input(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return dualflow.tensor(value, requires_grad=value.dtype.kind == "f")
    return value


def _tolerance(*values: Any) -> dict[str, float]:
    low = any(getattr(v, "dtype", None) == np.float32 for v in values)
    return {"rtol": 1e-4, "atol": 1e-3} if low else {"rtol": 1e-10, "atol": 1e-10}


def _check_forward(name: str, got: dualflow.Tensor, want: Any, inputs: list) -> None:
    want = np.asarray(want)
    assert got.dtype == want.dtype, f"{name}: dtype {got.dtype}, numpy gives {want.dtype}"
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want)
    (meta,) = OPS[name].infer(*(meta_of(v) for v in inputs))
    assert tuple(meta.shape) == want.shape and np.dtype(meta.dtype) == want.dtype, meta


@SETTINGS
@given(
    name=st.sampled_from(sorted(REFERENCE)),
    kinds=st.sampled_from(PAIRS),
    shapes=mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4),
    seed=st.integers(0, 2**32 - 1),
)
def test_binary_op_forward_and_gradient(
    name: str, kinds: tuple[str, str], shapes: Any, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    positive = name == "power"
    a, b = (
        _operand(k, s, rng, positive and i == 0)
        for i, (k, s) in enumerate(zip(kinds, shapes.input_shapes))
    )
    ta, tb = _as_input(a), _as_input(b)
    y = getattr(ops, name)(ta, tb)
    want = REFERENCE[name](a, b)
    _check_forward(name, y, want, [a, b])

    if not y.requires_grad:
        assert not any(getattr(t, "requires_grad", False) for t in (ta, tb))
        return
    gy = rng.standard_normal(y.shape).astype(y.dtype)
    y.backward(gy)
    da, db = _partials(name)(np.asarray(a, np.float64), np.asarray(b, np.float64))
    for value, tensor, partial in ((a, ta, da), (b, tb, db)):
        if not getattr(tensor, "requires_grad", False):
            continue
        assert tensor.grad is not None
        assert tensor.grad.shape == value.shape, (
            f"{name}: grad {tensor.grad.shape} != {value.shape}"
        )
        assert tensor.grad.dtype == value.dtype
        expected = np_sum_to(gy.astype(np.float64) * partial, value.shape)
        np.testing.assert_allclose(tensor.grad.numpy(), expected, **_tolerance(a, b, y))


@SETTINGS
@given(
    kinds=st.sampled_from([p for p in PAIRS if "int" not in p[0] + p[1]]),
    shapes=mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=4),
    seed=st.integers(0, 2**32 - 1),
)
def test_where_forward_and_gradient(kinds: tuple[str, str], shapes: Any, seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape_c, shape_a, shape_b = shapes.input_shapes
    c = rng.random(shape_c) > 0.5
    a, b = (_operand(k, s, rng, False) for k, s in zip(kinds, (shape_a, shape_b)))
    ta, tb = _as_input(a), _as_input(b)
    y = ops.where(c, ta, tb)
    _check_forward("where", y, np.where(c, a, b), [c, a, b])
    if not y.requires_grad:  # both operands were 0-d numpy scalars (no tensors)
        return
    gy = rng.standard_normal(y.shape).astype(y.dtype)
    y.backward(gy)
    cb = np.broadcast_to(c, y.shape)
    for value, tensor, mask in ((a, ta, cb), (b, tb, ~cb)):
        if isinstance(value, np.ndarray):
            assert tensor.grad.shape == value.shape and tensor.grad.dtype == value.dtype
            expected = np_sum_to(np.where(mask, gy.astype(np.float64), 0.0), value.shape)
            np.testing.assert_allclose(tensor.grad.numpy(), expected, **_tolerance(a, b, y))


@SETTINGS
@given(
    shapes=mutually_broadcastable_shapes(num_shapes=1, max_dims=4, max_side=4, base_shape=()),
    extra=st.lists(st.integers(1, 3), max_size=2),
    dtype=st.sampled_from(["float32", "float64"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_sum_to_and_broadcast_to_match_numpy(
    shapes: Any, extra: list[int], dtype: str, seed: int
) -> None:
    (shape,) = shapes.input_shapes
    rng = np.random.default_rng(seed)
    target = tuple(extra) + tuple(d if d != 1 else int(rng.integers(1, 4)) for d in shape)
    x = dualflow.tensor(rng.standard_normal(shape).astype(dtype), requires_grad=True)
    big = ops.broadcast_to(x, target)
    np.testing.assert_array_equal(big.numpy(), np.broadcast_to(x.numpy(), target))
    g = rng.standard_normal(target).astype(dtype)
    small = ops.sum_to(dualflow.tensor(g), shape)
    assert small.shape == shape and small.dtype == np.dtype(dtype)
    np.testing.assert_allclose(
        small.numpy(), np_sum_to(g.astype(np.float64), shape), rtol=1e-5, atol=1e-5
    )
    big.backward(g)  # broadcast_to's backward is sum_to
    np.testing.assert_allclose(x.grad.numpy(), small.numpy(), rtol=1e-6)
