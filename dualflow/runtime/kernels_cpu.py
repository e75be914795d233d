"""CPU kernels for ``fused`` nodes: a blocked numpy evaluator and the choice between it and numba.

The blocked evaluator runs the same numpy ufuncs as eager mode, chunk by chunk of the output into
preallocated temporaries, so results are bit-identical to eager while temporaries stay in cache.
Arithmetic-only expressions go to a numba kernel (``kernels_numba``), transcendental ones here.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from dualflow.runtime.kernels_typing import Program, Ref, apply_numpy, lower_expr

# Elements per chunk, measured on 4M float32: 4K blocks 29 ms, 16K 13 ms, 64K 9.6 ms, 128K 9.1 ms,
# one block 13.8 ms (the per-ufunc-call cost ~2 µs dominates small blocks; big ones leave L2).
BLOCK = 65536

_CACHE: dict[tuple, Callable] = {}
_warned_no_numba = False


def blocked_kernel(program: Program, shape: tuple[int, ...], block: int = BLOCK) -> Callable:
    """``f(xp, *arrays)`` evaluating ``program`` to an array of ``shape`` chunk by chunk.

    Example:
        >>> p = lower_expr(("call", "tanh", ("var", "a0")), ("a0",), ("float64",))
        >>> blocked_kernel(p, (3,))(np, np.zeros(3)).tolist()
        [0.0, 0.0, 0.0]
    """
    shape = tuple(shape)
    inner = int(np.prod(shape[1:], dtype=np.int64)) if shape else 1

    def run(xp: Any, *arrays: Any, **_attrs: Any) -> Any:
        arrays = tuple(np.asarray(a) for a in arrays)
        out = np.empty(shape, program.dtype)
        if out.size <= block or not shape:
            _evaluate(program, arrays, out, _temps(program, shape))
        elif all(_flat_ok(a, shape) for a in arrays):
            flat_in = [a.reshape(-1) for a in arrays]
            flat_out, temps = out.reshape(-1), _temps(program, (block,))
            for start in range(0, out.size, block):
                stop = min(start + block, out.size)
                chunk = [a if a.size == 1 else a[start:stop] for a in flat_in]
                _evaluate(program, chunk, flat_out[start:stop], temps, stop - start)
        else:
            views = [np.broadcast_to(a, shape) for a in arrays]
            rows = max(1, block // max(inner, 1))
            temps = _temps(program, (rows, *shape[1:]))
            for start in range(0, shape[0], rows):
                stop = min(start + rows, shape[0])
                chunk = [v[start:stop] for v in views]
                _evaluate(program, chunk, out[start:stop], temps, stop - start)
        return out

    return run


def _flat_ok(array: np.ndarray, shape: tuple[int, ...]) -> bool:
    return array.size == 1 or (array.shape == shape and array.flags.c_contiguous)


def _temps(program: Program, shape: tuple[int, ...]) -> list[np.ndarray]:
    # the last step writes into the output itself
    return [np.empty(shape, s.dtype) for s in program.steps[:-1]]


def _evaluate(
    program: Program, inputs: list, out: np.ndarray, temps: list, rows: int | None = None
) -> None:
    values: list[Any] = []

    def get(ref: Ref) -> Any:
        if ref[0] == "in":
            return inputs[ref[1]]
        return ref[1] if ref[0] == "const" else values[ref[1]]

    last = len(program.steps) - 1
    with np.errstate(all="ignore"):  # eager numpy warns per op; a fused region stays quiet
        for i, step in enumerate(program.steps):
            target = out if i == last else (temps[i] if rows is None else temps[i][:rows])
            values.append(apply_numpy(step.fn, [get(r) for r in step.operands], out=target))


def cpu_kernel(
    expr: tuple, args: tuple[str, ...], in_metas: tuple[tuple[tuple[int, ...], str], ...]
) -> Callable:
    """The CPU kernel ``f(xp, *arrays)`` of a fused expression over inputs of (shape, dtype).

    numba for arithmetic-only expressions, the blocked evaluator where transcendentals are (or
    numba is missing); cached by (expression, dtypes, broadcast pattern).

    Example:
        >>> e = ("call", "multiply", ("var", "a0"), ("const", 2))
        >>> cpu_kernel(e, ("a0",), (((2,), "int64"),))(np, np.arange(2)).tolist()
        [0, 2]
    """
    shapes = tuple(tuple(s) for s, _ in in_metas)
    dtypes = tuple(np.dtype(d).name for _, d in in_metas)
    shape = tuple(np.broadcast_shapes(*shapes)) if shapes else ()
    key = (expr, args, dtypes, shapes)
    kernel = _CACHE.get(key)
    if kernel is None:
        program = lower_expr(expr, args, dtypes)
        kernel = _numba_or_none(program, shapes, shape)
        if kernel is None:
            kernel = blocked_kernel(program, shape)
        _CACHE[key] = kernel
    return kernel


def _numba_or_none(program: Program, shapes: tuple, shape: tuple[int, ...]) -> Callable | None:
    global _warned_no_numba
    if program.transcendental:
        return None
    try:
        from dualflow.runtime import kernels_numba  # noqa: PLC0415 - imports numba (~0.3 s)
    except ImportError:
        if not _warned_no_numba:
            warnings.warn(
                "numba is not installed: fused kernels use the blocked numpy evaluator",
                RuntimeWarning,
                stacklevel=3,
            )
            _warned_no_numba = True
        return None
    return kernels_numba.numba_kernel(program, shapes, shape)
