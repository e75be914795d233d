"""The numba softmax and log-softmax row kernels (kernels/loss/softmax_rows.py): against a
float64 reference over drawn shapes (float32 and float64); the same bits on one and two threads
and over any split of the rows; NaN and infinite rows as the numpy form gives them; and what
they leave to the numpy form."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dualflow
from dualflow import ops
from dualflow.background.process import using_threads
from dualflow.kernels.loss import softmax_rows

TOL = {np.float32: 2e-6, np.float64: 1e-13}


def _reference(kind: str, x: np.ndarray) -> np.ndarray:
    z = x.astype(np.float64) - x.max(axis=-1, keepdims=True)
    log_total = np.log(np.exp(z).sum(axis=-1, keepdims=True))
    return np.exp(z - log_total) if kind == "softmax" else z - log_total


def _numpy_form(kind: str, x: np.ndarray) -> np.ndarray:
    z = x - x.max(axis=-1, keepdims=True)
    return (
        np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)
        if kind == "softmax"
        else (z - np.log(np.exp(z).sum(axis=-1, keepdims=True)))
    )


@settings(max_examples=40, deadline=None)
@given(
    kind=st.sampled_from(softmax_rows.KINDS),
    shape=st.lists(st.integers(1, 40), min_size=2, max_size=3).map(tuple),
    scale=st.sampled_from([1.0, 30.0]),
    dtype=st.sampled_from([np.float32, np.float64]),
    seed=st.integers(0, 2**16),
)
def test_rows_match_a_float64_reference(kind, shape, scale, dtype, seed) -> None:
    x = (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)
    got = softmax_rows.rows(kind, x)
    assert got.dtype == np.dtype(dtype) and got.shape == x.shape and got.flags.c_contiguous
    want = _reference(kind, x)
    np.testing.assert_allclose(got, want, rtol=4 * TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("kind", softmax_rows.KINDS)
def test_the_bits_do_not_depend_on_threads_or_the_split(kind, monkeypatch) -> None:
    x = (np.random.default_rng(0).standard_normal((64, 37)) * 5).astype(np.float32)
    with using_threads(1):
        one = softmax_rows.rows(kind, x)
    monkeypatch.setattr(softmax_rows, "part_min", lambda: 1)  # every call in parts
    with using_threads(2):
        two = softmax_rows.rows(kind, x)
    np.testing.assert_array_equal(one.view(np.uint32), two.view(np.uint32))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the numpy form's inf - inf
@pytest.mark.parametrize("kind", softmax_rows.KINDS)
def test_nan_and_infinite_rows_as_the_numpy_form_gives_them(kind) -> None:
    x = np.zeros((5, 9), np.float32)
    x[0, 0], x[1, 4] = np.nan, np.nan  # NaN first, and NaN later: the whole row NaN
    x[2, 3] = np.inf  # inf - inf: the whole row NaN
    x[3] = -np.inf  # every entry -inf: NaN
    x[4, 2] = -np.inf  # one -inf: a zero probability (log: -inf)
    got, want = softmax_rows.rows(kind, x), _numpy_form(kind, x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[4], want[4], rtol=1e-6)


def test_what_the_kernels_leave_to_the_numpy_form() -> None:
    f32 = np.ones((3, 4), np.float32)
    assert softmax_rows.covers(f32)
    assert not softmax_rows.covers(f32.astype(np.float16))
    assert softmax_rows.covers(f32.T)  # any layout: read through a C-ordered copy
    assert not softmax_rows.covers(f32[0])  # one row
    assert not softmax_rows.covers(np.ones((3, 0), np.float32))
    x = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_array_equal(
        np.asarray(ops.softmax(x, axis=-1)), softmax_rows.rows("softmax", x)
    )
    np.testing.assert_allclose(np.asarray(ops.softmax(x, axis=0)), _reference("softmax", x.T).T)


@pytest.mark.parametrize("kind", softmax_rows.KINDS)
def test_the_bits_do_not_depend_on_the_inputs_layout(kind) -> None:
    """The same values C-ordered, Fortran-ordered or as a strided view give the same bits: a
    compiled plan may hand the op another layout than eager does (a view, or a copy), so the
    kernel must not be chosen by layout (it was: a transposed view took the numpy form)."""
    op = {"softmax": ops.softmax, "log_softmax": ops.log_softmax}[kind]
    x = (np.random.default_rng(4).standard_normal((64, 37)) * 5).astype(np.float32)
    wide = np.zeros((64, 74), np.float32)
    wide[:, ::2] = x
    layouts = [x, np.asfortranarray(x), wide[:, ::2], np.ascontiguousarray(x.T).T]
    results = [np.asarray(op(a, axis=-1)) for a in layouts]
    for got in results[1:]:
        np.testing.assert_array_equal(got.view(np.uint32), results[0].view(np.uint32))


def test_a_softmax_of_a_transposed_view_compiled_equals_eager() -> None:
    def step(x):
        y = ops.softmax(ops.transpose(x * 3.0, (1, 0)), axis=-1)
        return ops.log_softmax(ops.transpose(x, (1, 0)), axis=-1) + y

    a = np.random.default_rng(5).standard_normal((37, 64)).astype(np.float32)
    eager = np.asarray(step(dualflow.tensor(a)))
    compiled = dualflow.compile(step)
    for _ in range(3):  # the trace, then the plan
        got = np.asarray(compiled(dualflow.tensor(a)))
        np.testing.assert_array_equal(got.view(np.uint32), eager.view(np.uint32))
