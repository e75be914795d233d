"""The recurrent cells' shared numba pieces: the gate activations in the ops' float32 bits, and
the compile of a cell kernel that inlines them (``lstm_forward``, ``gru_forward`` and the
lockstep recurrences of ``lstm_lockstep``).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numba
import numpy as np

from dualflow.kernels.fast_math.fast_tanh import FINGERPRINT, tanh_f32
from dualflow.kernels.fast_math.scalars import fingerprint
from dualflow.kernels.linalg import tiles

_KERNELS: dict[tuple, Any] = {}
HALF = np.float32(0.5)
"""sigmoid's constant, float32: ``0.5 * tanh(0.5 * x) + 0.5`` rounds as the ``sigmoid`` op."""


@numba.njit(inline="always")
def activate_sigmoid(a):
    """The ``sigmoid`` op's float32 bits, in place on a 1-D contiguous array (inlined by the
    cell kernels; one array, so the loop vectorizes without alias checks).

    Example:
        >>> a = np.array([0.0, 100.0], np.float32)
        >>> activate_sigmoid(a)
        >>> a.tolist()
        [0.5, 1.0]
    """
    for m in range(a.shape[0]):
        a[m] = HALF * tanh_f32(HALF * a[m]) + HALF


@numba.njit(inline="always")
def activate_tanh(a):
    """The ``tanh`` op's float32 bits (``tanh_f32``), in place on a 1-D contiguous array.

    Example:
        >>> a = np.array([0.0, -100.0], np.float32)
        >>> activate_tanh(a)
        >>> a.tolist()
        [0.0, -1.0]
    """
    for m in range(a.shape[0]):
        a[m] = tanh_f32(a[m])


# the activations, the tiles and HALF, which every cell inlines (fixed for the process)
_HELPERS = "".join(fingerprint(f) for f in (activate_sigmoid, activate_tanh))
_HELPERS += f"{tiles.FINGERPRINT}{HALF!r}"


def cell_kernel(cell: Any, name: str, inlined: str = "") -> Any:
    """``cell`` (a recurrent cell step inlining the activations and the tiles) compiled through
    the kernels cache, once a process; the stem names the fast tanh and every inlined helper,
    since the cache key hashes ``cell``'s own bytecode only (a change to any of them is a new
    kernel): ``inlined`` is a digest of any other helper the cell inlines. Shared by the LSTM
    and GRU cells.

    Example:
        >>> def _halve(a):
        ...     activate_sigmoid(a)
        >>> x = np.zeros(2, np.float32)
        >>> cell_kernel(_halve, "doc_sigmoid")(x)
        >>> x.tolist(), cell_kernel(_halve, "doc_sigmoid") is cell_kernel(_halve, "doc_sigmoid")
        ([0.5, 0.5], True)
    """
    kernel = _KERNELS.get((cell, name, inlined))  # every recurrence call: no digest per call
    if kernel is not None:
        return kernel
    from dualflow.kernels.base import numba_cache  # noqa: PLC0415 - numba, when first used

    def build() -> tuple[Any, str]:
        digest = hashlib.sha256(f"{_HELPERS}{inlined}".encode()).hexdigest()[:16]
        jitted = numba.njit(nogil=True, cache=False, error_model="numpy")(cell)
        return jitted, f"k_{name}_{FINGERPRINT}_{digest}"

    return numba_cache.built_once(_KERNELS, (cell, name, inlined), build)
