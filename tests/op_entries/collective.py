"""Op-table entry for ``allreduce``: on a one-rank loopback communicator it is the identity.

Its backward is an all-reduce of the gradient, hence the identity too, so gradcheck and
double-backward apply unchanged.
"""

from __future__ import annotations

from dualflow import ops
from dualflow.distributed import create_communicator
from tests.opinfo import OpInfo, Sample

_SOLO = create_communicator("loopback")

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
]
