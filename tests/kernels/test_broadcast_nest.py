"""numba kernels over broadcast inputs run a loop nest of C-ordered views (``broadcast_nest``):
bit for bit eager's ufuncs for any broadcast pattern, split in parts or not, written over an
input or not, and compiled for C-ordered arrays (what lets LLVM vectorize the inner loop)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualflow.kernels.expr.expression import compile_numpy
from dualflow.kernels.expr.typed_program import lower_expr
from dualflow.kernels.numba import broadcast_nest, numba_elementwise

# (a0 * 0.5 + a1) * (a2 - a1) - a0: arithmetic only, so numba's kernel; three inputs
EXPR = (
    "call",
    "subtract",
    (
        "call",
        "multiply",
        ("call", "add", ("call", "multiply", ("var", "a0"), ("const", 0.5)), ("var", "a1")),
        ("call", "subtract", ("var", "a2"), ("var", "a1")),
    ),
    ("var", "a0"),
)
ARGS = ("a0", "a1", "a2")


@st.composite
def broadcast_shapes(draw: st.DrawFn) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """An output shape and three input shapes broadcasting to it: input 0 full (it may be
    written over), inputs 1 and 2 with random dims of extent 1 and leading dims dropped."""
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=4)))
    shapes = [shape]
    for _ in range(2):
        dims = [n if draw(st.booleans()) else 1 for n in shape]
        drop = draw(st.integers(0, len(shape)))
        shapes.append(tuple(dims[drop:]))
    return shape, shapes


def _arrays(shapes: list[tuple[int, ...]], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def _eager(arrays: list[np.ndarray]) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(compile_numpy(EXPR, ARGS, ())(np, *arrays))


@settings(max_examples=60, deadline=None)
@given(broadcast_shapes(), st.integers(0, 2**16))
def test_the_nest_gives_eagers_bits(case: tuple, seed: int) -> None:
    shape, shapes = case
    arrays = _arrays(shapes, seed)
    program = lower_expr(EXPR, ARGS, ("float32",) * 3)
    kernel = numba_elementwise.numba_kernel(program, tuple(shapes), shape)
    want = _eager(arrays)
    assert kernel(np, *arrays).tobytes() == want.tobytes()
    donated = arrays[0].copy()  # written over: out is input 0's very array
    assert kernel(np, donated, *arrays[1:], out=donated).tobytes() == want.tobytes()


@pytest.mark.parametrize(
    "shapes",
    [[(6, 5, 4, 3), (1, 5, 1, 1), (4, 3)], [(6, 5, 4, 3), (6, 1, 4, 1), (6, 5, 1, 1)]],
    ids=["bias-and-plane", "alternating"],
)
def test_parts_and_in_place_give_the_bits_of_one_part(
    shapes: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    arrays = _arrays(shapes, 3)
    program = lower_expr(EXPR, ARGS, ("float32",) * 3)
    kernel = numba_elementwise.numba_kernel(program, tuple(shapes), shapes[0])
    want = _eager(arrays)
    for part_min in (1 << 40, 8):  # one part; then parts of rows on both cores
        monkeypatch.setattr(numba_elementwise, "PART_MIN", part_min)
        assert kernel(np, *arrays).tobytes() == want.tobytes()
        donated = arrays[0].copy()
        assert kernel(np, donated, *arrays[1:], out=donated).tobytes() == want.tobytes()


def test_a_bias_over_a_batch_is_a_c_ordered_nest() -> None:
    # tanh(x + b), the bias b (256,) over a batch (64, 256): the views were strided arrays of
    # unknown layout (not vectorized, 44 us against 5 us flat)
    expr = ("call", "tanh", ("call", "add", ("var", "a0"), ("var", "a1")))
    program = lower_expr(expr, ("a0", "a1"), ("float32", "float32"))
    nest = broadcast_nest.collapse([(64, 256), (256,)], (64, 256))
    source, _ = numba_elementwise.render_source(program, None, nest)
    assert "x1 = in1[0, i1]" in source and "x0 = in0[i0, i1]" in source
    x = np.random.default_rng(0).standard_normal((64, 256)).astype(np.float32)
    b = np.linspace(-1, 1, 256, dtype=np.float32)
    kernel = numba_elementwise.numba_kernel(program, ((64, 256), (256,)), (64, 256))
    flat = numba_elementwise.numba_kernel(program, ((64, 256), (64, 256)), (64, 256))
    assert kernel(np, x, b).tobytes() == flat(np, x, np.broadcast_to(b, x.shape).copy()).tobytes()
    compiled = numba_elementwise.load_module(source).kernel
    assert all(sig[1].layout == "C" and sig[2].layout == "C" for sig in compiled.signatures)


def test_dims_read_alike_merge() -> None:
    # NCHW with a per-channel (1, C, 1, 1) operand: H and W merge, N and C do not
    assert broadcast_nest.collapse([(8, 4, 3, 3), (1, 4, 1, 1)], (8, 4, 3, 3)) == (
        (8, 4, 9),
        ((8, 4, 9), (1, 4, 1)),
    )
    # extent-1 dims of the output vanish; a one-element output keeps one dim
    assert broadcast_nest.collapse([(1, 5), (1, 1)], (1, 5)) == ((5,), ((5,), (1,)))
    assert broadcast_nest.collapse([(1, 1), (1,)], (1, 1)) == ((1,), ((1,), (1,)))
