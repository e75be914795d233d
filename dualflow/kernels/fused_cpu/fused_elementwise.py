"""CPU kernels for ``fused`` nodes: a blocked numpy evaluator and the choice between it and numba.

The blocked evaluator runs the same numpy ufuncs as eager mode, chunk by chunk of the output into
preallocated temporaries, so results are bit-identical to eager while temporaries stay in cache.
Arithmetic-only expressions go to a numba kernel (``numba_elementwise``: exactly rounded operations,
no contraction, so also bit-identical), and so do float32 ``tanh`` and ``exp`` (``fast_tanh``,
``fast_exp``: eager runs the same functions); other transcendental ones and powers other than
``x ** 2`` come here
(numba's libm ``pow`` and numpy's differ by up to 1 ulp).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from dualflow.kernels.base.cpu_threads import run_parts, threads
from dualflow.kernels.base.lru_dict import Recent
from dualflow.kernels.expr.scalar_table import FUNCTIONS, squares
from dualflow.kernels.expr.typed_program import Program, Step, apply_numpy, lower_expr
from dualflow.kernels.fused_cpu.blocked_invariants import hoisted

# Elements per chunk, measured on 4M float32 (tanh chain, temporaries reused by liveness), one
# thread: 32K 8.6 ms, 64K 7.9, 128K 7.2, 256K 6.9, 512K 6.8; two threads: 32K 11 ms (the ~1.5 µs
# per ufunc call contends for the GIL), 64K 7.1, 128K 5.0, 256K 4.2, 512K 3.9.
BLOCK = 262144
# Outputs at least this big are split over ``threads()`` threads (numpy ufuncs release the GIL);
# chunks are independent, so results stay bit-identical.
THREAD_MIN = 1 << 20


_CACHE: dict[tuple, Callable] = Recent(128)
_warned_no_numba = False


def blocked_kernel(program: Program, shape: tuple[int, ...], block: int = BLOCK) -> Callable:
    """``f(xp, *arrays, out=None)`` evaluating ``program`` to an array of ``shape`` chunk by chunk
    (into ``out``, a C-contiguous array of that shape and the result dtype, when given).

    Only the last step writes ``out``, chunk by chunk after reading that chunk's inputs, so
    ``out`` may be an input of exactly the output's shape unless the last step's function
    writes in several passes (``inplace`` false in the scalar-function table).

    Example:
        >>> p = lower_expr(("call", "tanh", ("var", "a0")), ("a0",), ("float64",))
        >>> blocked_kernel(p, (3,))(np, np.zeros(3)).tolist()
        [0.0, 0.0, 0.0]
    """
    shape = tuple(shape)
    inner = int(np.prod(shape[1:], dtype=np.int64)) if shape else 1
    plan, known = _schedule(program), {}

    def run(xp: Any, *arrays: Any, out: Any = None, **_attrs: Any) -> Any:
        arrays = tuple(np.asarray(a) for a in arrays)
        if out is None:
            out = np.empty(shape, program.dtype)
        # one-element parts once, not per element: read as extra inputs
        steps, extra = hoisted(plan, program, arrays, known)
        arrays += extra
        if out.size <= block or not shape:
            _evaluate(steps, arrays, out, _temps(steps, shape))
            return out
        if all(_flat_ok(a, shape) for a in arrays):
            ins = [a.reshape(-1) for a in arrays]
            target, step, chunk_shape = out.reshape(-1), block, (block,)
        else:
            ins = [np.broadcast_to(a, shape) for a in arrays]
            step = max(1, block // max(inner, 1))
            target, chunk_shape = out, (step, *shape[1:])
        starts = range(0, target.shape[0], step)
        parts = threads() if out.size >= THREAD_MIN and len(starts) > 1 else 1
        jobs = [(steps, ins, target, starts[k::parts], step, chunk_shape) for k in range(parts)]
        run_parts([functools.partial(_run_chunks, *job) for job in jobs])
        return out

    return run


def _run_chunks(plan: tuple, ins: list, out: np.ndarray, starts: range, step: int, shape) -> None:
    temps = _temps(plan, shape)
    with np.errstate(all="ignore"):  # eager numpy warns per op; a fused region stays quiet
        for start in starts:
            stop = min(start + step, out.shape[0])
            slots = temps if stop - start == step else [t[: stop - start] for t in temps]
            chunk = [a if a.size == 1 else a[start:stop] for a in ins]
            for fn, refs, slot in plan[0]:
                args = [chunk[v] if k == 0 else (v if k == 1 else slots[v]) for k, v in refs]
                fn(*args, out=out[start:stop] if slot == -1 else slots[slot])


def _flat_ok(array: np.ndarray, shape: tuple[int, ...]) -> bool:
    return array.size == 1 or (array.shape == shape and array.flags.c_contiguous)


def _schedule(program: Program) -> tuple[list, list[np.dtype]]:
    """Steps as (fn, operand refs, slot) with temporaries reused once their value is dead.

    A plain ufunc may write over an operand that dies at that step (exact aliasing is safe);
    the last step writes into the output (slot -1).
    """
    last_use = {}
    for j, step in enumerate(program.steps):
        for ref in step.operands:
            if ref[0] == "step":
                last_use[ref[1]] = j
    slot_of: dict[int, int] = {}
    dtypes: list[np.dtype] = []
    free: list[int] = []
    ops = []
    for j, step in enumerate(program.steps):
        # one slot per dying value, even when the step reads it twice (``s + s``): releasing it
        # twice would hand the same scratch buffer to two live values later
        dying = list(
            dict.fromkeys(
                slot_of[r[1]] for r in step.operands if r[0] == "step" and last_use[r[1]] == j
            )
        )
        in_place = FUNCTIONS[step.fn].inplace
        if in_place:
            free += dying
        slot = -1 if j == len(program.steps) - 1 else _take(free, dtypes, step.dtype)
        if not in_place:
            free += dying
        kinds = {"in": 0, "const": 1}
        refs = tuple(
            (2, slot_of[r[1]]) if r[0] == "step" else (kinds[r[0]], r[1]) for r in step.operands
        )
        ops.append((_ufunc(step), refs, slot))
        slot_of[j] = slot
    return ops, dtypes


def _ufunc(step: Step) -> Callable:
    """The numpy callable ``f(*operands, out=)`` of a step (``apply_numpy`` for special ones)."""
    fn = step.fn
    if squares(step):
        return lambda x, _two, out: np.square(x, out=out)  # eager's ``x ** 2`` fast path
    if FUNCTIONS[fn].evaluate is not None:
        return lambda *operands, out: apply_numpy(fn, list(operands), out=out)
    return getattr(np, FUNCTIONS[fn].ufunc)


def _libm_in_numba(step: Step) -> bool:
    """Whether numba would compute this step with libm (the table's ``libm_in_numba``: any power
    but a float ``x**2``, which is ``x * x`` as eager's ``square``): not numpy's bits."""
    return FUNCTIONS[step.fn].libm_in_numba and not squares(step)


def _take(free: list[int], dtypes: list[np.dtype], dtype: np.dtype) -> int:
    for k, slot in enumerate(free):
        if dtypes[slot] == dtype:
            return free.pop(k)
    dtypes.append(dtype)
    return len(dtypes) - 1


def _temps(plan: tuple, shape: tuple[int, ...]) -> list[np.ndarray]:
    return [np.empty(shape, dtype) for dtype in plan[1]]


def _evaluate(plan: tuple, inputs: list, out: np.ndarray, temps: list) -> None:
    with np.errstate(all="ignore"):
        for fn, refs, slot in plan[0]:
            args = [inputs[v] if k == 0 else (v if k == 1 else temps[v]) for k, v in refs]
            fn(*args, out=out if slot == -1 else temps[slot])


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
        kernel = _numba_or_none(program, shapes, shape, spec=(expr, args, dtypes))
        if kernel is None:
            kernel = blocked_kernel(program, shape)
        _CACHE[key] = kernel
    return kernel


# Elements from which an eager call of a ``quiet`` op runs its kernel: ``relu_grad`` on 2M float32
# is two numpy passes and a bool temporary on one core, one pass on two in the kernel.
EAGER_MIN = 1 << 18
# ... and from this many when numpy's own loop is slow: ``where`` (a branch per element:
# relu_grad on 64K float32 ~240 us in numpy 2.4, ~17 us in the kernel) or a constant operand of
# maximum/minimum (relu: 31 vs 10 us at 64K); both cross over between 4K and 16K elements.
SELECT_MIN = 1 << 13
_EAGER_DTYPES = frozenset(np.dtype(d) for d in ("bool", "float32", "float64"))


def quiet(expr: tuple) -> bool:
    """Whether every function ``expr`` calls is quiet (the scalar table's ``quiet`` column: it
    never raises a floating-point flag numpy warns about), so an eager op made only of them runs
    the same in a kernel.

    Example:
        >>> quiet(("call", "maximum", ("var", "x"), ("const", 0))), quiet(("call", "exp", ("var", "x")))
        (True, False)
    """  # noqa: E501
    if expr[0] != "call":
        return True
    return FUNCTIONS[expr[1]].quiet and all(quiet(e) for e in expr[2:])


def eager_min(expr: tuple) -> int:
    """Elements from which an eager call of the ``quiet`` expression runs ``eager_kernel``.

    Example:
        >>> relu_grad = ("call", "where", ("call", "greater", ("var", "y"), ("const", 0)),
        ...              ("var", "gy"), ("const", 0))
        >>> eager_min(relu_grad) == SELECT_MIN, eager_min(("call", "abs", ("var", "x")))
        (True, 262144)
    """
    return SELECT_MIN if _slow_in_numpy(expr) else EAGER_MIN


def _slow_in_numpy(expr: tuple) -> bool:
    """Whether a call in ``expr`` is slow in numpy (the table's ``slow_in_numpy``)."""
    if expr[0] != "call":
        return False
    operands = expr[2:]
    slow = FUNCTIONS[expr[1]].slow_in_numpy
    if slow == "always" or (slow == "constant" and any(e[0] == "const" for e in operands)):
        return True
    return any(_slow_in_numpy(e) for e in operands)


def eager_kernel(expr: tuple, args: tuple[str, ...]) -> Callable:
    """``f(*arrays)``: an eager op's expression over C-ordered numpy arrays of one shape (bool,
    float32 or float64) in ``cpu_kernel``'s kernel; None for any other arguments (the op's
    numpy expression runs instead). Meant for ``quiet`` expressions: the kernels are bit-equal
    to numpy's ufuncs, and these raise no warning numpy would have shown.

    Example:
        >>> f = eager_kernel(("call", "maximum", ("var", "x"), ("const", 0)), ("x",))
        >>> f(np.array([-1.0, 2.0])).tolist(), f(np.array([1, 2])), f(2.0)
        ([0.0, 2.0], None, None)
    """

    built: dict[tuple, Callable | None] = {}  # (shape, dtypes) -> kernel; None: numpy's

    def run(*arrays: Any) -> Any:
        first = arrays[0]
        for a in arrays:
            if type(a) is not np.ndarray or a.shape != first.shape or not a.flags.c_contiguous:
                return None
        key = (first.shape, *[a.dtype for a in arrays])  # dtype.name costs ~5 us: not per call
        kernel = built.get(key, False)
        if kernel is False:
            if len(built) >= 64:
                built.clear()
            if all(a.dtype in _EAGER_DTYPES for a in arrays):
                # one flat signature for every shape: relu of a 4-D and of a 2-D array share
                # one machine code (numba compiles per ndim), which ``cache warm`` compiles
                metas = tuple(((first.size,), a.dtype.name) for a in arrays)
                kernel = cpu_kernel(expr, args, metas)
            else:
                kernel = None
            built[key] = kernel
        if kernel is None:
            return None
        return kernel(np, *[a.reshape(-1) for a in arrays]).reshape(first.shape)

    return run


def one_loop(expr: tuple, args: tuple[str, ...], dtypes: tuple[str, ...]) -> bool:
    """Whether ``cpu_kernel`` runs the expression over inputs of ``dtypes`` as one numba loop
    (arithmetic only, no float16, no libm power, numba importable).

    Example:
        >>> one_loop(("call", "add", ("var", "a0"), ("const", 1)), ("a0",), ("float32",))
        True
        >>> one_loop(("call", "sin", ("var", "a0")), ("a0",), ("float32",))
        False
        >>> one_loop(("call", "tanh", ("var", "a0")), ("a0",), ("float32",))  # fast_tanh
        True
    """
    if _blocked(lower_expr(expr, args, dtypes)):
        return False
    try:
        import numba  # noqa: F401, PLC0415
    except ImportError:  # pragma: no cover - numba is a core dependency
        return False
    return True


def _blocked(program: Program) -> bool:
    """Whether the program runs on the blocked numpy evaluator rather than numba."""
    types = {*program.in_dtypes, *(t for st in program.steps for t in (st.dtype, st.ctype))}
    if program.transcendental or np.dtype(np.float16) in types:  # numba has no float16
        return True
    # numba's pow is libm's, numpy's its own: they differ by up to 1 ulp
    return any(_libm_in_numba(step) for step in program.steps)


@functools.lru_cache(maxsize=1024)  # asked for every fused node at every lowering
def cpu_scratch(
    expr: tuple, args: tuple[str, ...], in_metas: tuple[tuple[tuple[int, ...], str], ...]
) -> int:
    """Bytes of temporaries ``cpu_kernel``'s kernel allocates (and frees) during one call: the
    blocked evaluator's chunk-sized slots on each thread; numba kernels keep values in registers.

    Example:
        >>> e = ("call", "tanh", ("call", "sin", ("var", "a0")))
        >>> cpu_scratch(e, ("a0",), (((1 << 22,), "float32"),)) // threads()  # 1 slot x 256K
        1048576
    """
    shapes = tuple(tuple(s) for s, _ in in_metas)
    program = lower_expr(expr, args, tuple(np.dtype(d).name for _, d in in_metas))
    if not _blocked(program):
        return 0
    shape = tuple(np.broadcast_shapes(*shapes)) if shapes else ()
    slot_bytes = sum(d.itemsize for d in _schedule(program)[1])
    size = int(np.prod(shape, dtype=np.int64))
    if size <= BLOCK or not shape:
        return slot_bytes * size
    if all(s == shape or int(np.prod(s, dtype=np.int64)) == 1 for s in shapes):
        chunk, chunks = BLOCK, -(-size // BLOCK)  # flat chunks (C-ordered operands)
    else:
        inner = int(np.prod(shape[1:], dtype=np.int64))
        rows = max(1, BLOCK // max(inner, 1))
        chunk, chunks = rows * inner, -(-shape[0] // rows)
    parts = threads() if size >= THREAD_MIN and chunks > 1 else 1
    return parts * chunk * slot_bytes


def _numba_or_none(
    program: Program,
    shapes: tuple,
    shape: tuple[int, ...],
    sum_layout: tuple | None = None,
    spec: tuple | None = None,
) -> Callable | None:
    """numba's kernel, elementwise or (``sum_layout``: dims, views and the output's shape) a
    sum; None when the program is for the blocked evaluator or numba is missing. With ``spec``
    (the program's (expr, args, dtypes)), a worker process compiles the kernel
    (``background_compile``): the blocked evaluator stands in meanwhile, a sum's caller waits."""
    global _warned_no_numba
    if _blocked(program):
        return None
    try:
        from dualflow.kernels.numba import numba_elementwise  # noqa: PLC0415 - imports numba (~0.3 s)
    except ImportError:
        if not _warned_no_numba:
            warnings.warn(
                "numba is not installed: fused kernels use the blocked numpy evaluator",
                RuntimeWarning,
                stacklevel=3,
            )
            _warned_no_numba = True
        return None
    from dualflow.kernels.numba import background_compile  # noqa: PLC0415 - imports numba

    pending = None
    if spec is not None and sum_layout is not None:
        pending = background_compile.pending_sum(spec, program, shapes, shape, sum_layout)
    elif spec is not None:
        blocked = functools.partial(blocked_kernel, program, shape)
        pending = background_compile.pending_kernel(spec, program, shapes, shape, blocked)
    if pending is not None:
        return pending
    if sum_layout is not None:
        from dualflow.kernels.numba import numba_sum  # noqa: PLC0415 - imports numba

        return numba_sum.numba_sum_kernel(program, *sum_layout)
    # a chain of small steps asks the worker for the kernel's entry (``kernel_chain``)
    ask = None
    if spec is not None:
        ask = functools.partial(background_compile.ask_entry, spec, program, shapes, shape)
    return numba_elementwise.numba_kernel(program, shapes, shape, ask)
