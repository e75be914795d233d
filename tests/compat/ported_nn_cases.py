"""nn compatibility cases for the layers issue 40 added (padding layers, ``PReLU``,
``EmbeddingBag``, ``DataParallel``), in ``nn_cases``'s form: run by ``test_ported_nn_compat.py``
against ``ported_nn_references.npz`` (``make_ported_nn_references.py``).
"""

from __future__ import annotations

import numpy as np

from tests.compat.nn_cases import Case, positional, randn


# Integer inputs are fixed (the test rebuilds them from the case; only floats are stored).
def _ids(rng: np.random.Generator) -> tuple[list, dict]:
    ids = np.array([3, 0, 7, 3, 5, 1, 6], np.int64)
    return [ids, np.array([0, 3, 3, 5], np.int64)], {}  # bag 1 is empty


def _ids_weighted(rng: np.random.Generator) -> tuple[list, dict]:
    (ids, offsets), _ = _ids(rng)
    return [ids, offsets], {"per_sample_weights": rng.uniform(0.5, 2.0, (7,))}


def _ids_2d(rng: np.random.Generator) -> tuple[list, dict]:
    return [np.array([[1, 2, 2, 7], [2, 2, 2, 2], [0, 5, 2, 4]], np.int64)], {}


PADDING = [
    Case("reflection_pad1d", lambda nn: nn.ReflectionPad1d((2, 1)), positional(randn(2, 3, 5))),
    Case(
        "reflection_pad2d",
        lambda nn: nn.ReflectionPad2d((1, 2, 2, 0)),
        positional(randn(2, 3, 4, 5)),
    ),
    Case(
        "reflection_pad2d_unbatched", lambda nn: nn.ReflectionPad2d(1), positional(randn(3, 4, 5))
    ),
    Case("reflection_pad3d", lambda nn: nn.ReflectionPad3d(1), positional(randn(1, 2, 3, 4, 3))),
    Case("replication_pad1d", lambda nn: nn.ReplicationPad1d(3), positional(randn(2, 3, 4))),
    Case(
        "replication_pad2d",
        lambda nn: nn.ReplicationPad2d((0, 2, 1, 3)),
        positional(randn(2, 2, 3, 4)),
    ),
    Case(
        "replication_pad3d",
        lambda nn: nn.ReplicationPad3d((1, 0, 2, 1, 0, 1)),
        positional(randn(1, 2, 2, 3, 3)),
    ),
    Case("circular_pad1d", lambda nn: nn.CircularPad1d((1, 2)), positional(randn(2, 3, 4))),
    Case("circular_pad2d", lambda nn: nn.CircularPad2d(1), positional(randn(2, 2, 3, 4))),
    Case(
        "circular_pad3d",
        lambda nn: nn.CircularPad3d((1, 1, 0, 1, 1, 0)),
        positional(randn(1, 2, 2, 3, 3)),
    ),
    Case("constant_pad1d", lambda nn: nn.ConstantPad1d((2, 0), 1.5), positional(randn(2, 3, 4))),
    Case("constant_pad2d", lambda nn: nn.ConstantPad2d(1, -2.0), positional(randn(2, 3, 4))),
    Case(
        "constant_pad3d",
        lambda nn: nn.ConstantPad3d((0, 1, 1, 0, 2, 2), 0.5),
        positional(randn(1, 2, 2, 2, 2)),
    ),
    Case("zero_pad1d", lambda nn: nn.ZeroPad1d(2), positional(randn(2, 3))),
    Case("zero_pad2d", lambda nn: nn.ZeroPad2d((1, 1, 2, 0)), positional(randn(2, 3, 4, 4))),
    Case("zero_pad3d", lambda nn: nn.ZeroPad3d(1), positional(randn(1, 1, 2, 2, 2))),
]

LAYERS = [
    Case("prelu", lambda nn: nn.PReLU(), positional(randn(3, 4))),
    Case("prelu_channels", lambda nn: nn.PReLU(3, init=0.1), positional(randn(2, 3, 4, 4))),
    Case("embedding_bag_mean", lambda nn: nn.EmbeddingBag(8, 3), _ids),
    Case("embedding_bag_sum_weighted", lambda nn: nn.EmbeddingBag(8, 3, mode="sum"), _ids_weighted),
    Case("embedding_bag_max", lambda nn: nn.EmbeddingBag(8, 3, mode="max"), _ids),
    Case(
        "embedding_bag_last_offset",
        lambda nn: nn.EmbeddingBag(8, 2, mode="sum", include_last_offset=True),
        _ids,
    ),
    Case("embedding_bag_2d_padding", lambda nn: nn.EmbeddingBag(8, 3, padding_idx=2), _ids_2d),
    Case(
        "data_parallel",
        lambda nn: nn.DataParallel(nn.Sequential(nn.Linear(4, 3), nn.PReLU())),
        positional(randn(5, 4)),
    ),
]

CASES = PADDING + LAYERS
