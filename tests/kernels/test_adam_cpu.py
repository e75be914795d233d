"""Adam's one-pass kernel (kernels/optim/adam.py) and the op running it (``ops.adam_update``):
the composite's bits over drawn sizes, dtypes and hyperparameters, whether the results are new
arrays or the inputs' own (donated), split over the native crew or not; the array-module path
for arrays the kernel does not take; typed errors naming the op; and the optimizers' steps
equal to the composite they replace, eagerly and compiled."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dualflow
from dualflow import nn, ops, optim
from dualflow.errors import DTypeError, ShapeError
from dualflow.kernels.base import crew_ranges, native_crew
from dualflow.kernels.optim import adam

SCALARS = st.tuples(
    st.sampled_from([1.0, 0.999, 0.5]),  # decay
    st.floats(0.01, 0.5),  # 1 - b1
    st.floats(0.9, 0.9999),  # b2
    st.floats(1e-4, 0.1),  # 1 - b2
    st.floats(1e-4, 1.0),  # step size
    st.floats(0.01, 1.0),  # sqrt(1 - b2**t)
    st.sampled_from([1e-8, 1e-3, 0.0]),  # eps
)


def _arrays(rng: np.random.Generator, n: int, dtype: type) -> list[np.ndarray]:
    p, g, m = (rng.standard_normal(n).astype(dtype) for _ in range(3))
    g[: n // 7] = 0.0  # zero gradients: m and v decay, p moves by the old moments alone
    return [p, g, m, rng.uniform(0.0, 2.0, n).astype(dtype)]


def _composite(p, g, m, v, scalars: tuple) -> tuple:
    """The optimizer's composite, numpy rounding every operation in p's dtype."""
    decay, c1, b2, c2, step, root = (p.dtype.type(s) for s in scalars[:6])
    m1 = m + c1 * (g - m)
    v1 = v * b2 + c2 * g * g
    return p * decay - step * m1 / (np.sqrt(v1) / root + p.dtype.type(scalars[6])), m1, v1


@settings(max_examples=60, deadline=None)  # the first examples compile the kernels
@given(
    n=st.integers(0, 3000),
    dtype=st.sampled_from([np.float32, np.float64]),
    scalars=SCALARS,
    in_place=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_the_kernel_has_the_composites_bits(n, dtype, scalars, in_place, seed) -> None:
    arrays = _arrays(np.random.default_rng(seed), n, dtype)
    expected = _composite(*arrays, scalars)
    outs = (arrays[0], arrays[2], arrays[3]) if in_place else (None, None, None)
    results = adam.update(*arrays, scalars, outs)
    for result, want, out in zip(results, expected, outs):
        np.testing.assert_array_equal(result, want)
        assert result.dtype == dtype and (out is None or result is out)


def test_the_crews_split_has_the_same_bits_as_one_call() -> None:
    crew = native_crew.crew()
    if crew is None:
        pytest.skip("no native crew on this platform")
    n, dtype = 100_003, np.dtype(np.float32)
    arrays = _arrays(np.random.default_rng(1), n, np.float32)
    values = np.array([1.0, 0.1, 0.999, 0.001, 0.01, 0.3, 1e-8], np.float32)
    alone = [np.empty(n, np.float32) for _ in range(3)]
    adam._kernel(dtype)(*arrays, *alone, values, 0, n)
    split = [a.copy() for a in (arrays[0], arrays[2], arrays[3])]  # donated: over the inputs
    addresses = [a.ctypes.data for a in (*arrays, *split, values)]
    block = np.array([0, n, n, *addresses], np.int64)
    assert crew_ranges.run(crew, adam._entry(dtype), block)
    for a, b in zip(alone, split):
        np.testing.assert_array_equal(a, b)


def test_arrays_the_kernel_does_not_take_run_the_composite_on_the_array_module() -> None:
    rng = np.random.default_rng(2)
    p, g, m, v = (a.reshape(6, 5) for a in _arrays(rng, 30, np.float32))
    strided = np.asfortranarray(g)  # not C-ordered: the array path
    assert not adam.covers(p, strided, m, v)
    scalars = (0.9, 0.1, 0.999, 0.001, 0.01, 0.3)
    results = ops.adam_update(p, strided, m, v, *scalars, eps=1e-8)
    for result, want in zip(results, _composite(p, g, m, v, (*scalars, 1e-8))):
        np.testing.assert_array_equal(result.numpy(), want)


def test_bad_operands_raise_typed_errors_naming_the_op() -> None:
    one = np.ones(3, np.float32)
    with pytest.raises(ShapeError, match=r"adam_update: m is float32\[2\]"):
        ops.adam_update(one, one, one[:2], one, 1.0, 0.1, 0.9, 0.1, 0.1, 1.0, eps=0.0)
    with pytest.raises(ShapeError, match="adam_update: c1 must be a 0-d float32"):
        ops.adam_update(one, one, one, one, 1.0, one, 0.9, 0.1, 0.1, 1.0, eps=0.0)
    with pytest.raises(DTypeError, match="adam_update: the parameter must be a floating"):
        ops.adam_update(*[np.ones(3, np.int64)] * 4, 1, 0, 0, 0, 0, 1, eps=0.0)


def _train(optimizer: str, one_pass: bool, compiled: bool, monkeypatch) -> list[np.ndarray]:
    import dualflow.optim.adam as adam_module

    if not one_pass:
        monkeypatch.setattr(adam_module, "_one_pass", lambda p, g: False)
    rng = np.random.default_rng(3)
    model = nn.Sequential(nn.Linear(6, 9), nn.Tanh(), nn.Linear(9, 2))
    for k, p in enumerate(model.parameters()):
        p.data[...] = np.random.default_rng(k).standard_normal(p.shape).astype(np.float32)
    opt = {
        "adam": lambda ps: optim.Adam(ps, lr=0.01),
        "adam_l2": lambda ps: optim.Adam(ps, lr=0.01, weight_decay=0.1, maximize=True),
        "adamw": lambda ps: optim.AdamW(ps, lr=0.01, weight_decay=0.1),
    }[optimizer](model.parameters())
    x = dualflow.tensor(rng.standard_normal((5, 6)).astype(np.float32))

    def step():
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    run = dualflow.compile(step) if compiled else step
    for _ in range(4):
        run()
    if compiled:  # the one-pass op is in the plan exactly when the optimizer takes it
        assert ("= adam_update(" in str(dualflow.explain(run))) == one_pass
    state = [opt.state[p][key].numpy() for p in model.parameters() for key in ("exp_avg",)]
    return [p.numpy().copy() for p in model.parameters()] + state


@pytest.mark.parametrize("optimizer", ["adam", "adam_l2", "adamw"])
def test_the_optimizers_step_equals_the_composite_eagerly_and_compiled(optimizer, monkeypatch):
    composite = _train(optimizer, False, False, monkeypatch)
    monkeypatch.undo()
    for compiled in (False, True):
        for got, want in zip(_train(optimizer, True, compiled, monkeypatch), composite):
            np.testing.assert_array_equal(got, want)
