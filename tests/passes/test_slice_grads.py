"""slice_grads: summed gradients of slices that tile an axis become one ``sum_slice_grads``, bit
for bit, reading a piece's gradient through the reshape that made it where nothing else uses it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dualflow as df
from dualflow.graph_ir import GraphBuilder
from dualflow.passes.slice_grads import slice_grads

_SPECIAL = np.array([-0.0, 0.0, np.inf, -np.inf, np.nan, 1.5, -2.25], np.float32)


def _upstream(rng, shape):
    values = rng.standard_normal(shape).astype(np.float32)
    mask = rng.random(shape) < 0.3
    values[mask] = rng.choice(_SPECIAL, size=int(mask.sum()))
    return values


def _grads(compiled, shape, axis, sizes, seed):
    rng = np.random.default_rng(seed)
    x = df.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
    ups = [
        df.tensor(_upstream(rng, p.shape))
        for p in np.split(np.zeros(shape), np.cumsum(sizes)[:-1], axis)
    ]

    def step(x):  # the gradient itself, not accumulated into x.grad (which adds to zeros)
        pieces = x.split(sizes, axis)
        total = sum(((p * u).sum() for p, u in zip(pieces, ups)), df.zeros(()))
        return df.grad(total, [x])[0]

    fn = df.compile(step, passes=compiled) if compiled else step
    return fn(x).numpy(), fn


@settings(max_examples=40, deadline=None)
@given(
    rank=st.integers(1, 3),
    data=st.data(),
    compiled=st.sampled_from(["exact", "O2"]),
    seed=st.integers(0, 2**16),
)
def test_split_gradients_are_eager_s_bits(rank, data, compiled, seed) -> None:
    shape = tuple(data.draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    axis = data.draw(st.integers(0, rank - 1))
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, shape[axis] - 1)), max_size=3)))
    cuts = [c for c in cuts if 0 < c < shape[axis]]
    sizes = [b - a for a, b in zip([0, *cuts], [*cuts, shape[axis]])]
    want, _ = _grads(None, shape, axis, sizes, seed)
    got, _ = _grads(compiled, shape, axis, sizes, seed)
    assert got.tobytes() == want.tobytes()  # -0.0 and NaN payloads included


def test_the_transformer_projection_split_becomes_one_op() -> None:
    _, fn = _grads("exact", (6, 2, 12), 2, [4, 4, 4], 0)
    ops = [n.op for n in fn.history[-1].graph.nodes]
    assert "getitem_grad" not in ops and "sum_slice_grads" in ops


def _heads(compiled, seed, reuse=False):
    # attention's q/k/v: a packed (L, N, 3E) projection split, each piece's heads a strided
    # view (N*H, L, hd); their gradients come back transposed and reshaped to (L, N, E)
    rng = np.random.default_rng(seed)
    x = df.tensor(rng.standard_normal((5, 2, 12)).astype(np.float32), requires_grad=True)
    ups = [df.tensor(_upstream(rng, (4, 5, 2))) for _ in range(3)]

    def step(x):
        total = df.zeros(())
        for piece, up in zip(x.split([4, 4, 4], 2), ups):
            heads = piece.reshape(5, 4, 2).transpose(0, 1)  # N*H = 4 heads of hd = 2
            total = total + (heads * up).sum()
            if reuse:
                total = total + (heads * heads).sum()
        return df.grad(total, [x])[0]

    fn = df.compile(step, passes=compiled) if compiled else step
    return fn(x).numpy(), fn


@pytest.mark.parametrize("compiled", ["exact", "O2"])
@pytest.mark.parametrize("reuse", [False, True])
def test_head_split_gradients_are_read_through_their_reshape(compiled, reuse) -> None:
    for seed in range(4):
        want, _ = _heads(None, seed, reuse)
        got, fn = _heads(compiled, seed, reuse)
        assert got.tobytes() == want.tobytes()
    (node,) = [n for n in fn.history[-1].graph.nodes if n.op == "sum_slice_grads"]
    assert node.attrs["shapes"] == ((5, 2, 4),) * 3
    assert [v.shape for v in node.inputs] == [(5, 4, 2)] * 3  # before the reshape


def test_a_reshape_used_elsewhere_stays() -> None:
    b = GraphBuilder("f")
    wide = b.input((3, 4), "float32")
    (piece,) = b.node("reshape", [wide], {"shape": (4, 3)})
    other = b.input((4, 3), "float32")
    index = ((None, None, None), (0, 3, 1)), ((None, None, None), (3, 6, 1))
    (ga,) = b.node("getitem_grad", [piece], {"index": index[0], "shape": (4, 6)})
    (gb,) = b.node("getitem_grad", [other], {"index": index[1], "shape": (4, 6)})
    b.output(*b.node("add", [ga, gb]), piece)
    graph = slice_grads(b.build())
    assert [n.op for n in graph.nodes] == ["reshape", "sum_slice_grads"]
    assert graph.nodes[-1].inputs[0] is piece


def _graph(pieces, shape=(4, 6), adder=None):
    b = GraphBuilder("f")
    grads = []
    for start, stop in pieces:
        g = b.input((shape[0], stop - start), "float32")
        index = ((None, None, None), (start, stop, 1))
        grads.extend(b.node("getitem_grad", [g], {"index": index, "shape": shape}))
    if adder is not None:
        grads.append(b.input(shape, "float32"))
    total = grads[0]
    for g in grads[1:]:
        (total,) = b.node("add", [total, g])
    b.output(total)
    return b.build()


@pytest.mark.parametrize(
    "pieces, adder",
    [
        ([(0, 3), (4, 6)], None),  # a gap: that part of the sum is zeros
        ([(0, 4), (2, 6)], None),  # overlapping pieces add up
        ([(0, 6)], None),  # one piece: nothing to join
    ],
)
def test_sums_that_are_not_a_tiling_stay(pieces, adder) -> None:
    graph = _graph(pieces, adder=adder)
    assert slice_grads(graph) is graph


def test_a_tiling_inside_a_larger_sum_becomes_one_op_added_to_the_rest() -> None:
    graph = slice_grads(_graph([(0, 3), (3, 6)], adder=True))
    assert [n.op for n in graph.nodes] == ["sum_slice_grads", "add"]


def test_a_tiling_in_any_order_becomes_one_op_in_axis_order() -> None:
    graph = slice_grads(_graph([(4, 6), (0, 1), (1, 4)]))
    joined = graph.nodes[-1]
    assert joined.op == "sum_slice_grads"
    assert joined.attrs == {"axis": 1, "shapes": ((4, 1), (4, 3), (4, 2))}
    widths = [v.shape[1] for v in joined.inputs]
    assert widths == [1, 3, 2]


def test_integer_pieces_are_refused_with_a_dtype_error() -> None:
    from dualflow import ops
    from dualflow.errors import DTypeError

    with pytest.raises(DTypeError, match="sum_slice_grads"):
        ops.sum_slice_grads([np.arange(2), np.arange(2)], 0, [(2,), (2,)])
