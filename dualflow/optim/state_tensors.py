"""New optimizer state tensors (moment buffers, step counts) on a parameter's device.

They are created with ``Tensor()``, which a tracer records as state born inside the call: the
first compiled step using them is traced once more, with the state then captured.
"""

from __future__ import annotations

import numpy as np

from dualflow.device import get_array_module
from dualflow.tensor.core import Tensor


def zeros_like(p: Tensor) -> Tensor:
    """A new zero state tensor with ``p``'s shape, dtype and device.

    Example:
        >>> import numpy as np
        >>> from dualflow.nn import Parameter
        >>> zeros_like(Parameter(np.ones(2, np.float32))).array
        array([0., 0.], dtype=float32)
    """
    return Tensor(get_array_module(p.raw_array).zeros_like(p.raw_array))


def step_counter(p: Tensor) -> Tensor:
    """A new 0-d float64 step count on ``p``'s device (exact up to 2**53 steps).

    Example:
        >>> import numpy as np
        >>> from dualflow.nn import Parameter
        >>> step_counter(Parameter(np.ones(2, np.float32))).array
        array(0.)
    """
    return Tensor(get_array_module(p.raw_array).zeros((), dtype=np.float64))
