"""Op-table entries for ``allreduce`` and its split form: on one loopback rank, the identity.

The all-reduce's backward is an all-reduce of the gradient, hence the identity too, so gradcheck
and double-backward apply; ``allreduce_start``/``allreduce_progress``/``allreduce_wait`` only
appear after autodiff.
"""

from __future__ import annotations

from dualflow import ops
from dualflow.distributed import create_communicator
from dualflow.ops.collective import allreduce_progress, allreduce_start, allreduce_wait
from tests.opinfo import OpInfo, Sample

_SOLO = create_communicator("loopback")


def _start_progress_wait(x, reduction):
    handle = allreduce_start(x, _SOLO, reduction)
    allreduce_progress(handle, _SOLO)  # nothing left in flight on one loopback rank
    return allreduce_wait(handle, x, _SOLO)


ENTRIES = [
    OpInfo(
        "allreduce",
        lambda x, reduction="sum": ops.allreduce(x, _SOLO, reduction),
        lambda x, reduction="sum": x,
        lambda rng: [
            Sample((rng.normal(size=(2, 3)),), name="sum"),
            Sample((rng.normal(size=(4,)),), {"reduction": "mean"}, name="mean"),
        ],
    ),
    OpInfo(
        "allreduce_start+wait",
        lambda x, reduction="sum": _start_progress_wait(x, reduction),
        lambda x, reduction="sum": x,
        lambda rng: [
            Sample((rng.normal(size=(2, 3)),), name="sum"),
            Sample((rng.normal(size=(4,)),), {"reduction": "mean"}, name="mean"),
            Sample((rng.normal(size=(3, 2)).T,), name="non-contiguous"),
        ],
        ops=("allreduce_start", "allreduce_progress", "allreduce_wait"),
        differentiable=False,
    ),
]
