"""cuDNN paths of convolution, pooling and batch norm on cupy arrays, through cupy's ``cupy.cudnn``.

An op's forward calls in here only with cupy arrays, and only when ``usable`` says cuDNN can run
the case (library loaded, floating dtypes equal, 2-D geometry); a wrapper returns None when cuDNN
refuses the case at run time, and the op then runs its ``xp`` (im2col) code. CuPy 14 removed its
cuDNN bindings, so there every check is False and the ``xp`` code runs.
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from typing import Any

import numpy as np

from dualflow._config import env_flag
from dualflow.kernels.base.windows import Pair, out_size

# Tests (and users chasing a discrepancy) switch cuDNN off to force the xp path.
ENABLED = env_flag("DUALFLOW_CUDNN", default=True)
# cuDNN's default math lets float32 convolutions run as TF32 on compute capability ≥ 8.0 (10-bit
# mantissas, ~1e-3 relative error), and cupy's API cannot ask for its FMA-only math. So float32
# convolutions there use cuDNN only if TF32 is off for the process (NVIDIA_TF32_OVERRIDE=0) or
# accepted here (DUALFLOW_CUDNN_TF32=1); float16/float64 and pooling/batch norm are unaffected.
ALLOW_TF32 = env_flag("DUALFLOW_CUDNN_TF32")
CALLS: Counter = Counter()  # cuDNN calls per op name: tests check which path ran
REFUSED: Counter = Counter()  # calls cuDNN rejected at run time (the xp path ran instead)
_FLOATS = ("float16", "float32", "float64")
_LIBRARIES: list[Any] = []  # [(cupy.cudnn, cupy.cuda.cudnn, cupy)] or [None], found once
_TF32_DEVICES: dict[int, bool] = {}


def _libraries() -> Any:
    if not _LIBRARIES:
        try:
            import cupy  # noqa: PLC0415 - optional, only with cupy arrays
            from cupy import cudnn as api  # noqa: PLC0415 - absent in CuPy ≥ 14
            from cupy.cuda import cudnn as lib  # noqa: PLC0415

            lib.getVersion()  # raises when libcudnn cannot be loaded
            _LIBRARIES.append((api, lib, cupy))
        except Exception:  # ImportError, or a CUDA/cuDNN load error: no cuDNN here
            _LIBRARIES.append(None)
    return _LIBRARIES[0]


def available() -> bool:
    """Whether cupy's cuDNN bindings load in this process (checked once).

    Example:
        >>> isinstance(available(), bool)
        True
    """
    return _libraries() is not None


def usable(*arrays: Any) -> bool:
    """Whether cuDNN may run an op on ``arrays``: enabled, loadable, all cupy arrays of one
    float16/32/64 dtype.

    Example:
        >>> usable(np.zeros((1, 1, 2, 2), np.float32))
        False
    """
    if not ENABLED or isinstance(arrays[0], np.ndarray):
        return False
    dtype = getattr(arrays[0], "dtype", None)
    if dtype is None or dtype.name not in _FLOATS:
        return False
    libraries = _libraries()
    if libraries is None:
        return False
    ndarray = libraries[2].ndarray
    return all(isinstance(a, ndarray) and a.dtype == dtype for a in arrays)


def conv_usable(*arrays: Any) -> bool:
    """``usable``, and for float32 no TF32 rounding (see ``ALLOW_TF32``).

    Example:
        >>> conv_usable(np.zeros((1, 1, 2, 2)), np.zeros((1, 1, 1, 1)))
        False
    """
    if not usable(*arrays):
        return False
    if arrays[0].dtype != np.float32 or ALLOW_TF32:
        return True
    return os.environ.get("NVIDIA_TF32_OVERRIDE") == "0" or not _tf32_device()


def _tf32_device() -> bool:
    cupy = _libraries()[2]
    device = cupy.cuda.Device()
    if device.id not in _TF32_DEVICES:
        _TF32_DEVICES[device.id] = int(device.compute_capability) >= 80
    return _TF32_DEVICES[device.id]


def _geometry(stride: Any, pad: Any, dilation: Any = (1, 1)) -> tuple[Pair, Pair, Pair]:
    # cupy's Cython signatures take exact tuples of ints (attrs of a loaded graph may be lists)
    return tuple(map(int, stride)), tuple(map(int, pad)), tuple(map(int, dilation))


def _tensor_core(dtype: np.dtype) -> str:
    # float16 products are exact on tensor cores (float32 accumulation): no precision lost
    # against the xp path; for float32 they would mean TF32, for float64 they do not exist.
    return "auto" if dtype == np.float16 else "never"


def _run(op: str, call: Any) -> Any:
    """Run one cuDNN call; None when cuDNN refuses the case (no algorithm fits the workspace,
    an unsupported parameter), counted in ``REFUSED`` and warned about once per op."""
    try:
        result = call()
    except RuntimeError as exc:  # cupy's CuDNNError and "no algorithm" errors are RuntimeErrors
        REFUSED[op] += 1
        if REFUSED[op] == 1:
            warnings.warn(
                f"{op}: cuDNN refused the case ({exc}); running the xp (im2col) path instead",
                RuntimeWarning,
                stacklevel=3,
            )
        return None
    CALLS[op] += 1
    return result


def conv2d(x: Any, w: Any, stride: Pair, pad: Pair, dilation: Pair, groups: int) -> Any:
    """conv2d's forward with cudnnConvolutionForward, or None when cuDNN refuses the case."""
    api, _, cupy = _libraries()
    stride, pad, dilation = _geometry(stride, pad, dilation)
    hw = tuple(
        out_size(x.shape[2 + k], w.shape[2 + k], stride[k], pad[k], dilation[k]) for k in range(2)
    )
    y = cupy.empty((x.shape[0], w.shape[0]) + hw, dtype=x.dtype)

    def call() -> Any:
        core = _tensor_core(x.dtype)
        api.convolution_forward(
            x, w, None, y, pad, stride, dilation, int(groups), auto_tune=False, tensor_core=core
        )
        return y

    return _run("conv2d", call)


