"""``einsum``: random equations equal numpy's ``einsum``, compiled equals eager (also with
symbolic sizes), gradients, and typed errors naming the equation. (Against PyTorch:
tests/compat/pyops_cases.py.)"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dualflow
from dualflow.errors import ShapeError
from dualflow.tensor.einsum import einsum, parse

SIZES = {"a": 2, "b": 3, "c": 4, "d": 2, "e": 3}


@st.composite
def _equations(draw: st.DrawFn) -> tuple[str, list[np.ndarray]]:
    """1-3 operands over labels a-e (repeats within an operand included), explicit or implicit
    output, sometimes a leading ``...`` of shape (2,)."""
    count = draw(st.integers(1, 3))
    terms = [draw(st.text("abcde", min_size=0, max_size=3)) for _ in range(count)]
    used = sorted(set("".join(terms)))
    ellipsis = draw(st.booleans())
    rng = np.random.default_rng(draw(st.integers(0, 1000)))
    arrays = [
        rng.normal(size=((2,) if ellipsis else ()) + tuple(SIZES[c] for c in t)) for t in terms
    ]
    inputs = ",".join(("..." if ellipsis else "") + t for t in terms)
    if draw(st.booleans()):
        out = draw(st.permutations(used))[: draw(st.integers(0, len(used)))]
        return f"{inputs}->{'...' if ellipsis else ''}{''.join(out)}", arrays
    return inputs, arrays


@settings(max_examples=60, deadline=None)
@given(case=_equations())
def test_random_equations_equal_numpy(case: tuple[str, list[np.ndarray]]) -> None:
    equation, arrays = case
    got = einsum(equation, *[dualflow.tensor(a) for a in arrays])
    np.testing.assert_allclose(got.numpy(), np.einsum(equation, *arrays), rtol=1e-10, atol=1e-12)


def test_gradients_equal_numpys_adjoint() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 3, 3)), rng.normal(size=(3, 4))
    ta, tb = dualflow.tensor(a, requires_grad=True), dualflow.tensor(b, requires_grad=True)
    cot = rng.normal(size=(2, 3, 4))
    (einsum("bii,ik->bik", ta, tb) * dualflow.tensor(cot)).sum().backward()
    eye = np.eye(3)
    np.testing.assert_allclose(ta.grad.numpy(), np.einsum("bik,ik,ij->bij", cot, b, eye))
    np.testing.assert_allclose(tb.grad.numpy(), np.einsum("bik,bii->ik", cot, a))


def _attention(q, k, v):
    scores = dualflow.einsum("bqd,bkd->bqk", q, k).softmax(-1)
    return dualflow.einsum("bqk,bkd->bqd", scores, v)


@pytest.mark.parametrize("dynamic", [False, True])
def test_compiled_equals_eager_at_every_length(dynamic: bool) -> None:
    fn = dualflow.compile(_attention, dynamic=dynamic)
    rng = np.random.default_rng(1)
    for length in (5, 8, 5, 11):
        q, k, v = (
            dualflow.tensor(rng.normal(size=(2, length, 4)).astype(np.float32)) for _ in "qkv"
        )
        np.testing.assert_array_equal(fn(q, k, v).numpy(), _attention(q, k, v).numpy())
    assert fn.stats().eager_fallbacks == 0
    if dynamic:
        assert fn.stats().traces == 2


def test_parse_spreads_the_ellipsis_from_the_right() -> None:
    assert parse("...i,...->...", [(2, 3, 4), (3,)]) == (["01i", "1"], "01")
    assert parse("ba,a", [(2, 3), (3,)]) == (["ba", "a"], "b")


@pytest.mark.parametrize(
    ("equation", "shapes", "message"),
    [
        ("ij->k", [(2, 3)], r"einsum\('ij->k'\): output labels \['k'\]"),
        ("ijk", [(2, 3)], "names 3 dims of an operand with 2"),
        ("ij,jk", [(2, 3)], "2 operand terms for 1 operands"),
        ("i....j", [(2, 3)], "one '...' only"),
        ("i1", [(2, 3)], "labels are letters"),
        ("ij,ij->i", [(2, 3), (2, 4)], "label 'j' has sizes 3 and 4"),
    ],
)
def test_bad_equations_raise_shape_errors(equation: str, shapes: list, message: str) -> None:
    with pytest.raises(ShapeError, match=message):
        einsum(equation, *[dualflow.zeros(*s) for s in shapes])
