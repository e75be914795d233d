"""Linear algebra: ``matmul`` (batched, broadcasting, numpy's 1-D rules) and ``linear``.

The backward of matmul is two matmuls; 1-D operands are promoted to matrices for it and the
engine's ``sum_to`` undoes batch broadcasting, except for a stack of matrices times one matrix
(a linear layer on sequences), whose weight gradient is one GEMM over every row. The forward
runs through ``kernels.linalg.gemm`` (one GEMM for that case too).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dualflow.errors import DTypeError, ShapeError
from dualflow.kernels.linalg import gemm, thin_gemm
from dualflow.ops.autocast import lower_inputs
from dualflow.ops.broadcasting import broadcast_shapes
from dualflow.ops.dispatch import apply
from dualflow.ops.registry import Meta, primitive
from dualflow.ops.shape import reshape, sum_to, transpose
from dualflow.ops.validate import require_same_float


def _swap_last(x: Any) -> Any:
    ndim = len(x.shape)
    return transpose(x, tuple(range(ndim - 2)) + (ndim - 1, ndim - 2))


def _column_major(x: Any, other: Any, gy: Any) -> bool:
    """Whether 2-D ``x`` is a transposed (column-major) view, e.g. ``linear``'s ``W.T``.

    Its gradient is then computed transposed, so after the transpose's own backward the
    parameter's gradient is row-major like the parameter: elementwise updates of the two stay
    fast instead of mixing memory orders.
    """
    array = getattr(x, "raw_array", None)
    return (
        array is not None
        and array.ndim == 2
        and len(other.shape) == 2
        and len(gy.shape) == 2
        and array.flags.f_contiguous
        and not array.flags.c_contiguous
    )


def _rows(x: Any) -> Any:
    # (..., K) -> (rows, K): every leading axis as rows of one matrix
    return reshape(x, (math.prod(x.shape[:-1]), x.shape[-1]))  # sizes may be expressions


def _weight_grad(a2: Any, b: Any, b2: Any, gy2: Any) -> Any:
    """The gradient of ``a2 @ b2`` wrt ``b2``. A stack of matrices times one 2-D ``b`` gives one
    GEMM over every row (``rows(a)^T rows(gy)``): the batched product summed by ``sum_to``
    costs a (batch, K, N) temporary and runs BLAS once per matrix (2-3x slower on LM steps)."""
    if len(b.shape) == 2 and len(a2.shape) > 2:
        a2, gy2 = _rows(a2), _rows(gy2)
    if _column_major(b, a2, gy2):  # (gy^T a)^T: the gradient keeps b's layout
        return transpose(matmul(transpose(gy2), a2))
    return matmul(_swap_last(a2), gy2)


def _matmul_out(xp: Any, a: Any, b: Any, *, out: Any) -> Any:
    if out.dtype.char == "E":  # ml_dtypes' bfloat16 matmul returns float32: round it here
        out[...] = gemm.matmul(xp, a, b)
        return out
    return gemm.matmul(xp, a, b, out=out)


# BLAS reads its operands while writing: never in place; its result is C-ordered whatever the
# operands' layout, so its out= forward needs no layout check
def _matmul_flops(metas: tuple, attrs: dict) -> int:
    (a, _), (b, _) = metas
    a, b = (1, *a) if len(a) == 1 else a, (*b, 1) if len(b) == 1 else b
    batch = int(np.prod(np.broadcast_shapes(a[:-2], b[:-2]), dtype=np.int64))
    return 2 * batch * a[-2] * a[-1] * b[-1]


def _matmul_scratch(metas: tuple, attrs: dict) -> int:
    # the few-rows routes' temporaries: the tiles' packed x.T (thin_gemm), else the transposed
    # product (gemm.thin_times_transposed); the metas do not say whether b is column-major, so
    # every few-rows 2-D product counts the larger
    (a, dtype_a), (b, dtype_b) = metas
    if len(a) != 2 or len(b) != 2:
        return 0
    dtype = np.result_type(np.dtype(dtype_a), np.dtype(dtype_b))
    transposed = a[0] * b[1] * dtype.itemsize if a[0] <= gemm.thin_rows() else 0
    few = dtype == np.float32 and 1 <= a[0] <= thin_gemm.max_rows()
    return max(transposed, thin_gemm.scratch_bytes(a[0], a[1]) if few else 0)


@primitive(
    "matmul",
    saves=("x0", "x1"),
    autocast="lower",
    aliasing="fresh",
    layout="C",
    out=lambda checked: _matmul_out,
    flops=_matmul_flops,
    scratch=_matmul_scratch,
)
class Matmul:
    """Matrix product with numpy's rules (batched, broadcasting, 1-D promotion)."""

    def infer(a: Meta, b: Meta) -> tuple[Meta]:
        if len(a.shape) == 0 or len(b.shape) == 0:
            raise ShapeError(f"matmul: operands must be at least 1-D, got {a.shape} and {b.shape}")
        sa = (1,) + tuple(a.shape) if len(a.shape) == 1 else tuple(a.shape)
        sb = tuple(b.shape) + (1,) if len(b.shape) == 1 else tuple(b.shape)
        if sa[-1] != sb[-2]:
            raise ShapeError(
                f"matmul: inner dimensions differ: {a.shape} @ {b.shape} ({sa[-1]} != {sb[-2]})"
            )
        try:
            batch = broadcast_shapes(sa[:-2], sb[:-2])
        except ValueError:
            raise ShapeError(
                f"matmul: batch dimensions of {a.shape} and {b.shape} do not broadcast"
            ) from None
        out = tuple(batch) + (sa[-2],) * (len(a.shape) > 1) + (sb[-1],) * (len(b.shape) > 1)
        dtypes = [np.dtype(m.dtype) if not isinstance(m.dtype, type) else m.dtype for m in (a, b)]
        if any(getattr(d, "kind", "f") == "b" for d in dtypes):
            raise DTypeError(f"matmul: boolean operands are not supported ({dtypes})")
        return (Meta(out, np.result_type(*dtypes)),)

    def forward(xp, a, b):
        y = gemm.matmul(xp, a, b)
        return y if y.dtype == a.dtype or a.dtype.char != "E" else y.astype(a.dtype)

    def backward(ctx, gy):
        a, b = ctx.x0, ctx.x1
        a2 = reshape(a, (1, a.shape[0])) if a.ndim == 1 else a
        b2 = reshape(b, (b.shape[0], 1)) if b.ndim == 1 else b
        gy2 = gy
        if a.ndim == 1:
            gy2 = reshape(gy2, gy2.shape[:-1] + (1,) + gy2.shape[-1:] if b.ndim > 1 else (1,))
        if b.ndim == 1:
            gy2 = reshape(gy2, gy2.shape + (1,))
        ga = gb = None
        if ctx.needs_input_grad[0]:
            if _column_major(a, b2, gy2):  # (b gy^T)^T: the gradient keeps a's layout
                ga = transpose(matmul(b2, transpose(gy2)))
            else:
                ga = matmul(gy2, _swap_last(b2))
            if a.ndim == 1:
                ga = reshape(sum_to(ga, (1, a.shape[0])), a.shape)
        if ctx.needs_input_grad[1]:
            gb = _weight_grad(a2, b, b2, gy2)
            if b.ndim == 1:
                gb = reshape(sum_to(gb, (b.shape[0], 1)), b.shape)
        return ga, gb


