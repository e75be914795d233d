"""Op-table entries for getitem (basic and integer-array), its scatter ops, flip and pad."""

from __future__ import annotations

import numpy as np

from dualflow import ops
from tests.opinfo import OpInfo, Sample

_ALL = slice(None)

# (input shape, index): basic indexing (ints, slices incl. negative steps, None, Ellipsis).
_BASIC = [
    ((3, 4), (slice(1, None), None, slice(None, None, -1))),
    ((3, 4, 5), (1, _ALL, slice(None, None, -2))),
    ((2, 3, 4), (Ellipsis, 1)),
    ((2, 3, 4), (0, Ellipsis, None)),
    ((3, 4), (-1, 2)),
    ((5,), slice(-2, 0, -1)),
    ((3, 4), (None, Ellipsis, None)),
]

# Integer-array indexing: repeated indices, mixed basic + advanced, separated advanced indices
# (numpy moves their dimensions first), broadcasting arrays, negative values, boolean masks.
_ARRAYS = [
    ((3, 4), [0, 0, 2]),
    ((3, 4), ([0, 2, 2], slice(None, None, -1))),
    ((3, 4), (_ALL, np.array([[0, 1], [1, 1]]))),
    ((2, 3, 4), (0, _ALL, [0, 1, 1])),
    ((2, 3, 4), ([0, 1], None, [1, 1])),
    ((2, 3, 4), (np.array([[1], [0]]), _ALL, np.array([3, -1, 3]))),
    ((2, 3, 4), (Ellipsis, [1, 0, 1])),
    ((3, 4), np.array([[True, False, True, False], [False] * 4, [True] * 4])),
    ((3, 4), (_ALL, np.array([False, True, True, False]))),
]


def _shape_samples(cases: list, rng: np.random.Generator) -> list[Sample]:
    return [Sample((rng.normal(size=s), index), name=f"{s}[{index!r}]") for s, index in cases]


def _grad_samples(cases: list, rng: np.random.Generator) -> list[Sample]:
    out = []
    for shape, index in cases:
        gy = rng.normal(size=np.empty(shape)[index].shape)
        out.append(Sample((gy, shape, index), name=f"{shape}[{index!r}]"))
    return out


def _scatter_ref(gy: np.ndarray, shape: tuple, index: object) -> np.ndarray:
    gx = np.zeros(shape)
    np.add.at(gx, index, gy)
    return gx


def _tensor_index_samples(rng: np.random.Generator) -> list[Sample]:
    # Index arrays as positional inputs: the forward test passes them as integer Tensors.
    return [
        Sample((rng.normal(size=(3, 4)), np.array([2, 0, 2])), name="one"),
        Sample(
            (rng.normal(size=(3, 4, 5)), np.array([[1], [1]]), np.array([0, 4, -1])), name="two"
        ),
    ]


def _tensor_index(x: object, i: object, j: object = None) -> object:
    return ops.getitem(x, (i, _ALL) if j is None else (i, _ALL, j))


def _tensor_index_ref(x: np.ndarray, i: np.ndarray, j: np.ndarray | None = None) -> np.ndarray:
    return x[(i, _ALL) if j is None else (i, _ALL, j)]


def _pad_samples(mode: str) -> object:
    widths = [((4,), 2), ((3, 4), (1, 2)), ((2, 3), ((0, 1), (2, 0))), ((2,), ((5, 4),))]

    def make(rng: np.random.Generator) -> list[Sample]:
        out = [Sample((rng.normal(size=s), w), {"mode": mode}, name=f"{s}/{w}") for s, w in widths]
        if mode == "constant":
            out.append(Sample((rng.normal(size=(2, 2)), 1), {"constant_values": 1.5}, name="1.5"))
        return out

    return make


ENTRIES = [
    OpInfo(
        "getitem",
        ops.getitem,
        lambda x, index: x[index],
        lambda rng: _shape_samples(_BASIC, rng),
    ),
    OpInfo(
        "getitem_grad",
        ops.getitem_grad,
        _scatter_ref,
        lambda rng: _grad_samples(_BASIC, rng),
    ),
    OpInfo(
        "getitem_array",
        ops.getitem,
        lambda x, index: x[index],
        lambda rng: _shape_samples(_ARRAYS, rng),
    ),
    OpInfo(
        "getitem_array[tensor-index]",
        _tensor_index,
        _tensor_index_ref,
        _tensor_index_samples,
        ops=("getitem_array",),
    ),
    OpInfo(
        "getitem_array_grad",
        ops.getitem_grad,
        _scatter_ref,
        lambda rng: _grad_samples(_ARRAYS, rng),
    ),
    OpInfo(
        "flip",
        ops.flip,
        np.flip,
        lambda rng: [
            Sample((rng.normal(size=(2, 3)),), name="all"),
            Sample((rng.normal(size=(2, 3, 2)), -1), name="last"),
            Sample((rng.normal(size=(2, 3, 2)), (0, 2)), name="two"),
        ],
    ),
    OpInfo("pad", ops.pad, np.pad, _pad_samples("constant")),
    OpInfo("pad[edge]", ops.pad, np.pad, _pad_samples("edge"), composite=True),
    OpInfo("pad[reflect]", ops.pad, np.pad, _pad_samples("reflect"), composite=True),
]
