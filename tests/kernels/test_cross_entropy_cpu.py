"""The numba softmax cross-entropy kernels (kernels/loss/cross_entropy.py): losses and gradients
against a float64 reference over drawn rows, labels and ignored rows (float32 and float64); the
same bits on one and two threads when the rows are split; NaN, all-ignored and out-of-range
labels as the op promises; and an MLP step with the loss compiled equal to eager, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dualflow
from dualflow import nn, ops
from dualflow.background.process import using_threads
from dualflow.errors import ShapeError
from dualflow.kernels.loss import cross_entropy
from dualflow.ops import loss

TOL = {np.float32: (2e-6, 1e-6), np.float64: (1e-12, 1e-13)}


def _reference(x: np.ndarray, t: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row losses and gradients in float64 (0 where t == -1)."""
    z = x.astype(np.float64) - x.max(axis=1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    keep = t != -1
    picked = np.take_along_axis(z, np.where(keep, t, 0)[:, None], axis=1)[:, 0]
    losses = np.where(keep, np.log(np.exp(z).sum(axis=1)) - picked, 0.0)
    onehot = np.arange(x.shape[1]) == np.where(keep, t, 0)[:, None]
    return losses, (p - onehot) * np.where(keep, g, 0.0)[:, None]


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(0, 9),
    classes=st.integers(1, 40),
    scale=st.sampled_from([1.0, 30.0, 1e4]),
    dtype=st.sampled_from([np.float32, np.float64]),
    seed=st.integers(0, 2**16),
)
def test_losses_and_gradients_match_a_float64_reference(rows, classes, scale, dtype, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, classes)) * scale).astype(dtype)
    t = rng.integers(-1, classes, rows)
    g = rng.standard_normal(rows)
    losses, count, bad = cross_entropy.row_losses(x, t, -1)
    gx, bad_grad = cross_entropy.row_grads(x, t, -1, g)
    want_losses, want_gx = _reference(x, t, g)
    assert (count, bad, bad_grad) == (int(np.sum(t != -1)), False, False)
    assert gx.dtype == dtype and losses.dtype == np.float64
    rtol, atol = TOL[dtype]
    np.testing.assert_allclose(losses, want_losses, rtol=rtol, atol=atol * scale)
    np.testing.assert_allclose(gx, want_gx, rtol=rtol * 10, atol=atol * 10)


