"""Eager's fast path (one or two numpy/scalar operands, one output) does what the general path
does: the same result bits and dtype, the same tape node (edges, saves, input shapes), the same
``requires_grad``, and typed errors; elementwise ops whose forward is one ufunc call it directly.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow.autograd.eager import EAGER
from dualflow.errors import ShapeError
from dualflow.ops import OPS
from dualflow.tensor.core import Tensor

_RNG = np.random.default_rng(0)
_X = _RNG.uniform(0.5, 2.0, (3, 4)).astype(np.float32)
_Y = _RNG.uniform(0.5, 2.0, (3, 4)).astype(np.float32)
_ONE_OR_TWO = sorted(
    name
    for name, op in OPS.items()
    if op.kind == "elementwise" and not op.attr_names and len(op.args) in (1, 2)
)


def _operands(op, leaf: bool) -> list[tuple]:
    """Argument tuples for ``op``: tensors (leaves requiring grad, or computed), a Python
    scalar, a raw numpy array."""
    x = dualflow.tensor(_X, requires_grad=leaf)
    y = dualflow.tensor(_Y, requires_grad=True) * 1.0  # a computed input
    if len(op.args) == 1:
        return [(x,), (y,), (_X,)]
    return [(x, y), (y, 1.5), (2, x), (_X, y), (x, True)]


def _node_facts(node) -> tuple:
    if node is None:
        return (None,)
    edges = tuple(e if type(e) is not tuple else (e[0].seq, e[1]) for e in node.edges)
    return (node.op, node.attrs, edges, node.saved_inputs, len(node.saved_outputs), node.in_shapes)


@pytest.mark.parametrize("name", _ONE_OR_TWO)
@pytest.mark.parametrize("leaf", [True, False])
def test_the_fast_path_equals_the_general_one(name: str, leaf: bool) -> None:
    op = OPS[name]
    for args in _operands(op, leaf):
        with np.errstate(all="ignore"):
            fast = EAGER.apply(op, args, {})
            general = EAGER.apply_general(op, args, {})
        assert fast.raw_array.dtype == general.raw_array.dtype and fast.shape == general.shape
        np.testing.assert_array_equal(fast.raw_array, general.raw_array)
        assert fast.requires_grad == general.requires_grad
        assert _node_facts(fast.creator) == _node_facts(general.creator)
        assert _other_slots(fast) == _other_slots(general)  # Tensor.wrap's fields, all set


def _other_slots(t) -> dict:
    # the fast path builds its Tensor without Tensor.wrap: a slot added to Tensor must be set
    # there too (an unset slot raises AttributeError here)
    skip = ("__weakref__", "raw_array", "creator")
    return {s: getattr(t, s) for s in Tensor.__slots__ if s not in skip}


def test_grad_mode_and_integer_results_record_nothing() -> None:
    x = dualflow.tensor(_X, requires_grad=True)
    with dualflow.no_grad():
        assert (x * 2.0).creator is None and not (x * 2.0).requires_grad
    assert (x * 2.0).creator is not None
    greater = EAGER.apply(OPS["greater"], (x, 1.0), {})
    assert greater.creator is None and not greater.requires_grad


def test_a_bad_shape_is_a_typed_error_naming_the_op() -> None:
    x = dualflow.tensor(_X, requires_grad=True)
    with pytest.raises(ShapeError, match="multiply"):
        x * dualflow.tensor(np.ones((5,), np.float32))


def test_ops_that_are_one_ufunc_call_it() -> None:
    assert OPS["multiply"].eager_ufunc is np.multiply and OPS["add"].eager_ufunc is np.add
    assert OPS["tanh"].eager_ufunc is None  # dualflow's float32 loop, not numpy's
    assert OPS["relu"].eager_ufunc is None  # maximum(x, 0): not the ufunc on the inputs alone
    for name, op in OPS.items():
        if op.eager_ufunc is not None:
            args = (_X, _Y)[: len(op.args)]
            with np.errstate(all="ignore"):
                expected, got = op.forward(np, *args), op.eager_ufunc(*args)
            np.testing.assert_array_equal(got, expected, err_msg=name)
