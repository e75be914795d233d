"""Tensor-method cases of the PyTorch compatibility table: each line runs unchanged on torch and
dualflow tensors (shape, reduction, elementwise, comparison, product, conversion, index and
in-place methods, and the once silently different ones: transpose, max(dim), size, matmul).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tests.compat.tensor_harness import (
    Case,
    distinct,
    ints,
    make,
    mask,
    normal,
    positive,
)

X, Y = normal(3, 4), normal(3, 4)
# A compiled function that returns one of its input tensors itself (x.double() of a float64 x,
# x.to("cpu") are x, as in PyTorch) returns that very tensor, so gradients flow through it.
X3 = normal(2, 3, 4)


def distinct_cols(rows: int, cols: int, k: int) -> Any:
    """Per row, ``k`` distinct column indices (scatter's result is undefined for repeats)."""
    return lambda rng: np.stack([rng.permutation(cols)[:k] for _ in range(rows)]).astype(np.int64)


def c(id: str, fn: Any, *makers: Any, **options: Any) -> Case:
    return Case(id, fn, make(*makers), **options)


def _inplace(id: str, fn: Any, *makers: Any) -> Case:
    return Case(id, fn, make(*makers), grad=())


SHAPE = [
    c("size", lambda L, x: x.size(), X3, compiled=False),
    c("size_dim", lambda L, x: (x.size(1), x.size(-1), x.dim(), x.numel()), X3, compiled=False),
    c("shape", lambda L, x: x.shape, X3, compiled=False),
    c("view", lambda L, x: x.view(4, 3), X),
    c("view_minus1", lambda L, x: x.view(2, -1, 2), X),
    c("view_flat", lambda L, x: x.view(-1), X),
    c("view_as", lambda L, x, y: x.view_as(y), X, normal(12), grad=(0,)),
    c("reshape", lambda L, x: x.reshape((6, 2)), X),
    c("squeeze_all", lambda L, x: x.squeeze(), normal(3, 1, 4, 1)),
    c("squeeze_dim", lambda L, x: x.squeeze(1), normal(3, 1, 4)),
    c("squeeze_not_one", lambda L, x: x.squeeze(0), normal(3, 1, 4)),
    c("unsqueeze", lambda L, x: (x.unsqueeze(0), x.unsqueeze(-1)), X),
    c("flatten", lambda L, x: (x.flatten(), x.flatten(1), x.flatten(0, 1)), X3),
    c("t", lambda L, x: x.t(), X),
    c("T", lambda L, x: x.T, X),
    c("mT", lambda L, x: x.mT, X3),
    c("permute", lambda L, x: (x.permute(2, 0, 1), x.permute((1, 0, 2))), X3),
    c("transpose_2d", lambda L, x: x.transpose(0, 1), X),
    c("transpose_3d", lambda L, x: (x.transpose(-1, -2), x.transpose(0, 2)), X3),
    c("transpose_same", lambda L, x: x.transpose(1, 1), X),
    c("contiguous", lambda L, x: x.t().contiguous(), X),
    c("expand", lambda L, x: (x.expand(3, 4), x.expand(2, 3, -1)), normal(3, 1)),
    c("expand_as", lambda L, x, y: x.expand_as(y), normal(1, 4), Y, grad=(0,)),
    c("narrow", lambda L, x: x.narrow(1, 1, 2), X),
    c("chunk", lambda L, x: x.chunk(3, dim=1), X),
    c("chunk_rows", lambda L, x: x.chunk(2), X),
    c("split_size", lambda L, x: x.split(3, dim=1), X),
    c("split_sizes", lambda L, x: x.split([1, 3], dim=1), X),
    c("unbind", lambda L, x: x.unbind(1), X),
    c("repeat", lambda L, x: (x.repeat(2, 1), x.repeat(2, 1, 2)), normal(2, 3)),
    c("flip", lambda L, x: (x.flip(0), x.flip(0, 1)), X),
]

REDUCE = [
    c("sum", lambda L, x: (x.sum(), x.sum(1), x.sum(dim=(0, 1)), x.sum(0, keepdim=True)), X3),
    c("sum_bool", lambda L, m: (m.sum(), m.sum(1)), mask(3, 4)),
    c("sum_int", lambda L, i: i.sum(0), ints(9, 3, 4)),
    c("mean", lambda L, x: (x.mean(), x.mean(1), x.mean((0, 2), keepdim=True)), X3),
    c("prod", lambda L, x: (x.prod(), x.prod(1), x.prod(0, keepdim=True)), positive(3, 4)),
    c("std", lambda L, x: (x.std(), x.std(1), x.std(1, unbiased=False)), X3),
    c("var", lambda L, x: (x.var(0, keepdim=True), x.var(correction=0), x.var(dim=2)), X3),
    c("max_all", lambda L, x: x.max(), distinct(3, 4)),
    c("max_dim", lambda L, x: x.max(1), distinct(3, 4)),
    c("max_dim_keepdim", lambda L, x: x.max(dim=0, keepdim=True), distinct(3, 4)),
    c("max_unpack", lambda L, x: x.max(1)[1], distinct(3, 4)),
    c("max_values", lambda L, x: x.max(-1).values * 2, distinct(2, 3, 4)),
    c("max_other", lambda L, x, y: x.max(y), distinct(3, 4), Y),
    c("min_dim", lambda L, x: x.min(0), distinct(3, 4)),
    c("min_indices", lambda L, x: x.min(dim=1).indices, distinct(3, 4)),
    c("amax", lambda L, x: (x.amax(1), x.amin((0, 1))), distinct(2, 3, 4)),
    c(
        "argmax",
        lambda L, x: (x.argmax(), x.argmax(1), x.argmax(dim=1, keepdim=True)),
        distinct(3, 4),
    ),
    c("argmin", lambda L, x: (x.argmin(0), x.argmin()), distinct(3, 4)),
    c("all_any", lambda L, m: (m.all(), m.any(1), m.all(dim=1, keepdim=True)), mask(3, 4)),
    c("all_float", lambda L, x: ((x > 0).all(), x.any(0)), X),
    c("norm", lambda L, x: (x.norm(), x.norm(1), x.norm(p=1, dim=1)), X),
    c("norm_more", lambda L, x: (x.norm(float("inf")), x.norm(dim=0, keepdim=True), x.norm(3)), X),
    c("logsumexp", lambda L, x: (x.logsumexp(1), x.logsumexp(0, keepdim=True)), X),
    c("count_nonzero", lambda L, x: (x > 0).count_nonzero(), X, compiled=True),
]

ELEMENTWISE = [
    c("abs_neg", lambda L, x: (x.abs(), x.neg(), -x, abs(x)), X),
    c(
        "sqrt_log",
        lambda L, x: (x.sqrt(), x.rsqrt(), x.log(), x.log1p(), x.reciprocal()),
        positive(3, 4),
    ),
    c("exp_trig", lambda L, x: (x.exp(), x.expm1(), x.sin(), x.cos(), x.erf(), x.square()), X),
    c("activations", lambda L, x: (x.tanh(), x.sigmoid(), x.relu()), X),
    c("sign", lambda L, x: x.sign(), X, grad=()),
    c("pow", lambda L, x: (x.pow(2), x**3, x.pow(0.5)), positive(3, 4)),
    c("pow_tensor", lambda L, x, y: x.pow(y), positive(3, 4), normal(3, 4)),
    c("add_alpha", lambda L, x, y: (x.add(y, alpha=2), x.sub(y, alpha=0.5), x.add(1.5)), X, Y),
    c(
        "mul_div",
        lambda L, x, y: (x.mul(y), x.div(y), x * 2, 2 / y, x.true_divide(y)),
        X,
        positive(3, 4),
    ),
    c(
        "clamp",
        lambda L, x: (x.clamp(-0.5, 0.5), x.clamp(min=0), x.clamp(max=0.2), x.clip(-1, 1)),
        X,
    ),
    c("clamp_tensor", lambda L, x, lo: x.clamp(min=lo), X, normal(4), grad=(0,)),
    c("softmax", lambda L, x: (x.softmax(1), x.log_softmax(0), x.softmax(dim=-1)), X),
    c("maximum", lambda L, x, y: (x.maximum(y), x.minimum(y)), X, Y),
    c(
        "addcmul",
        lambda L, x, y, z: (x.addcmul(y, z, value=0.5), x.addcdiv(y, z, value=2)),
        X,
        Y,
        positive(3, 4),
    ),
    c("lerp", lambda L, x, y: x.lerp(y, 0.3), X, Y),
    c(
        "compare",
        lambda L, x, y: (x.eq(y), x.ne(y), x.lt(y), x.le(y), x.gt(y), x.ge(y)),
        ints(3, 3, 4),
        ints(3, 3, 4),
    ),
    c("compare_scalar", lambda L, x: (x > 0, x <= 0.5, x == x, x.gt(0.1), x.ne(0)), X),
    c("equal", lambda L, x, y: (x.equal(x), x.equal(y)), X, Y, compiled=False),
    c("isnan", lambda L, x: (x.isnan(), x.isinf(), x.isfinite()), X),
    c(
        "logical",
        lambda L, a, b: (a & b, a | b, a ^ b, ~a, a.logical_not(), a.logical_and(b)),
        mask(3, 4),
        mask(3, 4),
    ),
    c("masked_fill", lambda L, x, m: x.masked_fill(m, -1.0), X, mask(3, 4)),
    c("masked_fill_inf", lambda L, x: x.masked_fill(x > 0.5, float("-inf")).softmax(-1), X),
    c("where", lambda L, x, m, y: x.where(m, y), X, mask(3, 4), Y),
    c("matmul", lambda L, x, w: (x.matmul(w), x @ w, x.mm(w)), X, normal(4, 2)),
    c("bmm", lambda L, x, w: (x.bmm(w), x @ w), X3, normal(2, 4, 5)),
    c("mv_dot", lambda L, x, v: (x.mv(v), v.dot(v)), X, normal(4)),
    c("matmul_broadcast", lambda L, x, w: x @ w, X3, normal(4, 2)),
]

CONVERT = [
    c(
        "float",
        lambda L, x: (x.float(), x.double(), x.half().float()),
        X,
    ),
    c("long", lambda L, x: (x.long(), x.int(), x.bool()), normal(3, 4), grad=()),
    c(
        "to_dtype",
        lambda L, x: (x.to(L.float32), x.to(dtype=L.float32), x.to("cpu")),
        X,
    ),
    c("to_tensor", lambda L, x, i: x.to(i), X, ints(3, 2), grad=()),
    c("type_as", lambda L, x, i: i.type_as(x), X, ints(3, 2), grad=()),
    c("clone", lambda L, x: x.clone() * 2, X),
    c("detach", lambda L, x: x.detach() * 2, X),
    c(
        "new",
        lambda L, x: (x.new_zeros((2, 3)), x.new_ones(2, 3), x.new_full((2,), 3.5)),
        X,
        grad=(),
    ),
    c("new_tensor", lambda L, x: x.new_tensor([1, 2]), X, grad=(), compiled=False),
    c("item", lambda L, x: (x[0, 0].item(), x.sum().item(), x.tolist()), X, compiled=False),
    c("getitem", lambda L, x: (x[0], x[:, 1], x[1:, ::2], x[None, 0, ..., -1]), X),
]

INDEX = [
    c("gather", lambda L, x, i: x.gather(1, i), X, ints(4, 3, 6)),
    c("gather_smaller", lambda L, x, i: x.gather(0, i), X, ints(3, 2, 3)),
    c("scatter", lambda L, x, i, s: x.scatter(1, i, s), X, distinct_cols(3, 4, 2), normal(3, 2)),
    c("scatter_value", lambda L, z, i: z.scatter(1, i, 1.0), normal(3, 5), ints(5, 3, 1)),
    c("scatter_add", lambda L, x, i, s: x.scatter_add(0, i, s), X, ints(3, 5, 4), normal(5, 4)),
    c("index_select", lambda L, x, i: (x.index_select(0, i), x.index_select(1, i)), X, ints(3, 5)),
    c("masked_select", lambda L, x, m: x.masked_select(m), X, mask(3, 4), compiled=False),
    c("sort", lambda L, x: (x.sort(1), x.sort(0, descending=True)), distinct(3, 4)),
    c("topk", lambda L, x: (x.topk(2), x.topk(2, dim=0, largest=False)), distinct(3, 4)),
    c("argsort", lambda L, x: x.argsort(1), distinct(3, 4)),
    c("triu_tril", lambda L, x: (x.triu(), x.triu(1), x.tril(-1), L.torch.triu(x, diagonal=2)), X3),
    c(
        "causal_mask",
        lambda L, x: (x + L.torch.triu(x.new_ones(4, 4) * float("-inf"), diagonal=1)).softmax(-1),
        normal(4, 4),
    ),
]

INPLACE = [
    _inplace("fill_", lambda L, x: x.fill_(2.5), X),
    _inplace("zero_", lambda L, x: x.zero_(), X),
    _inplace("add_", lambda L, x, y: x.add_(y, alpha=2).mul_(0.5).sub_(1.0), X, Y),
    _inplace("div_", lambda L, x, y: x.div_(y), X, positive(3, 4)),
    _inplace("clamp_", lambda L, x: x.clamp_(-0.1, 0.2), X),
    _inplace("copy_", lambda L, x, y: x.copy_(y), X, normal(4)),
    _inplace("masked_fill_", lambda L, x, m: x.masked_fill_(m, 0.0), X, mask(3, 4)),
    _inplace("unary_", lambda L, x: x.abs_().sqrt_().exp_().neg_(), X),
    _inplace("addcmul_", lambda L, x, y, z: x.addcmul_(y, z, value=0.5), X, Y, Y),
    _inplace("returns_self", lambda L, x: (x.add_(1.0), x * 1), X),
    _inplace("setitem", lambda L, x: _setitem(x), X),
    _inplace("setitem_mask", lambda L, x: _set_mask(x), X),
    _inplace("setitem_tensor", lambda L, x, y: _set_row(x, y), X, normal(4)),
    _inplace("inplace_then_use", lambda L, x: (x.mul_(2) + 1).sum(), X),
    _inplace("data_", lambda L, x: _via_data(x), X),
]

ERRORS = [
    c("leaf_inplace_error", lambda L, x: x.add_(1.0), X),
    c("matmul_dtype_error", lambda L, x, w: x.float() @ w, X, normal(4, 2)),
    c("linear_dtype_error", lambda L, x, w: L.F.linear(x, w.float()), X, normal(2, 4)),
    c("mm_rank_error", lambda L, x: x.mm(x[0]), X),
]


def _setitem(x: Any) -> Any:
    x[0] = 1.0
    x[:, 1] = -2.0
    x[1:, 2:] = 0.5
    return x


def _set_mask(x: Any) -> Any:
    x[x > 0.5] = 0.0
    return x


def _set_row(x: Any, y: Any) -> Any:
    x[1] = y
    return x


def _via_data(x: Any) -> Any:
    x.data.mul_(3.0)
    x.data[0, 0] = 7.0
    return x


# torch.NAME(...) function forms (L.torch is torch or dualflow)
FUNCTIONS = [
    c(
        "fn_cat_stack",
        lambda L, x, y: (L.torch.cat([x, y], 1), L.torch.stack([x, y]), L.torch.cat((x, y))),
        X,
        Y,
    ),
    c(
        "fn_reduce",
        lambda L, x: (
            L.torch.sum(x, 1),
            L.torch.mean(x, dim=0, keepdim=True),
            L.torch.max(x, 1),
            L.torch.argmax(x),
        ),
        distinct(3, 4),
    ),
    c(
        "fn_elementwise",
        lambda L, x, y: (
            L.torch.clamp(x, min=-0.2),
            L.torch.where(x > y, x, y),
            L.torch.exp(x),
            L.torch.maximum(x, y),
        ),
        X,
        Y,
    ),
    c(
        "fn_products",
        lambda L, x, w: (L.torch.matmul(x, w), L.torch.mm(x, w), L.torch.softmax(x, dim=1)),
        X,
        normal(4, 2),
    ),
    c(
        "fn_shape",
        lambda L, x: (
            L.torch.flatten(x),
            L.torch.transpose(x, 0, 1),
            L.torch.unsqueeze(x, 1),
            L.torch.chunk(x, 2, 1),
        ),
        X,
    ),
    c(
        "fn_index",
        lambda L, x, i: (
            L.torch.gather(x, 1, i),
            L.torch.topk(x, 2).values,
            L.torch.sort(x, 0).indices,
        ),
        distinct(3, 4),
        ints(4, 3, 2),
    ),
]

CASES = SHAPE + REDUCE + ELEMENTWISE + CONVERT + INDEX + INPLACE + FUNCTIONS + ERRORS