def conv_transpose2d(x: Any, w: Any, attrs: dict[str, Any], out_hw: Pair) -> Any:
    """conv_transpose2d (conv2d's data gradient) with cudnnConvolutionBackwardData, run with a
    deterministic algorithm; None when cuDNN refuses the case."""
    api, _, cupy = _libraries()
    stride, pad, dilation = _geometry(attrs["stride"], attrs["pad"], attrs["dilation"])
    groups = int(attrs["groups"])
    y = cupy.empty((x.shape[0], w.shape[1] * groups) + tuple(out_hw), dtype=x.dtype)

    def call() -> Any:
        core = _tensor_core(x.dtype)
        api.convolution_backward_data(
            w,
            x,
            None,
            y,
            pad,
            stride,
            dilation,
            groups,
            deterministic=True,
            auto_tune=False,
            tensor_core=core,
        )
        return y

    return _run("conv_transpose2d", call)


def conv2d_grad_weight(x: Any, gy: Any, attrs: dict[str, Any]) -> Any:
    """conv2d_grad_weight with cudnnConvolutionBackwardFilter, run with a deterministic
    algorithm (no atomics: repeated runs agree); None when cuDNN refuses the case."""
    api, _, cupy = _libraries()
    stride, pad, dilation = _geometry(attrs["stride"], attrs["pad"], attrs["dilation"])
    groups = int(attrs["groups"])
    shape = (gy.shape[1], x.shape[1] // groups) + tuple(attrs["ksize"])
    gw = cupy.empty(shape, dtype=x.dtype)

    def call() -> Any:
        core = _tensor_core(x.dtype)
        api.convolution_backward_filter(
            x,
            gy,
            gw,
            pad,
            stride,
            dilation,
            groups,
            deterministic=True,
            auto_tune=False,
            tensor_core=core,
        )
        return gw

    return _run("conv2d_grad_weight", call)


def pool2d(x: Any, mode: str, ksize: Pair, stride: Pair, pad: Pair) -> Any:
    """max (``mode="max"``) or average pooling forward with cudnnPoolingForward; None when
    cuDNN refuses. Average counts padding in the divisor, as avg_pool2d does. cupy sets cuDNN's
    NaN option to not propagate, so a max window holding NaN may give a number where the xp
    path gives NaN (NaN/Inf debug checks still fire at the op that made the NaN)."""
    api, lib, cupy = _libraries()
    stride, pad, _ = _geometry(stride, pad)
    ksize = tuple(map(int, ksize))
    hw = tuple(out_size(x.shape[2 + k], ksize[k], stride[k], pad[k]) for k in range(2))
    y = cupy.empty(tuple(x.shape[:2]) + hw, dtype=x.dtype)
    code = _pool_mode(lib, mode)

    def call() -> Any:
        return api.pooling_forward(x, y, ksize, stride, pad, code)

    return _run(f"{mode}_pool2d", call)


def avg_pool2d_grad(gy: Any, shape: Pair, ksize: Pair, stride: Pair, pad: Pair) -> Any:
    """avg_pool2d's gradient with cudnnPoolingBackward; None when cuDNN refuses.

    Average pooling's backward reads neither x nor y, so x is an uninitialized buffer of the
    right shape and gy stands in for y (same shape)."""
    api, lib, cupy = _libraries()
    stride, pad, _ = _geometry(stride, pad)
    ksize = tuple(map(int, ksize))
    x = cupy.empty(tuple(gy.shape[:2]) + tuple(shape), dtype=gy.dtype)
    code = _pool_mode(lib, "avg")

    def call() -> Any:
        return api.pooling_backward(x, gy, gy, ksize, stride, pad, code)

    return _run("avg_pool2d_grad", call)


def _pool_mode(lib: Any, mode: str) -> int:
    if mode == "avg":
        return lib.CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
    return getattr(lib, "CUDNN_POOLING_MAX_DETERMINISTIC", lib.CUDNN_POOLING_MAX)


def batch_norm_usable(x: Any, gamma: Any, beta: Any, eps: float) -> bool:
    """Whether cuDNN's training batch norm can run: ``usable``, x (N, C) or (N, C, H, W), and
    ``eps`` at least cuDNN's minimum.

    Example:
        >>> batch_norm_usable(np.zeros((2, 3)), np.ones(3), np.zeros(3), 1e-5)
        False
    """
    if not usable(x, gamma, beta) or x.ndim not in (2, 4):
        return False
    return eps >= getattr(_libraries()[1], "CUDNN_BN_MIN_EPSILON", 1e-5)


def batch_norm(x: Any, gamma: Any, beta: Any, eps: float) -> tuple[Any, Any, Any] | None:
    """Training batch norm with cudnnBatchNormalizationForwardTraining: ``(y, mean, biased
    variance)`` as the batch_norm op returns them; None when cuDNN refuses.

    cuDNN hands back the mean and 1/sqrt(var + eps); recovering var from that cancels badly
    when var ≪ eps, so the running statistics are set to the batch's instead (average factor 1:
    the mean, and the unbiased variance, rescaled here by (n - 1)/n).
    """
    api, lib, cupy = _libraries()
    channels = x.shape[1]
    n = x.size // channels
    x4 = x.reshape(x.shape + (1, 1)) if x.ndim == 2 else x  # (N, C) as (N, C, 1, 1): same stats
    stat_dtype = np.float32 if x.dtype == np.float16 else x.dtype  # cuDNN's parameter type
    running_mean = cupy.zeros((channels,), dtype=stat_dtype)
    running_var = cupy.zeros((channels,), dtype=stat_dtype)

    def call() -> Any:
        # decay 0: cuDNN's average factor is 1 - decay, so running := this batch's statistics
        mode, decay, is_for_conv2d, debug = lib.CUDNN_BATCHNORM_SPATIAL, 0.0, True, False
        return api.batch_normalization_forward_training(
            x4,
            gamma,
            beta,
            running_mean,
            running_var,
            None,
            None,
            float(eps),
            decay,
            is_for_conv2d,
            mode,
            debug,
        )

    result = _run("batch_norm", call)
    if result is None:
        return None
    var = running_var * ((n - 1) / n)
    mean = running_mean.astype(x.dtype, copy=False)
    return result[0].reshape(x.shape), mean, var.astype(x.dtype, copy=False)
