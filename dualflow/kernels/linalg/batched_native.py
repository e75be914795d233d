"""A batch of small float32 matrix products split over the native crew, each product the very
``cblas_sgemm`` call numpy's ``matmul`` makes for it.

Attention's products ((N*heads, L, hd) @ (N*heads, hd, L) and their gradients) are batches of
matrices too small for OpenBLAS's threads: numpy's loop runs them on one core (a 64 x 64 x 64
batch of 64: 210 us, and 400 us with the second operand transposed, ``k.T``). ``gemm``'s Python
workers split such batches only from ``part_flops`` per part (each hand-off a wake-up and the
GIL). Here the native crew (``kernels.base.native_crew``) takes consecutive matrices: its
worker calls OpenBLAS's ``cblas_sgemm`` through its address (``cblas.sgemm``), so a part is
posted in a microsecond while the crew lingers.

The bits never depend on the split: ``plan`` rebuilds the arguments numpy's ``matmul`` passes
for each matrix (``numpy/_core/src/umath/matmul.c.src``: row-major, ``NoTrans`` with the row
stride where the matrix is C-blasable, else ``Trans`` with the column stride; alpha 1, beta 0),
and refuses every case where numpy would do anything else: a vector (a core dimension of 1,
``gemv``/``dot``), an operand it would copy (neither layout blasable), an output that is not
C-ordered, or a matrix times its own transpose (``syrk``).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
from pathlib import Path
from typing import Any

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from dualflow.background.workers import IN_WORKER
from dualflow.kernels.base import crew_ranges, native_crew, numba_cache
from dualflow.kernels.base.native_calls import BLOCK_TYPE
from dualflow.kernels.base.native_crew import NativeCrew
from dualflow.kernels.base.per_machine import least_seconds
from dualflow.kernels.linalg.cblas import NO_TRANS, ROW_MAJOR, TRANS, sgemm

# the block of one part: rows [LO, HI) of the batch (``crew_ranges``' words), then the call's
# fixed arguments
LO, HI, FUNCTION, TRANS_A, TRANS_B, M, P, N, A, A_STEP, LDA, B, B_STEP, LDB, C, C_STEP, LDC = range(
    17
)
BLOCK_LEN = 17
ASLEEP_S = 5 * native_crew.LINGER_S  # a busy pause well beyond the workers' linger
ASLEEP_CALLS = 9  # the wake-up varies from call to call: the least of these
MODEL_CALLS = 30
_I32, _I64, _F32 = ir.IntType(32), ir.IntType(64), ir.FloatType()
DIGEST = hashlib.sha256(Path(__file__).read_bytes() + native_crew.DIGEST.encode()).hexdigest()[:16]
"""A digest of this module's code and of the crew's (the kernels' stems)."""


def _kernel(py_func: Any) -> Any:
    # compiled as the fixed kernels are, machine code in the signed kernels store
    return numba_cache.cached_njit(py_func, f"k_batched{py_func.__name__}_{DIGEST}")


@intrinsic
def call_sgemm(typingctx: Any, block: Any, index: Any) -> Any:
    """Run matrix ``index`` of the batch a ``BLOCK_LEN`` block describes: ``cblas_sgemm`` at
    the block's ``FUNCTION`` address with alpha 1 and beta 0 (numpy's), integers 64-bit
    (numpy's OpenBLAS), pointers passed as integers (the same registers on x86-64/aarch64)."""
    if not (block == BLOCK_TYPE and isinstance(index, types.Integer)):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        array = context.make_array(sig.args[0])(context, builder, args[0])
        row = context.cast(builder, args[1], sig.args[1], types.int64)

        def word(k: int) -> Any:
            return builder.load(builder.gep(array.data, [ir.Constant(_I64, k)]))

        def at(base: int, step: int) -> Any:
            return builder.add(word(base), builder.mul(row, word(step)))

        fn_type = ir.FunctionType(
            ir.VoidType(), [_I32, _I32, _I32, *[_I64] * 3, _F32, *[_I64] * 4, _F32, _I64, _I64]
        )
        target = builder.inttoptr(word(FUNCTION), fn_type.as_pointer())
        arguments = [ir.Constant(_I32, ROW_MAJOR)]
        arguments += [builder.trunc(word(TRANS_A), _I32), builder.trunc(word(TRANS_B), _I32)]
        arguments += [word(M), word(P), word(N), ir.Constant(_F32, 1.0)]
        arguments += [at(A, A_STEP), word(LDA), at(B, B_STEP), word(LDB)]
        arguments += [ir.Constant(_F32, 0.0), at(C, C_STEP), word(LDC)]
        builder.call(target, arguments)
        return context.get_dummy_value()

    return types.none(block, index), codegen


@_kernel
def entry(block: np.ndarray) -> None:  # pragma: no cover - runs compiled, on a crew's worker
    """Matrices ``block[LO]:block[HI]`` of the batch (a worker's part, or the caller's)."""
    for i in range(block[LO], block[HI]):
        call_sgemm(block, i)


def _layout(byte_rows: int, byte_cols: int, rows: int, cols: int) -> tuple[int, int] | None:
    """(trans, leading dimension) numpy's ``matmul`` passes for one float32 matrix with these
    byte strides, or None where it is blasable in neither layout (numpy would copy it)."""
    for trans, outer, inner, width in ((NO_TRANS, byte_rows, byte_cols, cols),
                                       (TRANS, byte_cols, byte_rows, rows)):  # fmt: skip
        if inner == 4 and outer % 4 == 0 and outer // 4 >= width:
            return trans, outer // 4
    return None


def plan(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray | None:
    """The block of ``a @ b`` into ``out`` (float32 (batch, m, n) @ (batch, n, p) into a
    C-ordered (batch, m, p)), or None where numpy's ``matmul`` would not call ``cblas_sgemm``
    once per matrix with these very arguments.

    Example:
        >>> a = np.ones((2, 3, 4), np.float32)
        >>> block = plan(a, np.ones((2, 5, 4), np.float32).transpose(0, 2, 1),
        ...              np.empty((2, 3, 5), np.float32))
        >>> block is None or (int(block[TRANS_B]) == TRANS and int(block[LDB]) == 4)
        True
        >>> plan(a, a.transpose(0, 2, 1), np.empty((2, 3, 3), np.float32)) is None  # syrk
        True
    """
    function = sgemm()
    if function is None or not _fits(a, b, out):
        return None
    (batch, m, n), p = a.shape, b.shape[2]
    layout_a = _layout(a.strides[1], a.strides[2], m, n)
    layout_b = _layout(b.strides[1], b.strides[2], n, p)
    if layout_a is None or layout_b is None or _syrk(a, b, layout_a, layout_b):
        return None
    words = [0, batch, _sgemm_address(), layout_a[0], layout_b[0], m, p, n]
    words += [a.ctypes.data, a.strides[0], layout_a[1], b.ctypes.data, b.strides[0], layout_b[1]]
    return np.array([*words, out.ctypes.data, out.strides[0], p], np.int64)


_NEVER_PAYS = [0]
"""FLOPs below which a split never repays even a hand-off (the last measured crew's model): a
small batch is refused before the crew is looked up (~0.3 us against ~2.5 on eager calls)."""


@functools.cache
def _sgemm_address() -> int:
    # the ctypes function's address: looked up once a process
    return ctypes.cast(sgemm(), ctypes.c_void_p).value


def _fits(a: Any, b: Any, out: Any) -> bool:
    # float32 stacks of one batch dim, no core dim of 1 (numpy's gemv/dot cases), a C-ordered
    # out apart from both operands
    return (
        type(a) is np.ndarray
        and type(b) is np.ndarray
        and a.dtype == b.dtype == out.dtype == np.float32
        and a.ndim == b.ndim == 3
        and a.shape[0] == b.shape[0] >= 2
        and a.shape[2] == b.shape[1]
        and min(a.shape[1], a.shape[2], b.shape[2]) >= 2
        and out.shape == (a.shape[0], a.shape[1], b.shape[2])
        and out.flags.c_contiguous
        and out.flags.writeable  # else numpy raises, and so must the call
        and a.flags.aligned  # numpy's iterator copies unaligned operands: other arguments
        and b.flags.aligned
        and out.flags.aligned
        and not np.may_share_memory(out, a)  # numpy would compute into a copy first
        and not np.may_share_memory(out, b)
    )


def _syrk(a: np.ndarray, b: np.ndarray, layout_a: tuple, layout_b: tuple) -> bool:
    """Whether numpy would call ``syrk`` for some matrix of the batch: one that starts where
    its partner does, is square in the output, and is its partner transposed."""
    if a.shape[1] != b.shape[2] or a.strides[1:] != b.strides[:0:-1] or layout_a[0] == layout_b[0]:
        return False
    gap, step = b.ctypes.data - a.ctypes.data, a.strides[0] - b.strides[0]
    if step == 0:
        return gap == 0
    return gap % step == 0 and 0 <= gap // step < a.shape[0]


def split_model(crew: NativeCrew) -> tuple[float, float, float] | None:
    """(seconds a split batch costs its caller beyond its parts' work with the workers
    lingering; the same with them asleep, a wake-up; seconds a float32 multiply-add of such a
    batch takes on one thread): least times of a batch of 32 products of 32 x 32 x 32 alone,
    split, and split after a busy pause beyond the linger. Measured once per crew holding its
    threads (~10 ms); None while another call holds them (measured later)."""
    return crew.measured_once("batched gemm", lambda: _measure(crew))


def _measure(crew: NativeCrew) -> tuple[float, float, float] | None:
    # ``split_model``'s timings, the caller holding the crew's threads
    a, b = np.ones((2, 32, 32, 32), np.float32)  # named: the block holds their addresses
    out = np.empty_like(a)
    block = plan(a, b, out)
    if block is None:
        return None
    parts, flops = len(crew.ctls) + 1, 2 * 32**4
    entry_at = crew_ranges.entry_at(entry)
    alone = least_seconds(lambda: entry(block), MODEL_CALLS)
    split = least_seconds(lambda: _split_held(crew, entry_at, block), MODEL_CALLS)
    asleep = least_seconds(lambda: _split_held(crew, entry_at, block), ASLEEP_CALLS, ASLEEP_S)
    per_flop = alone / flops
    awake_cost = max(0.0, split - alone / parts)
    _NEVER_PAYS[0] = int(awake_cost / (per_flop * (1.0 - 1.0 / parts)))  # the last crew's
    return awake_cost, max(0.0, asleep - alone / parts), per_flop


def _split_held(crew: NativeCrew, entry_at: int, block: np.ndarray) -> None:
    # the split, its caller holding the crew's lock
    crew_ranges.run_split(crew.ctls, entry_at, crew.spins, block)


def matmul(a: Any, b: Any, out: Any = None) -> np.ndarray | None:
    """``a @ b`` (into ``out`` when given) split over the native crew, or None where it does not
    split: ``plan`` refuses it, there is no crew, another call holds it, or the one-thread time
    the split saves does not repay what it costs (``split_model``: a hand-off while the workers
    linger, a wake-up once they sleep). The caller keeps each product within OpenBLAS's
    one-thread size (``gemm.SMALL_MNK``).

    Example:
        >>> a = np.ones((4, 8, 8), np.float32)
        >>> product = matmul(a, a)
        >>> product is None or bool(np.array_equal(product, np.matmul(a, a)))
        True
    """
    if type(a) is not np.ndarray or a.dtype != np.float32 or a.ndim != 3 or b.ndim != 3:
        return None  # before anything is looked up or allocated
    flops = 2 * a.size * b.shape[-1]
    if _too_small(flops):
        return None
    if IN_WORKER.active:
        return None  # a call inside another call's part runs alone
    crew = native_crew.crew()
    model = None if crew is None or sgemm() is None else split_model(crew)
    if model is None or not _pays(crew, model, flops):
        return None  # the cheap refusals first: a small batch pays no plan, no allocation
    target = np.empty((a.shape[0], a.shape[1], b.shape[-1]), np.float32) if out is None else out
    block = plan(a, b, target)
    if block is None or not crew_ranges.run(crew, crew_ranges.entry_at(entry), block):
        return None
    return target


def split_pays(crew: NativeCrew, flops: int) -> bool:
    """Whether ``flops`` of float32 products at one core's GEMM rate, split over ``crew``, save
    more than the split costs (``split_model``: the hand-off while the workers linger, else a
    wake-up); False until the model is measured. ``thin_gemm`` asks this of its tiles.

    Example:
        >>> crew = native_crew.crew()
        >>> crew is None or split_pays(crew, 1)
        False
    """
    model = split_model(crew)
    return model is not None and _pays(crew, model, flops)


def _too_small(flops: int) -> bool:
    # below what a hand-off to lingering workers repays: refused before the crew is looked up
    return flops < _NEVER_PAYS[0]


def _pays(crew: NativeCrew, model: tuple[float, float, float], flops: int) -> bool:
    # the one-thread time the split saves against what it costs: a hand-off, or a wake-up
    awake_cost, asleep_cost, per_flop = model
    parts = len(crew.ctls) + 1
    saved = flops * per_flop * (1.0 - 1.0 / parts)
    return saved > (awake_cost if crew.awake() else asleep_cost)


def warm() -> None:
    """Compile (so store) ``entry`` and ``crew_ranges.run_split`` for their one signature each.

    Example:
        >>> warm(); len(entry.signatures), len(crew_ranges.run_split.signatures)
        (1, 1)
    """
    entry.compile((BLOCK_TYPE,))
    crew_ranges.warm()
