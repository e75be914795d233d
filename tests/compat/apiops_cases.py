"""Compatibility cases of the index, repeat, unique, sparse and complex additions (issue 40):
``scatter_``/``scatter_add_``/``index_add(_)``/``scatter_reduce(_)``, ``repeat_interleave``,
``unique``, sparse COO tensors. Each line runs unchanged on torch and dualflow tensors.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tests.compat.tensor_cases import distinct_cols
from tests.compat.tensor_harness import Case, const, distinct, ints, make, normal

X = normal(3, 4)


def c(id: str, fn: Any, *makers: Any, **options: Any) -> Case:
    return Case(id, fn, make(*makers), **options)


def _inplace(id: str, fn: Any, *makers: Any) -> Case:
    return Case(id, fn, make(*makers), grad=())


def distinct_rows(rows: int, cols: int, k: int) -> Any:
    """Per column, ``k`` distinct row indices."""
    return lambda rng: distinct_cols(cols, rows, k)(rng).T.copy()


SCATTER = [
    # torch cannot differentiate src larger than the index (ScatterBackward0 returns its block)
    # torch cannot differentiate a src larger than the index (its backward returns a block)
    c(
        "scatter_big_src",
        lambda L, x, i, s: x.scatter(1, i, s),
        X,
        distinct_cols(3, 4, 2),
        X,
        grad=(0,),
    ),
    c(
        "scatter_add_big_src",
        lambda L, x, i, s: x.scatter_add(0, i, s),
        X,
        ints(3, 2, 4),
        X,
        grad=(0,),
    ),
    c(
        "fn_scatter",
        lambda L, x, i, s: L.torch.scatter(x, 1, i, s),
        X,
        distinct_cols(3, 4, 2),
        normal(3, 2),
    ),
    c(
        "fn_scatter_add",
        lambda L, x, i, s: L.torch.scatter_add(x, 0, i, s),
        X,
        ints(3, 5, 4),
        normal(5, 4),
    ),
    c("index_add", lambda L, x, i, s: x.index_add(0, i, s), X, ints(3, 5), normal(5, 4)),
    c(
        "index_add_dim1",
        lambda L, x, i, s: x.index_add(1, i, s, alpha=-0.5),
        X,
        ints(4, 6),
        normal(3, 6),
    ),
    c(
        "fn_index_add",
        lambda L, x, i, s: L.torch.index_add(x, 1, i, s),
        X,
        ints(4, 2),
        normal(3, 2),
    ),
    c(
        "index_add_int",
        lambda L, x, i, s: x.index_add(0, i, s),
        ints(9, 3, 4),
        ints(3, 5),
        ints(9, 5, 4),
    ),
    c(
        "index_add_dtype_error",
        lambda L, x, i, s: x.index_add(0, i, s.float()),
        X,
        ints(3, 5),
        normal(5, 4),
    ),
    c(
        "index_add_shape_error",
        lambda L, x, i, s: x.index_add(0, i, s),
        X,
        ints(3, 5),
        normal(4, 4),
    ),
]

for _reduce in ("sum", "prod", "mean", "amax", "amin"):
    for _self in (True, False):
        SCATTER.append(
            c(
                f"scatter_reduce_{_reduce}_{'self' if _self else 'noself'}",
                lambda L, x, i, s, r=_reduce, inc=_self: x.scatter_reduce(
                    1, i, s, r, include_self=inc
                ),
                distinct(3, 4),
                ints(4, 3, 5),
                lambda rng: rng.permutation(np.arange(15) * 0.31 + 7.0).reshape(3, 5) - 9.5,
            )
        )
SCATTER += [
    c(
        "scatter_reduce_small_index",
        lambda L, x, i, s: x.scatter_reduce(0, i, s, "amax", include_self=False),
        distinct(4, 3),
        ints(4, 2, 2),
        normal(2, 2),
    ),
    c(
        "fn_scatter_reduce_int_mean",
        lambda L, x, i, s: L.torch.scatter_reduce(x, 0, i, s, "mean"),
        ints(9, 3, 2, low=-9),
        ints(3, 4, 2),
        ints(9, 4, 2, low=-9),
    ),
    c("scatter_reduce_bad", lambda L, x, i: x.scatter_reduce(0, i, x, "median"), X, ints(3, 3, 4)),
]

INPLACE = [
    _inplace("scatter_", lambda L, x, i, s: x.scatter_(1, i, s), X, distinct_cols(3, 4, 2), X),
    _inplace("scatter_value_", lambda L, x, i: x.scatter_(1, i, 2.5), X, distinct_cols(3, 4, 2)),
    _inplace(
        "scatter_add_", lambda L, x, i, s: x.scatter_add_(0, i, s), X, ints(3, 5, 4), normal(5, 4)
    ),
    _inplace(
        "index_add_", lambda L, x, i, s: x.index_add_(1, i, s, alpha=2), X, ints(4, 3), normal(3, 3)
    ),
    _inplace(
        "scatter_reduce_",
        lambda L, x, i, s: x.scatter_reduce_(0, i, s, "amin", include_self=False),
        X,
        ints(3, 5, 4),
        normal(5, 4),
    ),
    _inplace(
        "scatter_reduce_add_",
        lambda L, x, i, s: x.scatter_(0, i, s, reduce="add"),
        X,
        ints(3, 5, 4),
        normal(5, 4),
    ),
    _inplace(
        "scatter_leaf_error",
        lambda L, x, i, s: x.requires_grad_().scatter_(0, i, s),
        X,
        ints(3, 5, 4),
        normal(5, 4),
    ),
]

REPEAT = [
    c(
        "repeat_interleave_int",
        lambda L, x: (x.repeat_interleave(2), x.repeat_interleave(3, dim=1)),
        X,
    ),
    c("repeat_interleave_dim0", lambda L, x: x.repeat_interleave(2, 0), normal(2, 3, 2)),
    c("repeat_interleave_neg_dim", lambda L, x: x.repeat_interleave(2, dim=-1), normal(2, 3, 2)),
    c(
        "repeat_interleave_list",
        lambda L, x: x.repeat_interleave(L.torch.tensor([1, 0, 3]), 0),
        X,
        compiled=False,
    ),
    c(
        "repeat_interleave_tensor",
        lambda L, x, r: x.repeat_interleave(r, dim=1),
        X,
        ints(3, 4),
        compiled=False,
    ),
    c("fn_repeat_interleave", lambda L, x: L.torch.repeat_interleave(x, 2, dim=0), X),
    c(
        "fn_repeat_interleave_counts",
        lambda L, r: L.torch.repeat_interleave(r),
        ints(4, 5),
        compiled=False,
    ),
    c("repeat_interleave_scalar", lambda L, x: x.sum().repeat_interleave(3), X),
    c(
        "repeat_interleave_size_error",
        lambda L, x, r: x.repeat_interleave(r, dim=0),
        X,
        ints(3, 4),
        compiled=False,
    ),
]

UNIQUE = [
    c("unique", lambda L, i: i.unique(), ints(5, 4, 6), compiled=False),
    c(
        "unique_all",
        lambda L, i: i.unique(return_inverse=True, return_counts=True),
        ints(5, 4, 6),
        compiled=False,
    ),
    c(
        "unique_float",
        lambda L, x: L.torch.unique(x, return_inverse=True),
        lambda rng: rng.integers(0, 4, (3, 5)) * 0.5,
        compiled=False,
        grad=(),
    ),
    c(
        "unique_dim",
        lambda L, i: L.torch.unique(i, dim=0, return_inverse=True, return_counts=True),
        lambda rng: rng.integers(0, 2, (6, 2)).astype(np.int64),
        compiled=False,
    ),
    c(
        "unique_dim1",
        lambda L, i: i.unique(dim=1, return_counts=True),
        lambda rng: rng.integers(0, 2, (2, 7)).astype(np.int64),
        compiled=False,
    ),
]

COO = np.array([[0, 2, 1, 0, 2], [1, 3, 0, 1, 0]])  # (0, 1) twice: summed by to_dense/coalesce


def coo(L: Any, values: Any) -> Any:
    return L.torch.sparse_coo_tensor(L.torch.tensor(COO), values, (3, 4))


def other(L: Any, values: Any) -> Any:
    """A sparse tensor with other indices (one shared with ``coo``)."""
    return L.torch.sparse_coo_tensor(L.torch.tensor([[1, 0], [1, 1]]), values[:2] * 3, (3, 4))


def _twice(s: Any) -> Any:
    total = s + s * 2
    return total.to_dense(), total._nnz()


def sparse_zeros(*shape: int) -> Any:
    return lambda rng: rng.standard_normal(shape) * (rng.uniform(size=shape) > 0.6)


SPARSE = [
    c("sparse_to_dense", lambda L, v: coo(L, v).to_dense(), normal(5)),
    c("sparse_mm", lambda L, v, d: L.torch.sparse.mm(coo(L, v), d), normal(5), normal(4, 2)),
    c("spmm", lambda L, v, d: L.torch.spmm(coo(L, v), d), normal(5), normal(4, 3)),
    c("sparse_matmul_op", lambda L, v, d: coo(L, v) @ d, normal(5), normal(4, 2)),
    c(
        "sparse_coalesce",
        lambda L, v: (
            coo(L, v).coalesce().indices(),
            coo(L, v).coalesce().values(),
            coo(L, v)._nnz(),
            coo(L, v).coalesce()._nnz(),
            coo(L, v).is_coalesced(),
        ),
        normal(5),
        compiled=False,
    ),
    c("sparse_raw", lambda L, v: (coo(L, v)._indices(), coo(L, v)._values() * 2), normal(5)),
    c("sparse_values_uncoalesced_error", lambda L, v: coo(L, v).values(), normal(5)),
    c(
        "to_sparse",
        lambda L, x: (x.to_sparse()._indices(), x.to_sparse()._values(), x.to_sparse().to_dense()),
        sparse_zeros(3, 4),
        compiled=False,
    ),
    c(
        "sparse_flags",
        lambda L, x: (x.is_sparse, x.to_sparse().is_sparse, x.to_sparse().is_coalesced()),
        X,
        compiled=False,
        grad=(),
    ),
    c(
        "sparse_infer_size",
        lambda L, v: L.torch.sparse_coo_tensor(L.torch.tensor(COO), v).to_dense(),
        normal(5),
        compiled=False,
    ),
    c(
        "sparse_3d",
        lambda L, v: L.torch.sparse_coo_tensor(
            L.torch.tensor([[0, 1, 1], [2, 0, 0], [1, 1, 1]]), v, (2, 3, 2)
        ).to_dense(),
        normal(3),
    ),
    c("sparse_sum", lambda L, v: L.torch.sparse.sum(coo(L, v)), normal(5)),
    c("dense_matmul_sparse", lambda L, d, v: d @ coo(L, v), normal(2, 3), normal(5)),
    c(
        "sparse_arith",
        lambda L, v, d: (
            (coo(L, v) + coo(L, v * 2)).to_dense(),
            (coo(L, v) + coo(L, v))._nnz(),
            (coo(L, v) + coo(L, v)).is_coalesced(),
            (coo(L, v) + other(L, v))._nnz(),
            (coo(L, v).coalesce() + other(L, v).coalesce())._nnz(),
            (coo(L, v).coalesce() + other(L, v).coalesce()).to_dense(),
            (coo(L, v) * 3)._values(),
            d + coo(L, v),
            (-coo(L, v)).to_dense(),
        ),
        normal(5),
        normal(3, 4),
        compiled=False,  # sparse + sparse reads the indices (unless shared, as below)
    ),
    c("sparse_add_shared", lambda L, v: _twice(coo(L, v)), normal(5)),
    c("sparse_plus_dense_error", lambda L, v, d: coo(L, v) + d, normal(5), normal(3, 4)),
    c(
        "sparse_mm_sparse",
        lambda L, v: (
            L.torch.sparse.mm(coo(L, v), coo(L, v).t()).is_sparse,
            L.torch.sparse.mm(coo(L, v), coo(L, v).t()).to_dense(),
        ),
        normal(5),
        compiled=False,
    ),
]


def rope(L: Any, x: Any, angles: Any) -> Any:
    """Rotary embeddings as LLaMA writes them."""
    freqs = L.torch.polar(L.torch.ones_like(angles), angles)
    pairs = L.torch.view_as_complex(x.reshape(2, 3, 2, 2))
    return L.torch.view_as_real(pairs * freqs).flatten(2)


def parts(L: Any, a: Any, b: Any) -> Any:
    z = L.torch.complex(a, b)
    w = z * z - z / (z + 1.5) + 2 * z.conj() - a
    return (z.abs(), z.angle(), z.real * 1, z.imag * 1, L.torch.view_as_real(w), w.abs())


COMPLEX = [
    c("complex_rope", rope, normal(2, 3, 4), normal(3, 2)),
    c("complex_parts", parts, normal(3, 4), normal(3, 4)),
    c("complex_real_left", lambda L, a, b: (b * L.torch.complex(a, b) - b).abs(), X, normal(3, 4)),
    c(
        "complex_exp_sum",
        lambda L, a, b: (L.torch.view_as_real(L.torch.complex(a, b).exp().sum(1)),),
        X,
        normal(3, 4),
    ),
    c(
        "complex_values",
        lambda L, a, b: (L.torch.complex(a, b) * L.torch.polar(b.abs(), a)).reshape(4, 3)[1:],
        X,
        normal(3, 4),
        compiled=False,
        grad=(),
    ),
    c(
        "complex_angle_axes",
        lambda L, a, b: L.torch.complex(a, b).angle(),
        const(np.array([0.0, -1.0, 0.0, 2.0, -2.0, 0.0])),
        const(np.array([1.0, 0.0, -1.0, 0.0, 3.0, 0.0])),
        grad=(),
    ),
    c("view_as_complex_error", lambda L, x: L.torch.view_as_complex(x), X),
    c("view_as_real_error", lambda L, x: L.torch.view_as_real(x), X),
]

CASES = SCATTER + INPLACE + REPEAT + UNIQUE + SPARSE + COMPLEX
