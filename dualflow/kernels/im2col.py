"""Sliding-window kernels shared by conv and pooling: output sizes, tap offsets, im2col/col2im.

Pure helpers over ``xp`` (numpy or cupy) and shape tuples (the ops' argument checks are in
``ops/geometry.py``). Every loop runs over kernel offsets
(``kh * kw`` strided slice copies or adds), never over output pixels, so the work stays in numpy.
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


def im2col(xp: Any, x: Any, ksize: Pair, stride: Pair, pad: Pair, dilation: Pair) -> Any:
    """Copy the windows of ``x`` (N, C, H, W) into columns of shape (N, C, kh, kw, Ho, Wo).

    Example:
        >>> import numpy as np
        >>> x = np.arange(9.0).reshape(1, 1, 3, 3)
        >>> im2col(np, x, (2, 2), (1, 1), (0, 0), (1, 1))[0, 0, 1, 1]
        array([[4., 5.],
               [7., 8.]])
    """
    n, c, h, w = x.shape
    ho = out_size(h, ksize[0], stride[0], pad[0], dilation[0])
    wo = out_size(w, ksize[1], stride[1], pad[1], dilation[1])
    padded = pad_hw(xp, x, pad)
    col = xp.empty((n, c, ksize[0], ksize[1], ho, wo), dtype=x.dtype)
    # One strided slice copy per tap is several times faster than reshaping an as_strided view.
    for i, j, (rows, cols) in offsets(ksize, stride, dilation, (ho, wo)):
        col[:, :, i, j] = padded[:, :, rows, cols]
    return col


def col2im(xp: Any, col: Any, out_hw: Pair, stride: Pair, pad: Pair, dilation: Pair) -> Any:
    """Sum columns (N, C, kh, kw, Ho, Wo) back into an image (N, C, H, W): im2col's adjoint.

    Example:
        >>> import numpy as np
        >>> col2im(np, np.ones((1, 1, 2, 2, 2, 2)), (3, 3), (1, 1), (0, 0), (1, 1))[0, 0]
        array([[1., 2., 1.],
               [2., 4., 2.],
               [1., 2., 1.]])
    """
    n, c, kh, kw, ho, wo = col.shape
    (h, w), (ph, pw) = out_hw, pad
    image = xp.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=col.dtype)
    for i, j, (rows, cols) in offsets((kh, kw), stride, dilation, (ho, wo)):
        image[:, :, rows, cols] += col[:, :, i, j]
    if pad == (0, 0):
        return image
    # A contiguous copy rather than a view, so the padded border's memory is not kept alive.
    return xp.ascontiguousarray(image[:, :, ph : ph + h, pw : pw + w])
