"""What the LSTM and GRU forward-cell tests share: the sizes hypothesis draws, and float32
inputs scaled so that the gates reach saturation at the larger scales."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st


def cell_cases(test: Callable[..., None]) -> Callable[..., None]:
    """``test`` over drawn steps, batch rows, hidden units (not a multiple of the 16-wide tiles),
    input scale and seed: 40 examples, no deadline (the first compiles the kernels)."""
    drawn = given(
        steps=st.integers(1, 6),
        n=st.integers(1, 20),
        hidden=st.integers(1, 40),
        scale=st.sampled_from([0.1, 1.0, 4.0, 30.0]),
        seed=st.integers(0, 2**16),
    )(test)
    return settings(max_examples=40, deadline=None)(drawn)


def scaled_inputs(seed: int, shapes: list, hidden: int, scale: float, weight: int) -> list:
    """Standard normal float32 arrays of ``shapes``: the first times ``scale`` (the projected
    input), the one at index ``weight`` times ``scale / sqrt(hidden + 1)`` (the recurrent
    weight), the rest as drawn."""
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    arrays[0] = arrays[0] * np.float32(scale)
    arrays[weight] = arrays[weight] * np.float32(scale / np.sqrt(hidden + 1))
    return arrays
