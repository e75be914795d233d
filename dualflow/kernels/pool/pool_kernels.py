"""CPU pooling kernels on numpy (NCHW float32/float64): one pass over each output, both cores.

max_pool2d, max_pool2d_grad, max_pool2d_gather, avg_pool2d and avg_pool2d_grad run the numba
loops of ``pool_loops`` (no padded copy, no per-tap passes over the batch, rounding exactly like
the numpy window loops in ``ops/pooling.py``) over the (n, c) planes, split into contiguous ranges
run at once on ``cpu_threads``: each part writes only its own planes, so results never depend on
the split, from a part size scaled to the 2x2 max pool's one-thread cost on this machine
(``pool_work``: measured once per machine, like ``machine_constants``, which sits below these
kernels and takes the cost as an input). Kernels are compiled on first use; machine code is kept
in the signed kernels store.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dualflow.kernels.base import numba_cache
from dualflow.kernels.base.cpu_threads import parts_for, run_parts, split
from dualflow.kernels.base.machine_constants import POOL_COPIES, machine_constants
from dualflow.kernels.base.per_machine import PerMachine, best_of, timings_of
from dualflow.kernels.base.windows import Pair, out_size
from dualflow.kernels.pool.pool_loops import BODIES, jit

DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
# image elements per part below which a second thread costs more than it saves: None takes the
# machine's (``part_min``; the default 2^15 was one machine's); an int here (tests) overrides it
PART_MIN: int | None = None
PROBE_SHAPE = (8, 64, 32, 32)  # 512K float32 image elements: where a 2x2 pool's split is decided
PROBE_REPEATS = 10
COPIES_BOUNDS = (0.2, 12.0)  # the development machine measured 0.75-1.6 (beyond L3 to in L2)
FIXED_MIN = 1 << 16  # images this large get kernels compiled for their window and stride
# numba_cache's key covers a kernel's own bytecode, not the closure constants or the inlined
# bodies: the stem names the constants and this digest of both modules' source the bodies
_DIGEST = hashlib.sha256(
    b"".join(Path(__file__).with_name(n).read_bytes() for n in ("pool_kernels.py", "pool_loops.py"))
).hexdigest()[:16]
_KERNELS: dict[tuple, Any] = {}
_LOCK = threading.Lock()


def _interior(n: int, k: int, s: int, pad: int, out: int) -> tuple[int, int]:
    """Output indices [lo, hi) whose windows lie inside an axis of length n."""
    lo = -(-pad // s)
    return lo, max(lo, min(out, (n - k + pad) // s + 1))


def _make(name: str, geometry: tuple[int, int, int, int] | None) -> Any:
    """Kernel ``f(u, v, z, lo, hi, ph, pw, ij)`` of body ``name`` with the window and stride
    (kh, kw, sh, sw) as constants, or ``f(u, v, z, lo, hi, kh, kw, sh, sw, ph, pw, ij)`` taking
    them as arguments (``geometry`` None)."""
    body = BODIES[name]
    if geometry is None:

        @jit()
        def run_any(u, v, z, lo, hi, kh, kw, sh, sw, ph, pw, ij):  # pragma: no cover
            body(u, v, z, lo, hi, kh, kw, sh, sw, ph, pw, ij)

        return run_any
    kh, kw, sh, sw = geometry

    @jit()
    def run_fixed(u, v, z, lo, hi, ph, pw, ij):  # pragma: no cover - runs compiled
        body(u, v, z, lo, hi, kh, kw, sh, sw, ph, pw, ij)

    return run_fixed


def _kernel(name: str, geometry: tuple[int, int, int, int] | None) -> Any:
    """Kernel ``name`` (``_make``), built once per process, its machine code in the signed
    kernels store under a stem naming the constants (numba_cache's key sees neither closure
    values nor the inlined bodies: the digest of both modules' source stands for them)."""
    key = (name, geometry)
    with _LOCK:
        kernel = _KERNELS.get(key)
        if kernel is None:
            kernel = _make(name, geometry)
            fixed = "any" if geometry is None else "x".join(map(str, geometry))
            numba_cache.in_kernels_store(kernel, f"k_pool{name}{fixed}x{_DIGEST}")
            _KERNELS[key] = kernel
        return kernel


@dataclass(frozen=True)
class PoolWork:
    """A 2x2 stride-2 max pool's one-thread time per image element, in the one-thread copies of
    ``machine_constants`` (``copy_ns``); ``note``: what was measured, or why the default
    (``POOL_COPIES``, the development machine's) was kept.
    """

    copies: float = POOL_COPIES
    note: str = "defaults"

    def describe(self) -> str:
        """One line naming the cost.

        Example:
            >>> PoolWork().describe()
            'pool work: 2x2 max pool 1.5 copies an image element (defaults)'
        """
        return f"pool work: 2x2 max pool {self.copies:g} copies an image element ({self.note})"


def derive_pool_work(timings: dict, copy_ns: float) -> PoolWork:
    """The cost from the probe's ``timings`` (``pool_s`` seconds for ``elements`` image
    elements) and the copy's ns per element (rounded to 0.01); outside ``COPIES_BOUNDS``: the
    default, with a note.

    Example:
        >>> derive_pool_work({"pool_s": 1e-4, "elements": 1e6}, 0.05).copies  # 0.1 ns / 0.05
        2.0
        >>> derive_pool_work({"pool_s": 1e-4, "elements": 1e6}, 1.0).note
        'measured; 0.1 copies out of [0.2, 12.0]: default kept'
    """
    copies = round(timings["pool_s"] / timings["elements"] / (copy_ns * 1e-9), 2)
    low, high = COPIES_BOUNDS
    if low <= copies <= high:
        return PoolWork(copies, "measured")
    return PoolWork(note=f"measured; {copies} copies out of [{low}, {high}]: default kept")


def _measure_pool() -> dict:
    """Time the 2x2 stride-2 max pool kernel on one thread over ``PROBE_SHAPE`` (~2 ms, plus
    building it the first time): the least of ``PROBE_REPEATS``."""
    x = np.random.default_rng(0).standard_normal(PROBE_SHAPE, dtype=np.float32)
    (h, w), out = x.shape[2:], (x.shape[2] // 2, x.shape[3] // 2)
    y = np.empty(x.shape[:2] + out, np.float32)
    planes = x.shape[0] * x.shape[1]
    ij = _interior(h, 2, 2, 0, out[0]) + _interior(w, 2, 2, 0, out[1])
    kernel = _kernel("maxpool", (2, 2, 2, 2))  # what ``max_pool2d`` runs on this image
    call = functools.partial(kernel, _planes(x), _planes(y), np.float32(0), 0, planes, 0, 0, ij)
    (seconds,) = best_of((call,), PROBE_REPEATS)
    return {"pool_s": seconds, "elements": float(x.size)}


def _read_pool(record: object) -> PoolWork | None:
    """The cost of a cache record (derived again at each read), or None when it is not one."""
    timings = timings_of(record, ("pool_s", "elements"))
    return None if timings is None else derive_pool_work(timings, machine_constants().copy_ns)


def _pool_record() -> dict:
    timings = _measure_pool()
    return {"timings": timings, "copies": _read_pool({"timings": timings}).copies}


_POOL_WORK = PerMachine("pool_work", _pool_record, _read_pool, PoolWork(), lambda: (_DIGEST,))


def pool_work() -> PoolWork:
    """This machine's 2x2 max pool cost: read from the kernels cache, or measured and written
    there at the first need (key: the machine and these kernels' source); the default under
    ``DUALFLOW_MACHINE_CONSTANTS=defaults``. Fixed for the process once read.

    Example:
        >>> pool_work().copies > 0
        True
    """
    return _POOL_WORK.get()


def part_min(ksize: Pair, stride: Pair) -> int:
    """Image elements per part from which a kernel of this window is split: ``PART_MIN``, else
    the machine's ``pool_part_min`` for its measured 2x2 max pool (``pool_work``) over the
    window's taps per stride step: a 3x3 window at stride 2 reads each element 2.25 times, so
    its split pays sooner.

    Example:
        >>> c = machine_constants().pool_part_min_for(pool_work().copies)
        >>> part_min((2, 2), (2, 2)) == (PART_MIN or c)
        True
        >>> PART_MIN is not None or part_min((3, 3), (1, 1)) < part_min((2, 2), (2, 2))
        True
    """
    if PART_MIN:
        return PART_MIN
    reads = max(1.0, ksize[0] * ksize[1] / (stride[0] * stride[1]))
    return max(1, int(machine_constants().pool_part_min_for(pool_work().copies) / reads))


def covers(*arrays: Any) -> bool:
    """Whether these kernels take the arrays: numpy float32/float64 (else the numpy path runs).

    Example:
        >>> covers(np.zeros(2, np.float32), np.zeros(2)), covers(np.zeros(2, np.int64))
        (True, False)
    """
    return all(type(a) is np.ndarray and a.dtype in DTYPES for a in arrays)


def _planes(a: Any) -> Any:
    """(N, C, H, W) as a C-contiguous (N*C, H, W) array (a copy only when a is not contiguous)."""
    return np.ascontiguousarray(a).reshape((-1,) + tuple(a.shape[2:]))


def _run(name: str, uvz: tuple, image: Any, out: Pair, geometry: tuple[Pair, Pair, Pair]) -> None:
    """Run kernel ``name`` on ``uvz`` (arrays as (P, ., .) planes, or a scalar last) for an
    ``image`` (N, C, H, W) pooled to ``out`` (Ho, Wo), its planes split into contiguous ranges
    over the threads when the work pays for it."""
    ksize, stride, (ph, pw) = geometry
    (h, w), size = image.shape[2:], image.size
    rows = _interior(h, ksize[0], stride[0], ph, out[0])
    ij = rows + _interior(w, ksize[1], stride[1], pw, out[1])
    fixed = size >= FIXED_MIN
    kernel = _kernel(name, tuple(int(v) for v in (*ksize, *stride)) if fixed else None)
    args = (ph, pw, ij) if fixed else (*ksize, *stride, ph, pw, ij)
    jobs: list[Callable[[], None]] = [
        lambda lo=lo, hi=hi: kernel(*uvz, lo, hi, *args)
        for lo, hi in split(uvz[0].shape[0], parts_for(size, part_min(ksize, stride)))
    ]
    run_parts(jobs)


def _out(x: Any, hw: Pair, dtype: np.dtype) -> Any:
    return np.empty(tuple(x.shape[:2]) + tuple(hw), dtype)


def _pooled(hw: Any, ksize: Pair, stride: Pair, pad: Pair) -> Pair:
    return tuple(out_size(hw[k], ksize[k], stride[k], pad[k]) for k in range(2))


def max_pool2d(x: Any, ksize: Pair, stride: Pair, pad: Pair) -> Any:
    """Maximum over each window of x (N, C, H, W); NaN wins (numpy's ``maximum``).

    Example:
        >>> max_pool2d(np.arange(16.0).reshape(1, 1, 4, 4), (2, 2), (2, 2), (0, 0)).tolist()
        [[[[5.0, 7.0], [13.0, 15.0]]]]
    """
    geometry = (ksize, stride, pad)
    y = _out(x, _pooled(x.shape[2:], ksize, stride, pad), x.dtype)
    # windows sharing rows: fold each row once (3x3 stride 2: ~1.6 vs ~2.0 ms, 16x64x32x32)
    name = "maxpoolrows" if stride[0] < ksize[0] else "maxpool"
    _run(name, (_planes(x), _planes(y), x.dtype.type(0)), x, y.shape[2:], geometry)
    return y


def max_pool2d_grad(x: Any, gy: Any, ksize: Pair, stride: Pair, pad: Pair) -> Any:
    """gy (N, C, Ho, Wo) added at each window's first maximum of x, in gy's dtype.

    Example:
        >>> x = np.array([[[[1.0, 4.0, 2.0]]]])
        >>> max_pool2d_grad(x, np.ones((1, 1, 1, 2)), (1, 2), (1, 1), (0, 0)).tolist()
        [[[[0.0, 2.0, 0.0]]]]
    """
    geometry = (ksize, stride, pad)
    gx = np.empty(x.shape, gy.dtype)
    _run("maxpoolgrad", (_planes(x), _planes(gy), _planes(gx)), x, gy.shape[2:], geometry)
    return gx


def max_pool2d_gather(x: Any, g: Any, ksize: Pair, stride: Pair, pad: Pair) -> Any:
    """g (shaped like x) read at each window's first maximum of x (0 where that is padding).

    Example:
        >>> x = np.array([[[[1.0, 4.0], [3.0, 2.0]]]])
        >>> max_pool2d_gather(x, 10 * x + 1, (2, 2), (2, 2), (0, 0)).tolist()
        [[[[41.0]]]]
    """
    geometry = (ksize, stride, pad)
    y = _out(x, _pooled(x.shape[2:], ksize, stride, pad), g.dtype)
    _run("maxpoolgather", (_planes(x), _planes(g), _planes(y)), x, y.shape[2:], geometry)
    return y


def avg_pool2d(x: Any, ksize: Pair, stride: Pair, pad: Pair) -> Any:
    """Mean over each window of x (N, C, H, W), padded zeros counted: the taps summed in
    row-major order, times ``1 / (kh * kw)`` rounded to x's dtype.

    Example:
        >>> avg_pool2d(np.arange(16.0).reshape(1, 1, 4, 4), (2, 2), (2, 2), (0, 0)).tolist()
        [[[[2.5, 4.5], [10.5, 12.5]]]]
    """
    geometry = (ksize, stride, pad)
    y = _out(x, _pooled(x.shape[2:], ksize, stride, pad), x.dtype)
    scale = x.dtype.type(1.0 / (ksize[0] * ksize[1]))
    _run("avgpool", (_planes(x), _planes(y), scale), x, y.shape[2:], geometry)
    return y


def avg_pool2d_grad(gy: Any, shape: Pair, ksize: Pair, stride: Pair, pad: Pair) -> Any:
    """gy (N, C, Ho, Wo) times ``1 / (kh * kw)`` spread over the windows of an image of spatial
    ``shape``, in gy's dtype.

    Example:
        >>> avg_pool2d_grad(np.ones((1, 1, 1, 1)), (2, 2), (2, 2), (2, 2), (0, 0)).tolist()
        [[[[0.25, 0.25], [0.25, 0.25]]]]
    """
    geometry = (ksize, stride, pad)
    gx = np.empty(tuple(gy.shape[:2]) + tuple(shape), gy.dtype)
    scale = gy.dtype.type(1.0 / (ksize[0] * ksize[1]))
    _run("avgpoolgrad", (_planes(gy), _planes(gx), scale), gx, gy.shape[2:], geometry)
    return gx
