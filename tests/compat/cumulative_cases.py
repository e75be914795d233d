"""Compatibility cases of the cumulative ops (issue 40): ``cumsum``/``cumprod`` (with ``dtype=``,
integer and bool inputs, 0-d inputs, in place), ``cummax``/``cummin`` (ties and NaNs move the
index) and ``logcumsumexp`` (large and spread-out values). Each line runs unchanged on torch and
dualflow tensors.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tests.compat.tensor_harness import Case, const, ints, make, normal

X = normal(3, 4)
ZEROS = np.array(
    [[0.5, 0.0, 2.0, -1.5, 3.0], [1.5, -2.0, 0.0, 0.7, 0.0], [0.0, 0.0, 1.2, 2.0, 1.0]]
)
TIES = np.array([[1.0, 3.0, 3.0, 2.0, 3.0], [2.0, 2.0, 1.0, 1.0, 0.5]])
NANS = np.array([[1.0, np.nan, 3.0, np.nan, 0.0], [5.0, 4.0, 6.0, 6.0, np.nan]])


def c(id: str, fn: Any, *makers: Any, **options: Any) -> Case:
    return Case(id, fn, make(*makers), **options)


def _spread(scale: float, offset: float = 0.0) -> Any:
    return lambda rng: rng.normal(size=(3, 6)) * scale + offset


def _cumsum_inplace(L: Any, x: Any) -> Any:
    y = x * 1.0
    y.cumsum_(1)
    return y


def _cumprod_inplace(L: Any, x: Any) -> Any:
    x.cumprod_(-1)
    return x


CUMSUM = [
    c("cumsum_dim1", lambda L, x: x.cumsum(1), X),
    c("cumsum_neg_dim", lambda L, x: x.cumsum(-2), normal(2, 3, 4)),
    c("fn_cumsum_kw", lambda L, x: L.torch.cumsum(x, dim=0), X),
    c("cumsum_dtype", lambda L, x: L.torch.cumsum(x, 1, dtype=L.float32), X, tol=(1e-6, 1e-6)),
    c("cumsum_int32", lambda L, x: x.to(L.torch.int32).cumsum(0), ints(9, 3, 4)),
    c("cumsum_bool", lambda L, x: (x > 0).cumsum(1), X, grad=()),
    c("cumsum_int_to_float", lambda L, x: x.cumsum(1, dtype=L.float64), ints(9, 3, 4)),
    c("cumsum_0d", lambda L, x: L.torch.cumsum(x.sum(), 0) * 2, X),
    c("cumsum_inplace", _cumsum_inplace, X, grad=()),
    c("cumsum_dim_error", lambda L, x: x.cumsum(2), X),
    c("cumsum_no_dim_error", lambda L, x: x.cumsum(), X),
]
CUMPROD = [
    c("cumprod_dim1", lambda L, x: x.cumprod(1), X),
    c("cumprod_zeros", lambda L, x: x.cumprod(1), const(ZEROS)),
    c("cumprod_zeros_dim0", lambda L, x: L.torch.cumprod(x, dim=0), const(ZEROS)),
    c("cumprod_int", lambda L, x: x.cumprod(-1), ints(4, 2, 5, low=-3)),
    c("cumprod_dtype", lambda L, x: x.cumprod(0, dtype=L.float32), X, tol=(1e-6, 1e-6)),
    c("cumprod_0d", lambda L, x: x.sum().cumprod(-1), X),
    c("cumprod_inplace", _cumprod_inplace, X, grad=()),
]
EXTREMES = [
    c("cummax_dim1", lambda L, x: x.cummax(1), X),
    c("cummin_dim0", lambda L, x: L.torch.cummin(x, 0), X),
    c("cummax_fields", lambda L, x: (x.cummax(dim=-1).values, x.cummax(-1).indices), X),
    c("cummax_ties", lambda L, x: x.cummax(1), const(TIES)),
    c("cummin_ties", lambda L, x: x.cummin(1), const(TIES)),
    c("cummax_nan", lambda L, x: L.torch.cummax(x, 1), const(NANS), grad=()),
    c("cummin_nan", lambda L, x: L.torch.cummin(x, 1), const(NANS), grad=()),
    c("cummax_int", lambda L, x: x.cummax(0), ints(5, 4, 3)),
    c("cummin_0d", lambda L, x: x.sum().cummin(0), X),
]
LOGCUMSUMEXP = [
    c("logcumsumexp_dim1", lambda L, x: x.logcumsumexp(1), X),
    c("logcumsumexp_large", lambda L, x: L.torch.logcumsumexp(x, dim=1), _spread(3.0, 1000.0)),
    c("logcumsumexp_spread", lambda L, x: L.torch.logcumsumexp(x, -2), _spread(300.0)),
    c("logcumsumexp_0d", lambda L, x: x.sum().logcumsumexp(0), X),
    c("logcumsumexp_int_error", lambda L, x: x.logcumsumexp(0), ints(5, 4)),
]

CASES = CUMSUM + CUMPROD + EXTREMES + LOGCUMSUMEXP
