"""Compatibility cases of the division and rearranging names (``pyops``): ``%``, ``//``,
``remainder``, ``fmod``, ``floor_divide``, ``div(rounding_mode=)`` and their in-place forms on
mixed signs, integers and broadcasting; ``roll``, ``tensor_split``, ``F.adaptive_avg_pool1d``.
Each line runs unchanged on torch and dualflow tensors.

Not here, for documented reasons (docs/design-notes.md, ``pyops``): an integer tensor with a
Python float (numpy's float64 where PyTorch gives float32), integer division by zero (PyTorch
raises, numpy gives 0), and gradients through ``floor_divide`` (PyTorch's backward raises).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tests.compat.tensor_harness import Case, make, normal


def c(id: str, fn: Any, *makers: Any, **options: Any) -> Case:
    return Case(id, fn, make(*makers), **options)


def signed(*shape: int) -> Any:
    """Divisors of both signs, away from 0."""
    return lambda rng: rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)


def wide(*shape: int) -> Any:
    """Dividends spanning several multiples of the divisors, both signs."""
    return lambda rng: rng.uniform(-6.0, 6.0, shape)


def signed_ints(*shape: int, zero: bool = True) -> Any:
    """int64 values in [-9, 9] (without 0 for divisors)."""
    values = [v for v in range(-9, 10) if zero or v]
    return lambda rng: rng.choice(values, shape).astype(np.int64)


def _inplace(method: str, other: Any) -> Any:
    def run(L: Any, x: Any, *rest: Any) -> Any:
        getattr(x, method)(rest[0] if rest else other)
        return x

    return run


DIVISION = [
    c("remainder_fn", lambda L, x, y: L.torch.remainder(x, y), wide(3, 4), signed(3, 4)),
    c("remainder_method_broadcast", lambda L, x, y: x.remainder(y), wide(3, 4), signed(4)),
    c("mod_operator", lambda L, x, y: x % y, wide(2, 3, 4), signed(3, 1)),
    c("mod_scalar", lambda L, x: (x % 1.5, x % -1.5, x % 4), wide(3, 4)),
    # torch has no derivative of remainder(Scalar, Tensor); dualflow's is -floor(a / b)
    c("rmod_scalar", lambda L, y: (2.5 % y, -7.0 % y), signed(3, 4), grad=()),
    c("fmod_fn", lambda L, x, y: L.torch.fmod(x, y), wide(3, 4), signed(3, 4)),
    c("fmod_method_scalar", lambda L, x: (x.fmod(1.5), x.fmod(-2.0)), wide(3, 4)),
    c("fmod_broadcast", lambda L, x, y: x.fmod(y), wide(2, 1, 4), signed(3, 1)),
    c("floordiv_operator", lambda L, x, y: x // y, wide(3, 4), signed(3, 4), grad=()),
    c("floordiv_scalars", lambda L, x: (x // 1.5, x // -2, 7.0 // x), signed(3, 4), grad=()),
    c(
        "floor_divide_fn",
        lambda L, x, y: L.torch.floor_divide(x, y),
        wide(3, 4),
        signed(4),
        grad=(),
    ),
    c("div_floor", lambda L, x, y: x.div(y, rounding_mode="floor"), wide(3, 4), signed(3, 4)),
    c("div_trunc", lambda L, x, y: L.torch.div(x, y, rounding_mode="trunc"), wide(3, 4), signed(4)),
    c("div_trunc_by_zero", lambda L, x: x.div(0.0, rounding_mode="trunc"), wide(2, 3), grad=()),
    c("div_none", lambda L, x, y: x.div(y, rounding_mode=None), wide(3, 4), signed(3, 4)),
    c("div_bad_mode", lambda L, x: x.div(2.0, rounding_mode="round"), wide(3)),
    c(
        "int_remainder_fmod_floordiv",
        lambda L, a, b: (a % b, L.torch.fmod(a, b), a // b, a.remainder(3), a.fmod(-4), a // -4),
        signed_ints(4, 5),
        signed_ints(4, 5, zero=False),
    ),
    c(
        "int_div_modes",
        lambda L, a, b: (a.div(b, rounding_mode="floor"), a.div(b, rounding_mode="trunc")),
        signed_ints(4, 5),
        signed_ints(5, zero=False),
    ),
    c("int_rmod", lambda L, b: (17 % b, -17 // b), signed_ints(6, zero=False)),
    c("remainder_", _inplace("remainder_", 1.5), wide(3, 4), grad=()),
    c("fmod_", _inplace("fmod_", -1.5), wide(3, 4), grad=()),
    c("floor_divide_", _inplace("floor_divide_", None), wide(3, 4), signed(4), grad=()),
    c(
        "int_remainder_",
        _inplace("remainder_", None),
        signed_ints(3, 4),
        signed_ints(4, zero=False),
    ),
]

REARRANGE = [
    c("roll_flat", lambda L, x: x.roll(5), normal(3, 4)),
    c("roll_dim", lambda L, x: L.torch.roll(x, -1, 1), normal(3, 4)),
    c("roll_dims", lambda L, x: x.roll((1, -7), (0, -1)), normal(2, 3, 4)),
    c("roll_zero_and_full", lambda L, x: (x.roll(0, 0), x.roll(3, 0), x.roll(-6, 0)), normal(3, 2)),
    c("roll_ints", lambda L, x: x.roll(2), signed_ints(2, 3)),
    c("roll_misaligned", lambda L, x: x.roll((1, 2)), normal(3, 4)),
    c("roll_dims_mismatch", lambda L, x: x.roll((1, 2), 0), normal(3, 4)),
    c("tensor_split_sections", lambda L, x: x.tensor_split(3), normal(7, 2)),
    c("tensor_split_more_sections", lambda L, x: x.tensor_split(5, dim=1), normal(2, 3)),
    c("tensor_split_indices", lambda L, x: L.torch.tensor_split(x, [1, 4], 1), normal(2, 6)),
    c("tensor_split_odd_indices", lambda L, x: x.tensor_split([-2, 9, 1]), normal(5, 2)),
    c(
        "tensor_split_keywords",
        lambda L, x: (x.tensor_split(sections=2), x.tensor_split(indices=[3])),
        normal(5),
    ),
    c("tensor_split_zero", lambda L, x: x.tensor_split(0), normal(4)),
]

POOLING = [
    c("adaptive_avg_pool1d_uneven", lambda L, x: L.F.adaptive_avg_pool1d(x, 3), normal(2, 3, 7)),
    c("adaptive_avg_pool1d_even", lambda L, x: L.F.adaptive_avg_pool1d(x, 4), normal(2, 3, 8)),
    c("adaptive_avg_pool1d_one", lambda L, x: L.F.adaptive_avg_pool1d(x, 1), normal(2, 5)),
    c("adaptive_avg_pool1d_grow", lambda L, x: L.F.adaptive_avg_pool1d(x, 5), normal(1, 2, 3)),
    c(
        "adaptive_avg_pool1d_module",
        lambda L, x: L.nn.AdaptiveAvgPool1d(3)(x),
        normal(2, 3, 7),
        compiled=False,
    ),
    c("adaptive_avg_pool1d_4d", lambda L, x: L.F.adaptive_avg_pool1d(x, 2), normal(1, 2, 3, 4)),
]

EINSUM = [
    c(
        "einsum_matmul",
        lambda L, a, b: L.torch.einsum("ij,jk->ik", a, b),
        normal(2, 3),
        normal(3, 4),
    ),
    c(
        "einsum_implicit",
        lambda L, a, b: L.torch.einsum("bij,bjk", a, b),
        normal(2, 3, 4),
        normal(2, 4, 5),
    ),
    c(
        "einsum_batch_ellipsis",
        lambda L, a, b: L.torch.einsum("...ij,...kj->...ik", a, b),
        normal(2, 2, 3, 4),
        normal(5, 4),
    ),
    c(
        "einsum_diagonal",
        lambda L, a: (L.torch.einsum("ii->i", a), L.torch.einsum("ii", a)),
        normal(3, 3),
    ),
    c("einsum_outer_list", lambda L, a, b: L.torch.einsum("i,j->ij", [a, b]), normal(3), normal(4)),
    c(
        "einsum_three",
        lambda L, a, b, d: L.torch.einsum("ij,jk,kl->li", a, b, d),
        normal(2, 3),
        normal(3, 4),
        normal(4, 2),
    ),
    c(
        "einsum_sum_and_permute",
        lambda L, a: (L.torch.einsum("abc->", a), L.torch.einsum("abc->cb", a)),
        normal(2, 3, 4),
    ),
    c(
        "einsum_broadcast_one",
        lambda L, a, b: L.torch.einsum("bij,bij->bi", a, b),
        normal(2, 3, 4),
        normal(1, 3, 4),
    ),
    c(
        "einsum_spaces_upper",
        lambda L, a, b: L.torch.einsum("N i , i J -> J N", a, b),
        normal(2, 3),
        normal(3, 4),
    ),
    c(
        "einsum_ints",
        lambda L, a, b: L.torch.einsum("ij,j->i", a, b),
        signed_ints(3, 4),
        signed_ints(4),
    ),
    c("einsum_bad_output", lambda L, a: L.torch.einsum("ij->k", a), normal(2, 3)),
    c("einsum_bad_count", lambda L, a: L.torch.einsum("ijk", a), normal(2, 3)),
    c(
        "einsum_size_mismatch",
        lambda L, a, b: L.torch.einsum("ij,ij->i", a, b),
        normal(2, 3),
        normal(2, 4),
    ),
]

CASES = DIVISION + REARRANGE + POOLING + EINSUM
