"""Typed programs of fused expressions: memoized by exact keys (issue 39: every plan built for a
new size lowers the same expressions again)."""

from __future__ import annotations

import numpy as np

from dualflow.kernels.expr.typed_program import exact_key, lower_expr


def test_lowering_is_memoized_and_returns_the_same_program() -> None:
    expr = ("call", "add", ("call", "tanh", ("var", "a0")), ("var", "a1"))
    first = lower_expr(expr, ("a0", "a1"), ("float32", float))
    assert lower_expr(expr, ["a0", "a1"], ["float32", float]) is first


def test_constants_equal_in_python_but_not_in_bits_are_kept_apart() -> None:
    # 1 and 1.0 type an int array differently; 0.0 and -0.0 differ in sign
    as_int = lower_expr(("call", "multiply", ("var", "a0"), ("const", 1)), ("a0",), ("int32",))
    as_float = lower_expr(("call", "multiply", ("var", "a0"), ("const", 1.0)), ("a0",), ("int32",))
    assert as_int.dtype == np.int32 and as_float.dtype == np.float64
    within = ("call", "add", ("call", "add", ("var", "a0"), ("const", 0.0)), ("const", -0.0))
    program = lower_expr(within, ("a0",), ("float32",))
    assert [s.operands[1] for s in program.steps] == [("const", 0.0), ("const", -0.0)]
    assert np.signbit(program.steps[1].operands[1][1])
    assert exact_key(np.float32(0.0)) != exact_key(np.float32(-0.0))
    assert exact_key(True) != exact_key(1) != exact_key(1.0)