def test_rows_split_over_threads_give_the_same_bits():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((600, 1000)).astype(np.float32)  # above two parts' PART_MIN
    t = rng.integers(-1, 1000, 600)
    g = rng.standard_normal(600)
    results = []
    for threads in (1, 2):
        with using_threads(threads):
            losses, count, _ = cross_entropy.row_losses(x, t, -1)
            gx, _ = cross_entropy.row_grads(x, t, -1, g)
            total = ops.softmax_cross_entropy(x, t).numpy()
        results.append((losses.tobytes(), count, gx.tobytes(), total.tobytes()))
    assert results[0] == results[1]


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(0, 9),
    classes=st.integers(1, 40),
    ignore=st.sampled_from([-1, 0]),
    dtype=st.sampled_from([np.float32, np.float64]),
    seed=st.integers(0, 2**16),
)
def test_losses_with_gradients_are_the_two_kernels_bits(rows, classes, ignore, dtype, seed):
    """``row_losses_and_grads`` (one exp per row, the merged op's kernel) gives ``row_losses``'
    and ``row_grads``' very bits, ignored and out-of-range labels (reported, rows zero) too."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, classes)) * 8).astype(dtype)
    t, g = rng.integers(-2, classes + 2, rows), rng.standard_normal(rows)
    losses, count, gx, bad = cross_entropy.row_losses_and_grads(x, t, ignore, g)
    want_losses, want_count, want_bad = cross_entropy.row_losses(x, t, ignore)
    want_gx, want_bad_grad = cross_entropy.row_grads(x, t, ignore, g)
    assert (count, bad) == (want_count, want_bad) and bad == want_bad_grad
    assert losses.tobytes() == want_losses.tobytes() and gx.tobytes() == want_gx.tobytes()


def test_losses_with_gradients_split_over_threads_give_the_same_bits():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((600, 1000)).astype(np.float32)  # above two parts' PART_MIN
    t, g = rng.integers(-1, 1000, 600), rng.standard_normal(600)
    results = []
    for threads in (1, 2):
        with using_threads(threads):
            losses, count, gx, _ = cross_entropy.row_losses_and_grads(x, t, -1, g)
        results.append((losses.tobytes(), count, gx.tobytes()))
    assert results[0] == results[1]
    assert results[0][2] == cross_entropy.row_grads(x, t, -1, g)[0].tobytes()


def test_nan_rows_all_ignored_and_bad_labels():
    x = np.zeros((3, 4), np.float32)
    x[1, 2] = np.nan
    losses, _, _ = cross_entropy.row_losses(x, np.array([0, 1, 2]), -1)
    assert np.isnan(losses[1]) and not np.isnan(losses[[0, 2]]).any()
    gx, bad = cross_entropy.row_grads(x, np.array([-1, -1, 7]), -1, np.ones(3))
    assert bad and not gx.any()  # an out-of-range row is zero and reported
    xt = dualflow.tensor(x[[0, 2]], requires_grad=True)
    loss = ops.softmax_cross_entropy(xt, np.array([-1, -1]))
    loss.backward()
    assert np.isnan(loss.item()) and not xt.grad.numpy().any()  # PyTorch's NaN, gradient 0
    with pytest.raises(ShapeError, match=r"softmax_cross_entropy: labels must lie in \[0, 4\)"):
        ops.softmax_cross_entropy(x, np.array([0, 4, 1]))


def test_label_dtypes_layouts_and_spatial_axes_agree():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 3, 2, 4))
    t = rng.integers(-1, 3, (5, 2, 4))
    rows = np.moveaxis(x, 1, -1).reshape(-1, 3)
    want = _reference(rows, t.reshape(-1), np.ones(t.size))[0].reshape(t.shape)
    got = ops.softmax_cross_entropy(x, t.astype(np.int32), reduce="no").numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12)
    strided = np.asfortranarray(rows)
    assert cross_entropy.row_losses(strided, t.reshape(-1).astype(np.uint8), 255)[0].shape == (40,)


def _classifier() -> nn.Module:
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 7))


@pytest.mark.parametrize("passes", ["O0", "O2"])
def test_a_classifier_step_compiled_equals_eager(passes: str) -> None:
    rng = np.random.default_rng(4)
    x = dualflow.tensor(rng.standard_normal((16, 20), np.float32))
    labels = dualflow.tensor(rng.integers(-1, 7, 16))

    def run(compiled: bool) -> tuple[list[float], list[np.ndarray]]:
        dualflow.random.seed(0)
        model = _classifier()
        opt = dualflow.optim.SGD(model.parameters(), lr=0.1)

        def step():
            opt.zero_grad()
            loss = ops.softmax_cross_entropy(model(x), labels)
            loss.backward()
            opt.step()
            return loss

        fn = dualflow.compile(step, passes=passes) if compiled else step
        losses = [fn().item() for _ in range(4)]
        return losses, [p.numpy().copy() for p in model.parameters()]

    eager, compiled = run(False), run(True)
    assert eager[0] == compiled[0]
    for a, b in zip(eager[1], compiled[1], strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("reduce", ["mean", "sum", "no"])
def test_the_array_module_path_agrees_with_the_kernels(monkeypatch, reduce: str) -> None:
    # the path cupy arrays and float16 take: the same losses and gradients up to rounding
    rng = np.random.default_rng(5)
    x, t = rng.standard_normal((6, 4, 3)), rng.integers(-1, 4, (6, 3))
    gy = rng.standard_normal(t.shape) if reduce == "no" else np.array(0.7)
    attrs = {"ignore_label": -1, "reduce": reduce}
    kernels = [
        loss.SoftmaxCrossEntropy.forward(np, x, t, **attrs),
        loss.SoftmaxCrossEntropyGrad.forward(np, x, t, gy, **attrs),
    ]
    monkeypatch.setattr(loss, "_kernels", lambda *_: None)
    arrays = [
        loss.SoftmaxCrossEntropy.forward(np, x, t, **attrs),
        loss.SoftmaxCrossEntropyGrad.forward(np, x, t, gy, **attrs),
    ]
    for a, b in zip(kernels, arrays, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    half = ops.softmax_cross_entropy(x.astype(np.float16), t, reduce=reduce).numpy()
    assert half.dtype == np.float16
    np.testing.assert_allclose(half, kernels[0], rtol=2e-3, atol=2e-3)


def _chain_max(row: np.ndarray) -> np.generic:
    m = row[0]
    for v in row[1:]:
        m = v if v > m else m
    return m


@settings(max_examples=60, deadline=None)
@given(
    length=st.integers(1, 3 * cross_entropy.LANES + 5),
    specials=st.lists(
        st.tuples(st.integers(0, 100), st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0])),
        max_size=4,
    ),
    dtype=st.sampled_from([np.float32, np.float64]),
    seed=st.integers(0, 2**16),
)
def test_the_row_maximum_in_lanes_is_the_chains(length, specials, dtype, seed) -> None:
    """The maximum the kernels subtract, taken in ``LANES`` lanes, is the one-by-one chain's
    (``m = v if v > m else m``): a NaN first stays, later NaNs never win; equal up to a zero's
    sign, which ``x - m`` and ``exp`` do not see (the losses and gradients: the next test)."""
    row = np.random.default_rng(seed).standard_normal(length).astype(dtype)
    row[np.random.default_rng(seed).random(length) < 0.3] = -1.0  # ties below the zeros
    for at, value in specials:
        row[at % length] = value
    got, want = cross_entropy.row_max(row), _chain_max(row)
    assert (np.isnan(got) and np.isnan(want)) or got == want


def test_zero_maxima_of_either_sign_give_the_same_losses_and_gradients() -> None:
    """Rows whose maximum is a zero of either sign first (the chain keeps the first, the lanes
    may take the other): the same losses and gradients, bit for bit."""
    x = np.full((2, 40), -1.0, np.float32)
    x[0, 3], x[0, 30] = -0.0, 0.0
    x[1, 3], x[1, 30] = 0.0, -0.0
    t, g = np.array([3, 3]), np.ones(2)
    losses, _, _ = cross_entropy.row_losses(x, t, -1)
    gx, _ = cross_entropy.row_grads(x, t, -1, g)
    assert losses[0] == losses[1] and np.array_equal(gx[0].view(np.uint32), gx[1].view(np.uint32))
