"""The blocked evaluator computes steps over one-element inputs once (an Adam update's bias
corrections), bit for bit as eager's ufunc calls do, for unchunked, chunked, threaded and
broadcast outputs."""

from __future__ import annotations

import numpy as np
import pytest

from dualflow.kernels.expr.expression import compile_numpy, parse_expr
from dualflow.kernels.expr.typed_program import lower_expr
from dualflow.kernels.fused_cpu import fused_elementwise
from dualflow.kernels.fused_cpu.blocked_invariants import invariant_steps

# Adam's update with bias corrections from one-element float64 state (beta1 ** t, beta2 ** t)
ARGS = ("p", "lr", "b1", "t", "m", "v", "b2")


def _adam() -> tuple:
    """The update as an expression tuple; ``c`` stands for float32(sqrt(1 - b2 ** t))."""
    text = "p - lr / (1 - b1 ** t) * m / (sqrt(v) / c + 1e-8)"
    correction = ("call", "astype", parse_expr("sqrt(1 - b2 ** t)", ARGS), ("const", "float32"))

    def put(e: tuple) -> tuple:
        if e == ("var", "c"):
            return correction
        return (*e[:2], *(put(a) for a in e[2:])) if e[0] == "call" else e

    return put(parse_expr(text, (*ARGS, "c")))


def _inputs(shape: tuple, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    big = [rng.standard_normal(shape).astype(np.float32) for _ in range(3)]
    p, m, v = big[0], big[1], np.abs(big[2])
    scalars = [np.array(1e-3, np.float32), np.array(0.9), np.array(7.0), np.array(0.999)]
    lr, b1, t, b2 = scalars
    return [p, lr, b1, t, m, v, b2]


@pytest.mark.parametrize("shape", [(300,), (3, 700), (1 << 21,)], ids=["small", "rows", "big"])
def test_hoisted_steps_give_eagers_bits(shape: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    expr = _adam()
    arrays = _inputs(shape, 0)
    dtypes = tuple(a.dtype.name for a in arrays)
    program = lower_expr(expr, ARGS, dtypes)
    assert len(invariant_steps(program, frozenset({1, 2, 3, 6}))) >= 4  # both corrections
    monkeypatch.setattr(
        fused_elementwise, "BLOCK", 256
    )  # several chunks (and threads for the big shape)
    kernel = fused_elementwise.blocked_kernel(program, shape, block=256)
    with np.errstate(all="ignore"):
        want = compile_numpy(expr, ARGS, ())(np, *arrays)
    got = kernel(np, *arrays)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    arrays[3] = np.array(8.0)  # the next step: the corrections are computed again, not kept
    with np.errstate(all="ignore"):
        want = compile_numpy(expr, ARGS, ())(np, *arrays)
    assert kernel(np, *arrays).tobytes() == want.tobytes()


def test_a_full_size_input_is_never_hoisted() -> None:
    program = lower_expr(parse_expr("exp(a) * b", ("a", "b")), ("a", "b"), ("float64",) * 2)
    assert invariant_steps(program, frozenset({1})) == frozenset()
    assert invariant_steps(program, frozenset({0})) == frozenset({0})


def test_hoisted_steps_over_a_broadcast_operand_give_eagers_bits() -> None:
    # v (700,) over p, m (3, 700): chunks of broadcast views read the hoisted values as inputs
    expr = _adam()
    arrays = _inputs((3, 700), 1)
    arrays[5] = np.abs(arrays[5][0]).copy()
    program = lower_expr(expr, ARGS, tuple(a.dtype.name for a in arrays))
    kernel = fused_elementwise.blocked_kernel(program, (3, 700), block=256)
    with np.errstate(all="ignore"):
        want = compile_numpy(expr, ARGS, ())(np, *arrays)
    got = kernel(np, *arrays)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
