"""The GradScaler scenario replayed with torch and dualflow: SGD with momentum on a linear loss
whose coefficients hold inf or NaN at some steps (those steps must be skipped and back the scale
off), with a short growth interval so the scale also grows."""

from __future__ import annotations

import numpy as np

STEPS = 14
BAD = {2: np.inf, 3: np.nan, 9: -np.inf}  # step -> the value injected into the coefficients
SETTINGS = {"init_scale": 8.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 3}
START = np.array([1.0, -2.0, 3.0], np.float32)


def coefficients(step: int) -> np.ndarray:
    c = np.array([0.5 + step, -1.0, 0.25 * step], np.float32)
    if step in BAD:
        c[1] = BAD[step]
    return c
