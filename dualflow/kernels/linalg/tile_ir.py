"""A register-blocked float32 GEMM tile written in LLVM IR, as a numba intrinsic: ``rows`` x
``vectors * LANES`` accumulators kept in vector registers through the whole K loop.

numba's own loops cannot express this: a tile written with scalar loops, or unrolled by hand,
compiled to scalar code (8-13 GFLOP/s, design notes, fourteenth session). Here each step of K
loads ``vectors`` vectors of the packed operand, broadcasts each of ``rows`` scalars of the
other and adds their products with ``llvm.fma``: every output element is one chain of fused
multiply-adds over k = 0..K-1 from +0.0, in order, whatever the tile, the split or the vector
width (its bits depend on nothing else). ``LANES`` is the machine's vector width (16 floats with
AVX-512, else 8); ``ACCUMULATORS`` how many vector registers the tile may keep (24 of 32 with
AVX-512, 12 of 16 with AVX2).
"""

from __future__ import annotations

import functools
from typing import Any

import llvmlite.binding as llvm
import numba
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

_AVX512 = bool(llvm.get_host_cpu_features().get("avx512f", False))
LANES = 16 if _AVX512 else 8
ACCUMULATORS = 24 if _AVX512 else 12
_I32, _I64, _F32 = ir.IntType(32), ir.IntType(64), ir.FloatType()


def rows_for(vectors: int) -> int:
    """Rows of a tile ``vectors`` vectors wide: as many as the accumulators allow.

    Example:
        >>> rows_for(1) == ACCUMULATORS, rows_for(4) == ACCUMULATORS // 4
        (True, True)
    """
    return max(1, ACCUMULATORS // vectors)


def _broadcast(builder: Any, scalar: Any, vector: ir.VectorType) -> Any:
    undef = ir.Constant(vector, ir.Undefined)
    first = builder.insert_element(undef, scalar, ir.Constant(_I32, 0))
    return builder.shuffle_vector(
        first, undef, ir.Constant(ir.VectorType(_I32, vector.count), [0] * vector.count)
    )


def _codegen(rows: int, vectors: int) -> Any:
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        k, s, s_rows, v, v_rows, c, c_rows = args
        vec = ir.VectorType(_F32, LANES)
        fma = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vec, [vec] * 3), f"llvm.fma.v{LANES}f32"
        )
        zero = ir.Constant(vec, [0.0] * LANES)
        acc = [
            [cgutils.alloca_once_value(builder, zero) for _ in range(vectors)] for _ in range(rows)
        ]
        s_base, v_base = (
            builder.inttoptr(s, _F32.as_pointer()),
            builder.inttoptr(v, _F32.as_pointer()),
        )
        with cgutils.for_range(builder, k) as loop:
            v_row = builder.gep(v_base, [builder.mul(loop.index, v_rows)])
            packed = [
                builder.load(
                    builder.bitcast(
                        builder.gep(v_row, [ir.Constant(_I64, j * LANES)]), vec.as_pointer()
                    ),
                    align=4,
                )
                for j in range(vectors)
            ]
            for r in range(rows):
                at = builder.add(builder.mul(ir.Constant(_I64, r), s_rows), loop.index)
                scalar = _broadcast(builder, builder.load(builder.gep(s_base, [at])), vec)
                for j in range(vectors):
                    builder.store(
                        builder.call(fma, [scalar, packed[j], builder.load(acc[r][j])]), acc[r][j]
                    )
        c_base = builder.inttoptr(c, _F32.as_pointer())
        for r in range(rows):
            row = builder.mul(ir.Constant(_I64, r), c_rows)
            for j in range(vectors):
                place = builder.gep(c_base, [builder.add(row, ir.Constant(_I64, j * LANES))])
                builder.store(
                    builder.load(acc[r][j]), builder.bitcast(place, vec.as_pointer()), align=4
                )
        return context.get_dummy_value()

    return codegen


@functools.cache
def tile(rows: int, vectors: int) -> Any:
    """The intrinsic ``tile(k, s, s_rows, v, v_rows, c, c_rows)``: for r < rows and lanes l <
    ``vectors * LANES``, ``c[r * c_rows + l] = sum over i < k of s[r * s_rows + i] * v[i *
    v_rows + l]`` (each a chain of FMAs from +0.0 in order of i), every argument an int64
    (addresses of float32 data, row strides in elements).

    Example:
        >>> import numba, numpy as np
        >>> t = tile(2, 1)
        >>> @numba.njit
        ... def run(s, v, c):
        ...     t(s.shape[1], s.ctypes.data, s.shape[1], v.ctypes.data, v.shape[1], c.ctypes.data,
        ...       c.shape[1])
        >>> s, v = np.ones((2, 3), np.float32), np.ones((3, LANES), np.float32)
        >>> c = np.zeros((2, LANES), np.float32); run(s, v, c); float(c.sum()) == 3 * 2 * LANES
        True
    """

    @intrinsic
    def gemm_tile(
        typingctx: Any, k: Any, s: Any, s_rows: Any, v: Any, v_rows: Any, c: Any, c_rows: Any
    ) -> Any:
        if not all(isinstance(a, types.Integer) for a in (k, s, s_rows, v, v_rows, c, c_rows)):
            return None
        return types.void(*[types.int64] * 7), _codegen(rows, vectors)

    return gemm_tile


def by_vectors(rows: tuple[int, int, int, int]) -> Any:
    """An inlined numba function ``call(vectors, k, s, s_rows, v, v_rows, c, c_rows)`` running
    the tile of ``vectors`` (1-4) vectors and ``rows[vectors - 1]`` rows (``tile``'s arguments
    after ``vectors``): each tile is its own intrinsic, picked by a branch numba can compile.

    Example:
        >>> import numba, numpy as np
        >>> call = by_vectors((2, 2, 1, 1))
        >>> @numba.njit
        ... def run(s, v, c):
        ...     call(1, 3, s.ctypes.data, 3, v.ctypes.data, LANES, c.ctypes.data, LANES)
        >>> s, v = np.ones((2, 3), np.float32), np.ones((3, LANES), np.float32)
        >>> c = np.zeros((2, LANES), np.float32); run(s, v, c); float(c.sum()) == 3 * 2 * LANES
        True
    """
    t1, t2, t3, t4 = (tile(r, v) for v, r in enumerate(rows, start=1))

    @numba.njit(inline="always")
    def call(vectors, k, s, s_rows, v, v_rows, c, c_rows):  # pragma: no cover - runs compiled
        if vectors == 1:
            t1(k, s, s_rows, v, v_rows, c, c_rows)
        elif vectors == 2:
            t2(k, s, s_rows, v, v_rows, c, c_rows)
        elif vectors == 3:
            t3(k, s, s_rows, v, v_rows, c, c_rows)
        else:
            t4(k, s, s_rows, v, v_rows, c, c_rows)

    return call
