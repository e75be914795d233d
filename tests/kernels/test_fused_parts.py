"""Generated numba kernels split big outputs into parts run on both cores: the bits never depend
on the split, for flat, broadcast and in-place (donated) calls."""

from __future__ import annotations

import numpy as np
import pytest

from dualflow.kernels.expr.typed_program import lower_expr
from dualflow.kernels.numba import numba_elementwise

# (x * 0.5 + 1) * (x - y) - x * y: arithmetic only, so numba's kernel
EXPR = (
    "call",
    "subtract",
    (
        "call",
        "multiply",
        ("call", "add", ("call", "multiply", ("var", "a0"), ("const", 0.5)), ("const", 1.0)),
        ("call", "subtract", ("var", "a0"), ("var", "a1")),
    ),
    ("call", "multiply", ("var", "a0"), ("var", "a1")),
)


def _run_both(monkeypatch: pytest.MonkeyPatch, call) -> tuple[np.ndarray, np.ndarray]:
    results = []
    for part_min in (1 << 40, 8):  # one part; then two parts of at least 8 elements
        monkeypatch.setattr(numba_elementwise, "PART_MIN", part_min)
        results.append(call())
    return results[0], results[1]


@pytest.mark.parametrize("y_shape", [(37, 11), (1, 11), (37, 1)], ids=["flat", "row", "col"])
def test_parts_give_the_bits_of_one_part(monkeypatch: pytest.MonkeyPatch, y_shape) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((37, 11)).astype(np.float32)
    y = rng.standard_normal(y_shape).astype(np.float32)
    program = lower_expr(EXPR, ("a0", "a1"), ("float32", "float32"))
    kernel = numba_elementwise.numba_kernel(program, ((37, 11), y_shape), (37, 11))
    one, two = _run_both(monkeypatch, lambda: kernel(np, x, y))
    assert one.tobytes() == two.tobytes()
    with np.errstate(all="ignore"):
        want = (x * np.float32(0.5) + np.float32(1)) * (x - y) - x * y
    assert one.tobytes() == want.tobytes()


def test_in_place_parts_read_each_element_before_writing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(1)
    x0 = rng.standard_normal(1001).astype(np.float32)
    y = rng.standard_normal(1001).astype(np.float32)
    program = lower_expr(EXPR, ("a0", "a1"), ("float32", "float32"))
    kernel = numba_elementwise.numba_kernel(program, ((1001,), (1001,)), (1001,))

    def donated() -> np.ndarray:
        x = x0.copy()
        return kernel(np, x, y, out=x)  # out is input 0's very array

    one, two = _run_both(monkeypatch, donated)
    assert one.tobytes() == two.tobytes() == kernel(np, x0, y).tobytes()
