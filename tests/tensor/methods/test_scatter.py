"""``scatter_reduce``/``index_add`` on random programs against a plain numpy loop (PyTorch's
definition), and the in-place forms' autograd rules (as every in-place method's)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dualflow

REDUCERS = {
    "sum": np.add,
    "prod": np.multiply,
    "amax": np.maximum,
    "amin": np.minimum,
}


def _reference(x, dim, index, src, reduce, include_self):
    out = x.copy()
    seen: dict[tuple, list] = {}
    for pos in np.ndindex(index.shape):
        target = list(pos)
        target[dim] = index[pos]
        seen.setdefault(tuple(target), []).append(src[pos])
    for target, values in seen.items():
        pool = ([x[target]] if include_self else []) + values
        if reduce == "mean":
            out[target] = np.mean(pool)
        else:
            out[target] = REDUCERS[reduce].reduce(np.array(pool))
    return out


@st.composite
def scatter_programs(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim)))
    dim = draw(st.integers(0, ndim - 1))
    ishape = tuple(
        draw(st.integers(1, 5)) if d == dim else draw(st.integers(1, n))
        for d, n in enumerate(shape)
    )
    seed = draw(st.integers(0, 2**16))
    reduce = draw(st.sampled_from(["sum", "prod", "mean", "amax", "amin"]))
    return shape, dim, ishape, seed, reduce, draw(st.booleans())


@settings(max_examples=40, deadline=None)
@given(scatter_programs())
def test_scatter_reduce_matches_the_definition(program) -> None:
    shape, dim, ishape, seed, reduce, include_self = program
    rng = np.random.default_rng(seed)
    x, src = rng.standard_normal(shape), rng.standard_normal(ishape)
    index = rng.integers(0, shape[dim], ishape)
    got = dualflow.tensor(x).scatter_reduce(
        dim, dualflow.tensor(index), dualflow.tensor(src), reduce, include_self=include_self
    )
    want = _reference(x, dim, index, src, reduce, include_self)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 4), st.integers(1, 6), st.integers(0, 2**16))
def test_index_add_matches_the_definition(rows: int, picks: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, source = rng.standard_normal((rows, 3)), rng.standard_normal((picks, 3))
    index = rng.integers(0, rows, picks)
    want = x.copy()
    np.add.at(want, index, 2.0 * source)
    got = dualflow.tensor(x).index_add(0, dualflow.tensor(index), dualflow.tensor(source), alpha=2)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


def test_inplace_scatter_refuses_graph_tensors_and_writes_under_no_grad() -> None:
    w = dualflow.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = w * 2
    index, src = dualflow.tensor([0]), dualflow.tensor([9.0])
    with pytest.raises(RuntimeError, match="autograd graph"):
        y.scatter_(0, index, src)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        w.index_add_(0, index, src)
    with dualflow.no_grad():
        w.scatter_add_(0, index, src)
    assert w.tolist() == [10.0, 2.0, 3.0]


def test_index_out_of_range_is_an_error() -> None:
    x = dualflow.ops.zeros(3)
    with pytest.raises(Exception, match=r"must lie in \[0, 3\), got 3"):
        x.index_add(0, dualflow.tensor([3]), dualflow.tensor([1.0]))
    with pytest.raises(Exception, match=r"must lie in \[0, 3\), got -1"):
        x.scatter_reduce(0, dualflow.tensor([-1]), dualflow.tensor([1.0]), "amax")


def test_compiled_scatter_reduce_checks_the_index_at_every_call() -> None:
    @dualflow.compile
    def f(x, i):
        return x.scatter_reduce(0, i, x[:2] * 1, "amax")

    x = dualflow.tensor([1.0, 2.0, 3.0])
    assert f(x, dualflow.tensor([0, 1])).tolist() == [1.0, 2.0, 3.0]
    assert f(x, dualflow.tensor([2, 2])).tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(dualflow.errors.ShapeError, match="got 5"):
        f(x, dualflow.tensor([0, 5]))
    assert f.stats().plan_runs == 2
