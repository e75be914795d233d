"""Cases of the PyTorch compatibility table for the names issue 40 added (``tan``, ``atan2``,
``outer``, ``select``, ``diag``, ``F.pad`` modes, ``F.prelu``, ``F.embedding_bag``,
``F.scaled_dot_product_attention``, ``size=`` factories): run by ``test_ported_compat.py``
against ``ported_references.npz`` (``make_tensor_references.py ported``), eagerly and compiled.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tests.compat.tensor_harness import Case, ints, make, normal, positive


def c(id: str, fn: Any, *makers: Any, **options: Any) -> Case:
    return Case(id, fn, make(*makers), **options)


def _axes_with_zeros(rng: np.random.Generator) -> np.ndarray:
    x = rng.standard_normal((3, 4))
    x[0, :2] = 0.0  # atan2's x = 0 (and, against a zero y, the origin: angle and gradient 0)
    return x


def _zeros(rng: np.random.Generator) -> np.ndarray:
    return np.zeros(3)  # +0.0: the signed zeros' +-pi (atan2(0.0, -0.0)) are not matched


def _bag_offsets(rng: np.random.Generator) -> np.ndarray:
    return np.array([0, 2, 2, 5], np.int64)  # bag 1 is empty


def _causal_bool(rng: np.random.Generator) -> np.ndarray:
    keep = rng.uniform(size=(2, 4, 5)) > 0.4
    keep[..., 0] = True  # every query keeps one key
    return keep


X = normal(3, 4)


def _bias_with_masked_row(rng: np.random.Generator) -> np.ndarray:
    bias = np.where(rng.uniform(size=(3, 3)) < 0.3, -np.inf, rng.standard_normal((3, 3)))
    bias[:, 0] = 0.0
    bias[1] = -np.inf  # query 1 sees no key: PyTorch gives it zeros
    return bias


MATH = [
    c("tan", lambda L, x: (L.torch.tan(x), x.tan()), normal(3, 4)),
    c("arctan", lambda L, x: (L.torch.arctan(x * 3), L.torch.atan(x), x.arctan(), x.atan()), X),
    c(
        "atan2",
        lambda L, y, x: (L.torch.atan2(y, x), L.torch.arctan2(x, y), y.atan2(x)),
        normal(3, 4),
        _axes_with_zeros,
    ),
    c("atan2_broadcast", lambda L, y, x: L.torch.atan2(y, x), normal(3, 1), normal(4)),
    c("atan2_origin", lambda L, y, x: L.torch.atan2(y, x), _zeros, _zeros),
    c("outer", lambda L, a, b: (L.torch.outer(a, b), a.outer(b)), normal(3), normal(4)),
    c("outer_2d_refused", lambda L, a, b: L.torch.outer(a, b), normal(2, 2), normal(4)),
    c("select", lambda L, x: (x.select(1, 2), L.torch.select(x, -1, -1), x.select(0, 0)), X),
    c("select_out_of_range", lambda L, x: x.select(1, 4), X),
    c(
        "diag_vector",
        lambda L, v: (L.torch.diag(v), v.diag(1), L.torch.diag(v, diagonal=-2)),
        normal(3),
    ),
    c(
        "diag_matrix",
        lambda L, m: (m.diag(), L.torch.diag(m, 2), m.diag(-1), m.diag(5)),
        normal(3, 4),
    ),
    c("diag_3d_refused", lambda L, m: m.diag(), normal(2, 2, 2)),
    c("eye", lambda L: (L.torch.eye(3), L.torch.eye(2, 4), L.torch.eye(3, dtype=L.long))),
    c(
        "factories_size_keyword",
        lambda L: (
            L.torch.zeros(size=(2, 3)),
            L.torch.ones(size=(2,), dtype=L.float64),
            L.torch.empty(size=(1, 2)).shape,
            L.torch.full(size=(2,), fill_value=1.5),
            L.torch.rand(size=(3, 2)).shape,
            L.torch.randn(size=(4,)).shape,
            L.torch.randint(0, 5, size=(2, 2)).shape,
            L.torch.randint(5, size=(3,)).dtype == L.long,
        ),
    ),
    c(
        "new_factories_size_keyword",
        lambda L, x: (
            x.new_zeros(size=(2, 3)),
            x.new_ones(size=(2,)),
            x.new_empty(size=(1, 2)).shape,
            x.new_full(size=(2,), fill_value=2.5),
        ),
        normal(2),
        grad=(),
    ),
]

FUNCTIONAL = [
    c("prelu_scalar", lambda L, x, w: L.F.prelu(x, w), normal(2, 3, 4), positive(1)),
    c("prelu_channels", lambda L, x, w: L.F.prelu(x, w), normal(2, 3, 4), positive(3)),
    c("prelu_1d_input", lambda L, x, w: L.F.prelu(x, w), normal(3), positive(3)),
    c("prelu_wrong_channels", lambda L, x, w: L.F.prelu(x, w), normal(2, 3, 4), positive(2)),
    c(
        "pad_modes",
        lambda L, x: (
            L.F.pad(x, (2, 1, 1, 2), mode="reflect"),
            L.F.pad(x, (3, 0, 0, 1), mode="replicate"),
            L.F.pad(x, (1, 2, 2, 1), mode="circular"),
            L.F.pad(x, (1, 1, 0, 2), value=0.5),
        ),
        normal(2, 3, 4, 5),
    ),
    c("pad_reflect_too_wide", lambda L, x: L.F.pad(x, (3, 0), mode="reflect"), normal(1, 2, 3)),
    c("pad_circular_twice", lambda L, x: L.F.pad(x, (0, 4), mode="circular"), normal(1, 2, 3)),
    c("pad_rank_mismatch", lambda L, x: L.F.pad(x, (1, 1), mode="replicate"), normal(1, 2, 3, 3)),
    c(
        "pad_widest",
        lambda L, x: (L.F.pad(x, (2, 2), mode="reflect"), L.F.pad(x, (3, 3), mode="circular")),
        normal(2, 3),
    ),
    c(
        "dropout1d_dropout3d_eval",
        lambda L, x: (
            L.F.dropout1d(x, 0.5, training=False),
            L.F.dropout3d(x.reshape(1, 2, 3, 4), 0.3, training=False),
            L.F.dropout3d(x.reshape(1, 1, 2, 3, 4), 0.0),
        ),
        normal(2, 3, 4),
    ),
    c("dropout1d_refuses_4d", lambda L, x: L.F.dropout1d(x, 0.5), normal(2, 2, 2, 2)),
    c(
        "embedding_bag_offsets_sum",
        lambda L, ids, w, off, psw: (
            L.F.embedding_bag(ids, w, off, mode="sum"),
            L.F.embedding_bag(ids, w, off, mode="sum", per_sample_weights=psw),
        ),
        ints(6, 7),
        normal(6, 3),
        _bag_offsets,
        positive(7),
    ),
    c(
        "embedding_bag_offsets_mean_max",
        lambda L, ids, w, off: (
            L.F.embedding_bag(ids, w, off, mode="mean"),
            L.F.embedding_bag(ids, w, off, mode="max"),
            L.F.embedding_bag(ids, w, off, mode="mean", include_last_offset=True),
        ),
        ints(6, 7),
        normal(6, 3),
        _bag_offsets,
    ),
    c(
        "embedding_bag_2d",
        lambda L, ids, w: (
            L.F.embedding_bag(ids, w),
            L.F.embedding_bag(ids, w, mode="max"),
            L.F.embedding_bag(ids, w, mode="sum", padding_idx=1),
            L.F.embedding_bag(ids, w, mode="mean", padding_idx=2),
        ),
        ints(5, 3, 4),
        normal(5, 2),
    ),
    c(
        "embedding_bag_weights_need_sum",
        lambda L, ids, w, psw: L.F.embedding_bag(ids, w, mode="mean", per_sample_weights=psw),
        ints(5, 2, 3),
        normal(5, 2),
        positive(2, 3),
    ),
    c(
        "sdpa",
        lambda L, q, k, v: (
            L.F.scaled_dot_product_attention(q, k, v),
            L.F.scaled_dot_product_attention(q, k, v, scale=0.3),
        ),
        normal(2, 4, 3),
        normal(2, 5, 3),
        normal(2, 5, 2),
    ),
    c(
        "sdpa_causal",
        lambda L, q, k, v: L.F.scaled_dot_product_attention(q, k, v, is_causal=True),
        normal(2, 2, 4, 3),
        normal(2, 2, 4, 3),
        normal(2, 2, 4, 3),
    ),
    c(
        "sdpa_masks",
        lambda L, q, k, v, keep, bias: (
            L.F.scaled_dot_product_attention(q, k, v, attn_mask=keep),
            L.F.scaled_dot_product_attention(q, k, v, attn_mask=bias),
        ),
        normal(2, 4, 3),
        normal(2, 5, 3),
        normal(2, 5, 2),
        _causal_bool,
        normal(4, 5),
        grad=(0, 1, 2, 4),
    ),
    c(
        "sdpa_fully_masked_rows",
        lambda L, q, keep, bias: (
            L.F.scaled_dot_product_attention(q, q, q, attn_mask=keep),
            L.F.scaled_dot_product_attention(q, q, q, attn_mask=bias),
        ),
        normal(2, 3, 4),
        lambda rng: np.array([[True, False, True], [False, False, False], [True, True, True]]),
        _bias_with_masked_row,
        grad=(0,),
    ),
    c(
        "sdpa_grouped_query_heads",
        lambda L, q, k, v: L.F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
        normal(2, 6, 4, 3),
        normal(2, 2, 5, 3),
        normal(2, 2, 5, 2),
    ),
    c(
        "sdpa_dropout_zero",
        lambda L, q: L.F.scaled_dot_product_attention(q, q, q, dropout_p=0.0),
        normal(3, 2),
    ),
]

CASES = MATH + FUNCTIONAL
