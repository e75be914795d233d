"""Indexing and joining: typed errors and their messages, ``Tensor.__getitem__`` with backward,
and ``getitem``'s shape inference against numpy over many random indices."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import dualflow
from dualflow import ops
from dualflow.errors import DTypeError, ShapeError
from dualflow.ops.indexspec import GetItemError, indexed_shape, parse_index

X34 = np.arange(12.0).reshape(3, 4)


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: ops.concat([np.zeros((2, 3)), np.zeros((2, 4))], 0), ["concat", "axis 0"]),
        (lambda: ops.concat([np.zeros((2, 3)), np.zeros((3,))], 0), ["concat", "rank"]),
        (lambda: ops.concat([np.zeros((2, 3))], 2), ["concat", "axis 2", "rank 2"]),
        (lambda: ops.concat([np.zeros(()), np.zeros(())], 0), ["concat", "rank >= 1"]),
        (lambda: ops.concat([], 0), ["concat", "at least one"]),
        (lambda: ops.stack([np.zeros((2, 3)), np.zeros((3, 2))]), ["stack", "(2, 3)", "(3, 2)"]),
        (lambda: ops.stack([np.zeros((2, 3))], axis=3), ["stack", "axis 3", "(2, 3)"]),
        (lambda: ops.split(np.zeros((5, 2)), 2), ["split", "axis 0", "(5, 2)", "2 equal"]),
        (lambda: ops.split(np.zeros((4,)), 2, axis=1), ["split", "axis 1", "(4,)"]),
        (lambda: ops.flip(X34, 2), ["flip", "axis 2", "rank 2"]),
        (lambda: ops.pad(X34, -1), ["pad", "negative"]),
        (lambda: ops.pad(X34, ((1, 1), (1, 1), (1, 1))), ["pad", "(3, 4)"]),
        (lambda: ops.pad(X34, 1.5), ["pad", "pad_width"]),
        (lambda: ops.pad(X34, 1, constant_values=(1, 2)), ["pad", "scalar"]),
        (lambda: ops.pad(np.zeros((0, 2)), 1, mode="edge"), ["pad", "axis 0", "empty"]),
        (lambda: ops.getitem_grad(np.zeros(3), (3, 4), 0), ["getitem_grad", "(3,)", "(4,)"]),
        (lambda: ops.getitem(X34, (0, 0, 0)), ["getitem", "too many", "(3, 4)"]),
        (lambda: ops.getitem(X34, (Ellipsis, 0, Ellipsis)), ["getitem", "single ellipsis"]),
        (lambda: ops.getitem(X34, slice(None, None, 0)), ["getitem", "step", "zero"]),
        (lambda: ops.getitem(X34, ([0, 1], [0, 1, 2])), ["getitem", "(2,)", "(3,)", "broadcast"]),
        (lambda: ops.getitem(X34, np.ones(3, bool)[None]), ["getitem", "(1, 3)", "(3, 4)"]),
    ],
)
def test_shape_errors_name_op_and_shapes(call: Callable, words: list[str]) -> None:
    with pytest.raises(ShapeError) as info:
        call()
    message = str(info.value)
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"
    assert "test_indexing_errors.py" in message  # located at the user's line


@pytest.mark.parametrize(
    "index",
    [(3, 0), (0, -5), [0, 3], (np.array([[0], [-4]]), 1), (slice(None), [4])],
    ids=["int", "negative-int", "array", "negative-array", "array-axis-1"],
)
def test_out_of_bounds_is_a_shape_error_and_an_index_error(index: object) -> None:
    with pytest.raises(GetItemError) as info:
        ops.getitem(X34, index)
    assert isinstance(info.value, IndexError) and isinstance(info.value, ShapeError)
    message = str(info.value)
    assert "getitem" in message and "out of bounds" in message and "(3, 4)" in message
    assert "test_indexing_errors.py" in message


@pytest.mark.parametrize(
    ("index", "word"),
    [(1.5, "float"), (np.array([0.5]), "float64"), ("a", "str"), (True, "boolean scalar")],
)
def test_bad_index_types_are_dtype_errors(index: object, word: str) -> None:
    with pytest.raises(DTypeError, match=word):
        ops.getitem(X34, index)


def test_bad_pad_mode_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="pad: mode 'wrap'"):
        ops.pad(X34, 1, mode="wrap")


def test_concat_dtype_promotion_and_int_inputs() -> None:
    out = ops.concat([np.zeros((1, 2), np.int32), np.ones((2, 2), np.float32)], axis=0)
    assert out.dtype == np.float64 and out.shape == (3, 2)


def test_tensor_getitem_basic_backward() -> None:
    x = dualflow.tensor(X34, requires_grad=True)
    y = x[1:, None, ::-1]
    np.testing.assert_array_equal(y.numpy(), X34[1:, None, ::-1])
    (y * dualflow.tensor(np.arange(8.0).reshape(2, 1, 4))).sum().backward()
    want = np.zeros((3, 4))
    want[1:, ::-1] = np.arange(8.0).reshape(2, 4)
    np.testing.assert_array_equal(x.grad.numpy(), want)


def test_tensor_getitem_repeated_indices_accumulate() -> None:
    x = dualflow.tensor(X34, requires_grad=True)
    x[[0, 0, 2]].sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[2.0] * 4, [0.0] * 4, [1.0] * 4])


def test_integer_and_boolean_tensor_indices() -> None:
    x = dualflow.tensor(X34, requires_grad=True)
    rows, cols = dualflow.tensor([2, 0, 2]), dualflow.tensor([1, 1, 3])
    picked = x[rows, cols]
    np.testing.assert_array_equal(picked.numpy(), X34[[2, 0, 2], [1, 1, 3]])
    picked.sum().backward()
    assert x.grad.numpy()[2, 1] == 1.0 and x.grad.numpy().sum() == 3.0
    masked = x[x > 5.0]
    np.testing.assert_array_equal(masked.numpy(), X34[X34 > 5.0])


def test_double_backward_through_repeated_indices() -> None:
    x = dualflow.tensor([1.0, 2.0, 3.0], dtype="float64", requires_grad=True)
    (g,) = dualflow.grad((x[[0, 0, 2]] ** 3).sum(), x, create_graph=True)  # 3x^2 per use
    np.testing.assert_allclose(g.numpy(), [6.0, 0.0, 27.0])
    (gg,) = dualflow.grad(g.sum(), x)  # 6x per use
    np.testing.assert_allclose(gg.numpy(), [12.0, 0.0, 18.0])


def test_iterating_a_tensor_stops_at_the_end() -> None:
    rows = list(dualflow.tensor(X34))
    assert len(rows) == 3 and rows[2].tolist() == X34[2].tolist()


def test_split_returns_views_whose_gradients_join() -> None:
    x = dualflow.tensor(np.arange(6.0), requires_grad=True)
    a, _, c = ops.split(x, [1, 4])
    (a.sum() * 1.0 + c.sum() * 3.0).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 0.0, 0.0, 0.0, 3.0, 3.0])


def _random_component(rng: np.random.Generator, n: int) -> object:
    kind = rng.integers(5)
    if kind == 0:
        return int(rng.integers(-n, n))
    if kind == 1:
        bounds = [None, *range(-n - 1, n + 2)]
        step = [None, 1, 2, -1, -2][rng.integers(5)]
        return slice(bounds[rng.integers(len(bounds))], bounds[rng.integers(len(bounds))], step)
    if kind == 2:
        return rng.integers(-n, n, size=tuple(rng.integers(1, 3, size=rng.integers(0, 2))))
    return None if kind == 3 else slice(None)


def _random_index(rng: np.random.Generator, shape: tuple) -> tuple:
    components: list = []
    for n in shape[: rng.integers(len(shape) + 1)]:
        if rng.random() < 0.3:
            components.append(None)
        components.append(_random_component(rng, n))
    if rng.random() < 0.3:
        components.insert(rng.integers(len(components) + 1), Ellipsis)
    return tuple(c for c in components if not (c is None and rng.random() < 0.5))


def test_indexed_shape_agrees_with_numpy() -> None:
    rng = np.random.default_rng(0)
    for _ in range(2000):
        shape = tuple(int(d) for d in rng.integers(1, 4, size=rng.integers(1, 4)))
        index = _random_index(rng, shape)
        try:
            want = np.empty(shape)[index].shape
        except IndexError:
            continue  # numpy rejects it (e.g. array components that do not broadcast)
        template, arrays = parse_index(index, shape)
        bshape = np.broadcast_shapes(*(a.shape for a in arrays)) if arrays else None
        assert indexed_shape("getitem", shape, template, bshape) == want, (shape, index)
        assert ops.getitem(np.empty(shape), index).shape == want


def test_getitem_grad_agrees_with_numpy_add_at() -> None:
    rng = np.random.default_rng(1)
    checked = 0
    while checked < 300:
        shape = tuple(int(d) for d in rng.integers(1, 4, size=rng.integers(1, 4)))
        index = _random_index(rng, shape)
        try:
            gy = rng.normal(size=np.empty(shape)[index].shape)
        except IndexError:
            continue
        want = np.zeros(shape)
        np.add.at(want, index, gy)
        np.testing.assert_allclose(ops.getitem_grad(gy, shape, index).numpy(), want, atol=1e-12)
        checked += 1
