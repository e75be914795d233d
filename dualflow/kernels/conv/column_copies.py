"""numba kernels for the convolution's column copies on numpy arrays, image by image on both cores.

``conv_gemm`` copies each tap of a padded channels-last image into GEMM columns (im2col) and adds
the input gradient's columns back into an image (col2im). numpy does one strided pass per tap
over runs of C values (18 of a 27 ms forward at 32 channels, 32x32, batch 32); these loops make
one pass. Every element is added in numpy's order (taps row-major, from zero), so results are
bit-identical to the numpy path, and images are split over ``cpu_threads`` parts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from dualflow.kernels.base.cpu_threads import parts_for, run_parts, split
from dualflow.kernels.base.machine_constants import machine_constants

# Column bytes per part below which one thread copies them all: None takes the machine's
# (``machine_constants``: where a split copy's saved time repays the measured hand-off; the
# default 1 MiB was one machine's); an int here or in a module importing it (tests) overrides it
PART_MIN_BYTES: int | None = None
DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_KERNELS: dict[str, Any] = {}


def _columns(col, xpad, sh, sw, dh, dw):  # pragma: no cover - compiled by numba
    n, ho, wo, groups, kh, kw, cg = col.shape
    for b in range(n):
        for y in range(ho):
            for x in range(wo):
                for g in range(groups):
                    for i in range(kh):
                        r = y * sh + i * dh
                        for j in range(kw):
                            q = x * sw + j * dw
                            for c in range(cg):
                                col[b, y, x, g, i, j, c] = xpad[b, r, q, g, c]


def _gather_columns(image, col, sh, sw, dh, dw, ph, pw):  # pragma: no cover - numba
    # image (n, oh, ow, G, Cg), the crop of the padded image at (ph, pw); col (n, h, w, G, kh, kw,
    # Cg). Each pixel sums the taps that read it, in tap order from zero, as col2im's passes do.
    n, oh, ow, groups, cg = image.shape
    h, w, kh, kw = col.shape[1], col.shape[2], col.shape[4], col.shape[5]
    acc = np.empty(cg, image.dtype)
    for b in range(n):
        for r in range(oh):
            for q in range(ow):
                for g in range(groups):
                    acc[:] = 0
                    for i in range(kh):
                        top = r + ph - i * dh
                        y = top // sh
                        if top < 0 or top % sh != 0 or y >= h:
                            continue
                        for j in range(kw):
                            left = q + pw - j * dw
                            x = left // sw
                            if left < 0 or left % sw != 0 or x >= w:
                                continue
                            for c in range(cg):
                                acc[c] += col[b, y, x, g, i, j, c]
                    for c in range(cg):
                        image[b, r, q, g, c] = acc[c]


def numba_kernel(name: str, py_func: Callable) -> Any:
    """``py_func`` compiled by numba (nogil) on first use, its machine code in the signed
    kernels store under ``k_<name>``.

    Example:
        >>> def _twice(a):
        ...     return 2 * a
        >>> numba_kernel("doc_twice", _twice)(3)
        6
    """
    kernel = _KERNELS.get(name)
    if kernel is None:
        from dualflow.kernels.base import numba_cache  # noqa: PLC0415 - numba, when a conv runs

        kernel = _KERNELS[name] = numba_cache.cached_njit(py_func, f"k_{name}")
    return kernel


def available(*arrays: Any) -> bool:
    """Whether these kernels take the arrays: numpy float32/float64, one dtype, numba importable.

    Example:
        >>> available(np.zeros(2, np.float32)), available(np.zeros(2, np.int64))
        (True, False)
    """
    dtypes = {getattr(a, "dtype", None) for a in arrays}
    if not all(isinstance(a, np.ndarray) for a in arrays) or len(dtypes) != 1:
        return False
    if dtypes.pop() not in DTYPES:
        return False
    try:
        import numba  # noqa: F401, PLC0415
    except ImportError:  # pragma: no cover - numba is a core dependency
        return False
    return True


def part_bytes(override: int | None) -> int:
    """Bytes per part from which a copy is split: ``override`` (a module's ``PART_MIN_BYTES``),
    else the machine's.

    Example:
        >>> part_bytes(8), part_bytes(None) >= 1
        (8, True)
    """
    return override or machine_constants().part_min_bytes


def by_images(fn: Callable, out: Any, ins: tuple, args: tuple) -> None:
    """``fn(out[part], *(a[part] for a in ins), *args)`` over contiguous parts of the images
    (axis 0), at once when they are big enough to pay for the hand-off.

    Example:
        >>> out = np.zeros(4)
        >>> by_images(np.copyto, out, (np.arange(4.0),), ())
        >>> out.tolist()
        [0.0, 1.0, 2.0, 3.0]
    """
    parts = split(out.shape[0], parts_for(out.nbytes, part_bytes(PART_MIN_BYTES)))
    run_parts([functools.partial(fn, out[a:b], *(x[a:b] for x in ins), *args) for a, b in parts])


def columns(xpad: Any, ksize: tuple, stride: tuple, dilation: tuple, out_hw: tuple) -> Any:
    """im2col of a channels-last ``xpad`` (N, Hp, Wp, G, Cg): (N, Ho, Wo, G, kh, kw, Cg).

    Example:
        >>> xpad = np.arange(9.0).reshape(1, 3, 3, 1, 1)
        >>> columns(xpad, (2, 2), (1, 1), (1, 1), (2, 2))[0, 1, 1, 0, :, :, 0]
        array([[4., 5.],
               [7., 8.]])
    """
    n, _, _, groups, cg = xpad.shape
    col = np.empty((n, *out_hw, groups, *ksize, cg), dtype=xpad.dtype)
    by_images(numba_kernel("columns", _columns), col, (xpad,), (*stride, *dilation))
    return col


def add_columns(
    col: Any, stride: tuple, dilation: tuple, pad: tuple, out_hw: tuple, out: Any = None
) -> Any:
    """col2im: the columns ``col`` (N, H, W, G, kh, kw, Cg) added back into a channels-last image
    (N, oh, ow, G, Cg), cropped by ``pad`` (the padded border is never written); into ``out``
    (a C-contiguous array of that shape) when given.

    Example:
        >>> col = np.ones((1, 2, 2, 1, 2, 2, 1))
        >>> add_columns(col, (1, 1), (1, 1), (0, 0), (3, 3))[0, :, :, 0, 0]
        array([[1., 2., 1.],
               [2., 4., 2.],
               [1., 2., 1.]])
    """
    n, _, _, groups, _, _, cg = col.shape
    image = np.empty((n, *out_hw, groups, cg), dtype=col.dtype) if out is None else out
    kernel = numba_kernel("gather_columns", _gather_columns)
    by_images(kernel, image, (col,), (*stride, *dilation, *pad))
    return image