def matmul(a: Any, b: Any) -> Any:
    """Matrix product ``a @ b`` (numpy semantics).

    Example:
        >>> from dualflow import ops
        >>> ops.matmul([[1.0, 2.0]], [[3.0], [4.0]]).tolist()
        [[11.0]]
    """
    return apply(Matmul, a, b)


def linear(x: Any, weight: Any, bias: Any = None) -> Any:
    """Affine map ``x @ weight.T + bias`` with ``weight`` of shape (out, in) (PyTorch layout).

    As in PyTorch, a floating-point ``x`` must have the weight's dtype (a float64 batch into a
    float32 layer raises ``DTypeError`` instead of silently computing in float64).

    Example:
        >>> from dualflow import ops
        >>> ops.linear([[1.0, 1.0]], [[1.0, 2.0], [3.0, 4.0]], [0.5, 0.5]).tolist()
        [[3.5, 7.5]]
    """
    weight_shape = getattr(weight, "shape", np.shape(weight))
    if len(weight_shape) != 2:
        raise ShapeError(f"linear: weight must be 2-D (out, in), got shape {tuple(weight_shape)}")
    x, weight, bias = lower_inputs(x, weight, bias)  # autocast: the bias too, as PyTorch's
    require_same_float("linear", x, weight, "input", "weight")
    y = matmul(x, transpose(weight))
    return y if bias is None else y + bias
