"""Sliding-window helpers shared by conv and pooling: output sizes, tap offsets, padding.

Pure helpers over ``xp`` (numpy or cupy) and shape tuples (the ops' argument checks are in
``ops/geometry.py``; the convolution columns are built in ``conv_gemm.py``). Every loop over a
window runs over kernel offsets (``kh * kw`` strided slices), never over output pixels, so the
work stays in the array module.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

Pair = tuple[int, int]


def out_size(size: int, k: int, s: int, p: int, d: int = 1) -> int:
    """Output length of a window of ``k`` taps (dilation ``d``) slid with stride ``s``, pad ``p``.

    Example:
        >>> out_size(32, 3, 1, 1), out_size(5, 3, 2, 0), out_size(7, 3, 1, 0, 2)
        (32, 2, 3)
    """
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def offsets(
    ksize: Pair, stride: Pair, dilation: Pair, out_hw: Pair
) -> Iterator[tuple[int, int, tuple[slice, slice]]]:
    """For each kernel tap ``(i, j)``: the strided (rows, cols) slices of the padded input it reads.

    Example:
        >>> [s for _, _, s in offsets((1, 2), (2, 2), (1, 1), (2, 1))]
        [(slice(0, 3, 2), slice(0, 1, 2)), (slice(0, 3, 2), slice(1, 2, 2))]
    """
    (sh, sw), (dh, dw), (ho, wo) = stride, dilation, out_hw
    for i in range(ksize[0]):
        rows = slice(i * dh, i * dh + sh * (ho - 1) + 1, sh)
        for j in range(ksize[1]):
            yield i, j, (rows, slice(j * dw, j * dw + sw * (wo - 1) + 1, sw))


def pad_hw(xp: Any, x: Any, pad: Pair, value: float = 0.0) -> Any:
    """Pad the last two axes of ``x`` by ``pad`` on both sides with ``value`` (no copy if 0).

    Example:
        >>> import numpy as np
        >>> pad_hw(np, np.ones((1, 1, 1, 1)), (1, 0)).shape
        (1, 1, 3, 1)
    """
    if pad == (0, 0):
        return x
    (ph, pw) = pad
    return xp.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=value)
