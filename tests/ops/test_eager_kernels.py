"""Big eager calls of the selection/comparison ops (``relu``, ``relu_grad``, ``where``,
``maximum``...) run one kernel pass on both cores: bit-equal to the numpy expression they replace,
NaN, infinities and signed zeros included, and the numpy expression still runs for anything else
(strided or broadcast operands, other dtypes, small arrays)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from dualflow.kernels.expr.expression import compile_numpy
from dualflow.kernels.fused_cpu import fused_elementwise
from dualflow.ops.registry import OPS

QUIET_OPS = sorted(
    name
    for name, op in OPS.items()
    if op.kind == "elementwise"
    and op.expr is not None
    and not op.attr_names
    and fused_elementwise.quiet(op.expr)
)
N = fused_elementwise.EAGER_MIN + 3  # not a multiple of anything


def _operand(rng: np.random.Generator, dtype: str, shape: tuple) -> np.ndarray:
    if dtype == "bool":
        return rng.random(shape) < 0.5
    values = rng.standard_normal(shape).astype(dtype)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e30], dtype)
    flat = values.reshape(-1)
    flat[: min(specials.size, flat.size)] = specials[: flat.size]
    return values


def _operands(op_name: str, dtype: str, shape: tuple, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    count = len(OPS[op_name].args)
    kinds = ["bool" if op_name == "where" and k == 0 else dtype for k in range(count)]
    return [_operand(rng, kind, shape) for kind in kinds]


def test_the_quiet_ops_include_the_cnn_ones() -> None:
    assert {"relu", "relu_grad", "where", "maximum", "greater"} <= set(QUIET_OPS)
    assert "add" not in QUIET_OPS and "exp" not in QUIET_OPS  # may warn / transcendental


def test_ops_numpy_runs_slowly_take_the_kernel_from_select_min() -> None:
    # where (a branch per element) and maximum with a constant (relu): numpy's slow loops
    starts = {name: OPS[name].forward.__globals__["_big_size"] for name in QUIET_OPS}
    assert {n for n, size in starts.items() if size == fused_elementwise.SELECT_MIN} == {
        "relu",
        "relu_grad",
        "where",
    }
    assert starts["maximum"] == starts["greater"] == starts["abs"] == fused_elementwise.EAGER_MIN
    assert fused_elementwise.SELECT_MIN < fused_elementwise.EAGER_MIN


@pytest.mark.parametrize("size", ["select", "big"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", QUIET_OPS)
def test_big_eager_calls_are_bit_equal_to_the_numpy_expression(
    name: str, dtype: str, size: str
) -> None:
    op = OPS[name]
    plain = compile_numpy(op.expr, op.args, ())
    n = fused_elementwise.eager_min(op.expr) + 3 if size == "select" else N
    arrays = _operands(name, dtype, (n,), 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # neither path warns
        want = plain(np, *arrays)
        got = op.forward(np, *arrays)
    assert got.dtype == want.dtype and got.shape == want.shape and got.flags.c_contiguous
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))  # bits, -0.0 too


@pytest.mark.parametrize("name", ["relu", "relu_grad", "where"])
def test_every_shape_runs_one_flat_kernel(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # numba compiles per ndim: a 2-D and a 4-D relu share the flat kernel ``cache warm`` builds
    monkeypatch.setattr(fused_elementwise, "_CACHE", {})
    op = OPS[name]
    plain = compile_numpy(op.expr, op.args, ())
    for shape in [
        (fused_elementwise.SELECT_MIN // 16, 32),
        (3, 4, 25, fused_elementwise.SELECT_MIN // 100),
    ]:
        arrays = _operands(name, "float32", shape, 4)
        got, want = op.forward(np, *arrays), plain(np, *arrays)
        assert got.shape == want.shape and got.flags.c_contiguous
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    assert {len(shape) for key in fused_elementwise._CACHE for shape in key[3]} == {1}
    assert len({key[3] for key in fused_elementwise._CACHE}) == 2  # one flat size per call shape


@pytest.mark.parametrize("name", ["relu_grad", "maximum", "where"])
def test_strided_broadcast_small_and_other_dtypes_take_the_numpy_expression(name: str) -> None:
    op = OPS[name]
    plain = compile_numpy(op.expr, op.args, ())
    big = _operands(name, "float32", (N, 2), 1)
    cases = [
        [a[:, 0] for a in big],  # strided
        [a.T for a in big],  # F-ordered
        [big[0], *(a[:1] for a in big[1:])],  # broadcast
        _operands(name, "float32", (100,), 2),  # small
        [a.astype(np.float16) if a.dtype != bool else a for a in _finite(big)],  # float16
    ]
    for arrays in cases:
        got, want = op.forward(np, *arrays), plain(np, *arrays)
        assert got.dtype == want.dtype and got.strides == want.strides
        np.testing.assert_array_equal(got, want)
    assert fused_elementwise.eager_kernel(op.expr, op.args)(*cases[0]) is None


def _finite(arrays: list[np.ndarray]) -> list[np.ndarray]:
    return [np.clip(np.nan_to_num(a), -6e4, 6e4) if a.dtype != bool else a for a in arrays]


@pytest.mark.parametrize("passes", ["O0", "O2"])
def test_a_compiled_relu_step_above_select_min_equals_eager_bit_for_bit(passes: str) -> None:
    # relu and relu_grad at 96x96 (>= SELECT_MIN) run the kernels in eager mode and in the plan's
    # unfused steps (O0); at O2 they are fused: every path gives eager's bits
    import dualflow

    rng = np.random.default_rng(3)
    assert fused_elementwise.SELECT_MIN <= 96 * 96
    x = dualflow.tensor(rng.standard_normal((96, 96)).astype(np.float32))
    x.array[0] = 0.0  # a row of exact zeros: relu_grad's y == 0 case
    w = dualflow.tensor(rng.standard_normal((96, 96)).astype(np.float32), requires_grad=True)

    def step():
        h = dualflow.ops.relu(x @ w)
        return dualflow.grad((h * h).sum(), [w])[0]

    compiled = dualflow.compile(step, passes=passes)
    for _ in range(3):
        got, want = compiled().numpy(), step().numpy()
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
