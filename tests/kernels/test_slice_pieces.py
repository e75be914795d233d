"""kernels.fused_cpu.slice_pieces: ``place = piece + 0.0`` over strided views gives numpy's
``add(piece, 0.0, out=place)`` bit for bit (-0.0, NaN payloads included) on any thread count,
and leaves what it does not take to numpy."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualflow.background.process import using_threads
from dualflow.kernels.fused_cpu import slice_pieces

_SPECIAL = [-0.0, 0.0, np.inf, -np.inf, np.nan, 1e-45, -3.5]


def _values(rng: np.random.Generator, shape: tuple, dtype: str) -> np.ndarray:
    values = rng.standard_normal(shape).astype(dtype)
    mask = rng.random(shape) < 0.3
    values[mask] = rng.choice(np.array(_SPECIAL, dtype), size=int(mask.sum()))
    return values


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(1, 6), min_size=0, max_size=4).map(tuple),
    dtype=st.sampled_from(["float32", "float64"]),
    flip=st.booleans(),
    gap=st.booleans(),
    threads=st.integers(1, 3),
    seed=st.integers(0, 2**16),
)
def test_pieces_plus_zero_have_numpys_bits(shape, dtype, flip, gap, threads, seed) -> None:
    rng = np.random.default_rng(seed)
    piece = _values(rng, shape[::-1] if flip else shape, dtype)
    piece = piece.T if flip else piece  # a strided source, as attention's transposed heads
    wide = np.full((*shape[:-1], 2 * shape[-1]) if shape else (), np.nan, dtype)
    # a destination strided on its last axis, or unit-stride there as a slice of the result
    place = (wide[..., ::2] if gap else wide[..., : shape[-1]]) if shape else wide
    want = np.add(piece, 0.0)
    parts: list[int] = []
    run = slice_pieces.run_parts
    with using_threads(threads), pytest.MonkeyPatch.context() as patch:
        tiny = SimpleNamespace(part_min_for=lambda work: 1)  # every row count splits
        patch.setattr(slice_pieces, "machine_constants", lambda: tiny)
        patch.setattr(slice_pieces, "run_parts", lambda jobs: parts.append(len(jobs)) or run(jobs))
        assert slice_pieces.add_zero(place, piece)
    assert place.tobytes() == np.ascontiguousarray(want).tobytes()
    # ``parts_for`` splits in ``threads`` parts when each gets an element (``part_min`` of 1)
    splits = threads > 1 and piece.size >= threads and shape and shape[0] > 1
    assert parts == ([min(threads, shape[0])] if splits else [])


def test_what_the_kernel_does_not_take_is_left_untouched() -> None:
    five = np.ones((1, 2, 1, 2, 2), np.float32)
    out = np.zeros_like(five)
    assert not slice_pieces.add_zero(out, five)  # five axes: numpy's
    assert not slice_pieces.add_zero(np.zeros(3, np.int64), np.ones(3, np.int64))
    assert not slice_pieces.add_zero(np.zeros(3, np.float64), np.ones(3, np.float32))
    assert not slice_pieces.add_zero(np.zeros(2, np.float32), np.ones(3, np.float32))
    assert not slice_pieces.add_zero(np.zeros(0, np.float32), np.ones(0, np.float32))
    assert not out.any()


@pytest.mark.parametrize("length", [64, 37])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_attentions_pieces_take_the_contiguous_paths(length, dtype) -> None:
    # the query's gradient (N*heads, L, hd) and the key's, written transposed (N*heads, hd, L),
    # each viewed as (L, N, heads, hd) into its third of an (L, N, 3E) result: the runs and
    # the blocked transpose, with whole blocks and a remainder (37 = 2 * 16 + 5)
    rng = np.random.default_rng(length)
    n, heads, hd = 3, 2, length
    out = np.full((length, n, 3 * heads * hd), np.nan, dtype)
    query = _values(rng, (n, heads, length, hd), dtype).transpose(2, 0, 1, 3)
    key = _values(rng, (n, heads, hd, length), dtype).transpose(3, 0, 1, 2)
    for k, piece in enumerate((query, key, query)):
        place = out[..., k * heads * hd : (k + 1) * heads * hd].reshape(length, n, heads, hd)
        assert slice_pieces.add_zero(place, piece)
        assert place.tobytes() == np.add(piece, 0.0).tobytes()
