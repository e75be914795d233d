"""kernels.linalg.batched_native: a batch of small float32 products split over the native crew
gives numpy's bits on any layout numpy passes to BLAS as it is, and refuses every case numpy
treats otherwise (vectors, copied operands, syrk, a non-C output, other dtypes)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualflow.background.process import using_threads
from dualflow.background.workers import IN_WORKER
from dualflow.kernels.base import native_crew
from dualflow.kernels.linalg import batched_native, gemm
from dualflow.kernels.linalg.cblas import NO_TRANS, TRANS, sgemm
from tests.kernels.sgd_steps import assert_compiled_equals_eager
from tests.kernels.test_gemm_batches import _Attention, _operand

pytestmark = pytest.mark.skipif(
    native_crew.crew() is None or sgemm() is None, reason="no native crew or no cblas_sgemm"
)


@pytest.fixture
def forced(monkeypatch: pytest.MonkeyPatch) -> list:
    """Every batch ``plan`` accepts splits, lingering workers or not; the splits, counted."""
    monkeypatch.setattr(batched_native, "_pays", lambda crew, model, flops: True)
    monkeypatch.setattr(batched_native, "_too_small", lambda flops: False)
    calls: list[int] = []
    split = batched_native._split_held
    monkeypatch.setattr(batched_native, "_split_held", lambda *a: calls.append(1) or split(*a))
    return calls


@settings(max_examples=60, deadline=None)
@given(
    batch=st.integers(2, 9),
    sizes=st.tuples(*[st.integers(1, 40)] * 3),
    layouts=st.tuples(*[st.sampled_from(["c", "transposed", "strided", "packed"])] * 2),
    threads=st.integers(2, 3),
    seed=st.integers(0, 2**16),
)
def test_a_native_split_batch_has_numpys_bits(batch, sizes, layouts, threads, seed) -> None:
    m, k, n = sizes
    rng = np.random.default_rng(seed)
    a = _operand(rng, (batch, m, k), layouts[0], "float32")
    b = _operand(rng, (batch, k, n), layouts[1], "float32")
    want = np.matmul(a, b)
    with using_threads(threads), pytest.MonkeyPatch.context() as patch:
        patch.setattr(batched_native, "_pays", lambda crew, model, flops: True)
        patch.setattr(batched_native, "_too_small", lambda flops: False)
        accepted = batched_native.plan(a, b, np.empty(want.shape, np.float32)) is not None
        got = gemm.matmul(np, a, b)
        out = np.full(want.shape, np.nan, np.float32)
        assert gemm.matmul(np, a, b, out=out) is out
        native = batched_native.matmul(a, b)
    assert accepted == (min(m, k, n) >= 2)  # every layout here is blasable, no syrk
    assert (native is not None) == accepted
    for result in (got, out) + ((native,) if accepted else ()):
        assert result.dtype == np.float32 and result.flags.c_contiguous
        np.testing.assert_array_equal(result, want)


def test_the_plan_passes_numpys_transposes_and_leading_dimensions() -> None:
    a = np.zeros((3, 4, 6), np.float32)
    b = np.zeros((3, 5, 6), np.float32).transpose(0, 2, 1)  # k.T of attention's scores
    block = batched_native.plan(a, b, np.empty((3, 4, 5), np.float32))
    assert block[batched_native.TRANS_A] == NO_TRANS and block[batched_native.LDA] == 6
    assert block[batched_native.TRANS_B] == TRANS and block[batched_native.LDB] == 6
    strided = np.zeros((3, 8, 6), np.float32)[:, ::2]  # every other row: lda 12
    block = batched_native.plan(strided, b, np.empty((3, 4, 5), np.float32))
    assert block[batched_native.LDA] == 12 and block[batched_native.HI] == 3


def test_cases_numpy_runs_otherwise_are_refused() -> None:
    a, out = np.ones((4, 5, 5), np.float32), np.empty((4, 5, 5), np.float32)
    plan = batched_native.plan
    assert plan(a, a, out) is not None
    assert plan(a.astype(np.float64), a.astype(np.float64), out.astype(np.float64)) is None
    assert plan(a[:, :1], a, out[:, :1]) is None  # a row vector: numpy's gemv
    assert plan(a, a[:, :, :1], out[:, :, :1]) is None  # a column: gemv
    assert plan(a[:, :, ::-1], a, out) is None  # negative strides: numpy copies
    assert plan(a[:, :, ::2], a[:, :3], out[:, :, :3]) is None  # no unit stride: copied
    assert plan(a, a, np.empty((4, 5, 10), np.float32)[:, :, ::2]) is None  # out not C
    assert plan(a[None], a[None], out[None]) is None  # two batch axes
    assert plan(a[:1], a[:1], out[:1]) is None  # one matrix: BLAS's own threads
    assert plan(a, a.transpose(0, 2, 1), out) is None  # a matrix times its transpose: syrk
    b = a.copy()
    assert plan(a, b, a) is None and plan(a, b, b) is None  # out is an operand: numpy copies
    frozen = np.empty((4, 5, 5), np.float32)
    frozen.flags.writeable = False
    assert plan(a, b, frozen) is None  # numpy raises: so does the call
    raw = np.zeros(4 * 5 * 5 * 4 + 1, np.uint8)[1:].view(np.float32).reshape(4, 5, 5)
    assert not raw.flags.aligned and plan(raw, b, out) is None  # numpy copies it first


def test_a_matrix_meeting_its_own_transpose_anywhere_in_the_batch_is_refused() -> None:
    # a's matrices every other one of x's, b's consecutive: matrix 0 of each starts at x[0]
    x = np.random.default_rng(0).normal(size=(8, 5, 5)).astype(np.float32)
    a, b = x[::2], x[:4].transpose(0, 2, 1)
    out = np.empty((4, 5, 5), np.float32)
    assert batched_native.plan(a, b, out) is None
    assert batched_native.plan(x[1::2], b, out) is not None  # never the same start
    np.testing.assert_array_equal(gemm.matmul(np, a, b), np.matmul(a, b))


def test_a_busy_crew_or_a_workers_call_runs_the_batch_alone(forced: list) -> None:
    a = np.ones((4, 8, 8), np.float32)
    crew = native_crew.crew()
    with crew.lock:  # another thread's call holds the threads
        result = [None]
        thread = threading.Thread(target=lambda: result.__setitem__(0, batched_native.matmul(a, a)))
        thread.start()
        thread.join()
    assert result[0] is None
    IN_WORKER.active = True
    try:
        assert batched_native.matmul(a, a) is None
    finally:
        IN_WORKER.active = False
    assert not forced
    np.testing.assert_array_equal(batched_native.matmul(a, a), np.matmul(a, a))
    assert forced


def test_the_split_model_is_measured_once_per_crew() -> None:
    crew = native_crew.crew()
    model = batched_native.split_model(crew)
    assert model is not None and len(model) == 3
    awake, asleep, per_flop = model
    assert awake >= 0.0 and asleep >= 0.0 and 0.0 < per_flop < 1e-6
    assert batched_native.split_model(crew) is model


def test_an_attention_step_split_over_the_native_crew_compiled_equals_eager(
    forced: list,
) -> None:
    with using_threads(2):
        assert_compiled_equals_eager(_Attention, (3, 6, 32), ["O0", "O2"])
    assert forced  # attention's products went over the crew


def test_a_batch_too_small_to_repay_a_hand_off_is_refused_before_the_crew_is_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a = np.ones((4, 8, 8), np.float32)
    monkeypatch.setattr(batched_native, "_NEVER_PAYS", [2 * a.size * 8 + 1])
    monkeypatch.setattr(native_crew, "crew", lambda: pytest.fail("the crew was asked"))
    assert batched_native.matmul(a, a) is None
    np.testing.assert_array_equal(gemm.matmul(np, a, a), np.matmul(a, a))
