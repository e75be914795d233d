"""kernels.linalg.gemm's split of a batch of small products over the kernel threads: the same
bits as numpy's one call on any thread count, layout and ``out=``, and only where it applies."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualflow import nn
from dualflow.background.process import using_threads
from dualflow.kernels.linalg import gemm
from tests.kernels.sgd_steps import assert_compiled_equals_eager


def _operand(rng: np.random.Generator, shape: tuple, layout: str, dtype: str) -> np.ndarray:
    # C-ordered, last two axes swapped, every other row, or a head's slice of a packed array
    if layout == "transposed":
        return np.swapaxes(rng.normal(size=(*shape[:-2], shape[-1], shape[-2])), -1, -2).astype(
            dtype
        )
    if layout == "strided":
        return rng.normal(size=(*shape[:-2], 2 * shape[-2], shape[-1])).astype(dtype)[..., ::2, :]
    if layout == "packed":  # attention's q of a (L, N*H, 3*hd) projection, batch axis first
        packed = rng.normal(size=(shape[-2], shape[0], 3 * shape[-1])).astype(dtype)
        return packed[:, :, : shape[-1]].transpose(1, 0, 2) if len(shape) == 3 else packed
    return rng.normal(size=shape).astype(dtype)


@settings(max_examples=60, deadline=None)
@given(
    batch=st.integers(2, 9),
    m=st.integers(1, 7),
    k=st.integers(1, 7),
    n=st.integers(1, 7),
    layouts=st.tuples(*[st.sampled_from(["c", "transposed", "strided", "packed"])] * 2),
    dtype=st.sampled_from(["float32", "float64"]),
    threads=st.integers(1, 3),
    seed=st.integers(0, 2**16),
)
def test_a_split_batch_has_numpys_bits(batch, m, k, n, layouts, dtype, threads, seed) -> None:
    rng = np.random.default_rng(seed)
    a = _operand(rng, (batch, m, k), layouts[0], dtype)
    b = _operand(rng, (batch, k, n), layouts[1], dtype)
    want = np.matmul(a, b)
    with using_threads(threads), pytest.MonkeyPatch.context() as patch:
        patch.setattr(gemm, "PART_FLOPS", 1)  # split whatever the size
        assert gemm.batch_parts(np, a, b) == min(batch, threads)
        got = gemm.matmul(np, a, b)
        out = np.full(want.shape, np.nan, dtype)
        assert gemm.matmul(np, a, b, out=out) is out
    assert got.dtype == want.dtype and got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(out, want)


def test_only_a_same_dtype_batch_of_small_products_on_numpy_splits() -> None:
    a = np.zeros((64, 64, 64), np.float32)
    with using_threads(2):
        assert gemm.batch_parts(np, a, a) == 2  # attention's 64 x (64 x 64 x 64)
        assert gemm.batch_parts(np, a[:1], a[:1]) == 1  # one matrix
        assert gemm.batch_parts(np, a[:2], a[:2]) == 1  # below PART_FLOPS a part
        assert gemm.batch_parts(np, a, a.astype(np.float64)) == 1
        assert gemm.batch_parts(np, a.astype(np.int64), a.astype(np.int64)) == 1
        assert gemm.batch_parts(np, a, a[:1]) == 1  # a broadcast batch: numpy's own call
        big = np.zeros((4, 128, 128), np.float32)  # 2 M multiply-adds each: BLAS threads them
        assert gemm.batch_parts(np, big, big) == 1
        assert gemm.batch_parts(np, a, a, out=np.zeros((64, 64, 128), np.float32)[..., ::2]) == 1
        assert gemm.batch_parts(object(), a, a) == 1  # cupy: its own batched kernels
    with using_threads(1):
        assert gemm.batch_parts(np, a, a) == 1


class _Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(32, 4, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]


def test_an_attention_training_step_compiled_equals_eager_with_its_batches_split(
    monkeypatch,
) -> None:
    monkeypatch.setattr(gemm, "PART_FLOPS", 1)
    with using_threads(2):
        assert_compiled_equals_eager(_Attention, (3, 6, 32), ["O0", "O2"])
