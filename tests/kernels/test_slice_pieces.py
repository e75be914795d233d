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
    threads=st.integers(1, 3),
    seed=st.integers(0, 2**16),
)
def test_pieces_plus_zero_have_numpys_bits(shape, dtype, flip, threads, seed) -> None:
    rng = np.random.default_rng(seed)
    piece = _values(rng, shape[::-1] if flip else shape, dtype)
    piece = piece.T if flip else piece  # a strided source, as attention's transposed heads
    wide = np.full((*shape[:-1], 2 * shape[-1]) if shape else (), np.nan, dtype)
    place = wide[..., ::2] if shape else wide  # a strided destination, as a slice of the result
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
