"""Random programs under vmap equal a Python loop: chains of shape, reduction, elementwise and
matmul steps on inputs batched at random dimensions (so the rules meet batch dimensions other
than 0), with a random out_dim, nested in a second vmap; compiled, they equal eager bit for
bit."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import dualflow
from dualflow import func

SETTINGS = settings(max_examples=60, deadline=None)
SHARED = dualflow.tensor(np.random.default_rng(1).normal(size=(4, 4)))

# each step maps one example (a 2-d (4, 4) float64 tensor) to another of the same shape
STEPS = {
    "tanh": lambda x, y: x.tanh(),
    "transpose": lambda x, y: x.T,
    "mul_other": lambda x, y: x * y,
    "add_row": lambda x, y: x + y[0],
    "matmul_shared": lambda x, y: x @ SHARED,
    "shared_matmul": lambda x, y: SHARED @ x,
    "matmul_other": lambda x, y: x @ y.T,
    "vec_matmul": lambda x, y: (x[1] @ y).unsqueeze(0).expand(4, 4),
    "softmax": lambda x, y: x.softmax(dim=0),
    "log_softmax": lambda x, y: x.log_softmax(dim=-1),
    "sum_keep": lambda x, y: x.sum(dim=1, keepdim=True) + x,
    "mean_all": lambda x, y: x - x.mean(),
    "max": lambda x, y: x.max(dim=0).values + x,
    "reshape": lambda x, y: x.reshape(2, 8).flip(0).reshape(4, 4),
    "slice": lambda x, y: dualflow.cat([x[2:], x[:2]], dim=0),
    "stack": lambda x, y: dualflow.stack([x, y], dim=2).sum(2),
    "index": lambda x, y: x[[3, 0, 1, 2]],
    "where": lambda x, y: dualflow.where(x > y, x, y),
}


def _program(names: list[str]) -> Any:
    def run(x: Any, y: Any) -> Any:
        for name in names:
            x = STEPS[name](x, y)
        return x

    return run


def _take(a: np.ndarray, d: int | None, b: int) -> np.ndarray:
    return a if d is None else np.take(a, b, axis=d)


@SETTINGS
@given(
    names=st.lists(st.sampled_from(sorted(STEPS)), min_size=1, max_size=4),
    size=st.integers(1, 3),
    x_dim=st.integers(0, 2),
    y_dim=st.one_of(st.none(), st.integers(0, 2)),
    out_dim=st.integers(-3, 2),
    seed=st.integers(0, 2**16),
)
def test_random_programs_equal_a_loop(
    names: list[str], size: int, x_dim: int, y_dim: int | None, out_dim: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    x = np.moveaxis(rng.normal(size=(size, 4, 4)), 0, x_dim)
    y = (
        rng.normal(size=(4, 4))
        if y_dim is None
        else np.moveaxis(rng.normal(size=(size, 4, 4)), 0, y_dim)
    )
    program = _program(names)
    got = func.vmap(program, in_dims=(x_dim, y_dim), out_dims=out_dim)(
        dualflow.tensor(x), dualflow.tensor(y)
    )
    loop = [
        program(dualflow.tensor(_take(x, x_dim, b)), dualflow.tensor(_take(y, y_dim, b))).numpy()
        for b in range(size)
    ]
    want = np.stack(loop, axis=out_dim)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)


@SETTINGS
@given(
    names=st.lists(st.sampled_from(sorted(STEPS)), min_size=1, max_size=3),
    outer=st.integers(0, 1),
    inner=st.integers(0, 2),
    seed=st.integers(0, 2**16),
)
def test_nested_random_programs_equal_loops(
    names: list[str], outer: int, inner: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2, 3, 4, 4))  # [outer example, inner example, 4, 4]
    placed = np.moveaxis(np.moveaxis(x, 1, 1 + inner), 0, outer)
    y = rng.normal(size=(4, 4))
    program = _program(names)
    mapped = func.vmap(func.vmap(program, in_dims=(inner, None)), in_dims=(outer, None))
    got = mapped(dualflow.tensor(placed), dualflow.tensor(y)).numpy()
    for a in range(2):
        for b in range(3):
            want = program(dualflow.tensor(x[a, b]), dualflow.tensor(y)).numpy()
            np.testing.assert_allclose(got[a, b], want, rtol=1e-10, atol=1e-12)


@settings(max_examples=20, deadline=None)
@given(
    names=st.lists(st.sampled_from(sorted(STEPS)), min_size=1, max_size=4),
    x_dim=st.integers(0, 2),
    y_dim=st.one_of(st.none(), st.integers(0, 2)),
    out_dim=st.integers(-3, 2),
)
def test_random_programs_compiled_equal_eager(
    names: list[str], x_dim: int, y_dim: int | None, out_dim: int
) -> None:
    rng = np.random.default_rng(len(names) * 7 + x_dim)
    x = dualflow.tensor(np.moveaxis(rng.normal(size=(3, 4, 4)), 0, x_dim))
    y_data = rng.normal(size=(4, 4)) if y_dim is None else rng.normal(size=(3, 4, 4))
    y = dualflow.tensor(y_data if y_dim is None else np.moveaxis(y_data, 0, y_dim))
    mapped = func.vmap(_program(names), in_dims=(x_dim, y_dim), out_dims=out_dim)
    compiled = dualflow.compile(mapped, fallback="error")
    want = mapped(x, y).numpy()
    for _ in range(2):  # the trace, then the plan
        np.testing.assert_array_equal(compiled(x, y).numpy(), want)
