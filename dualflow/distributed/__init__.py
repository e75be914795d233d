"""Data-parallel training: communicators (MPI, NCCL, loopback), gradient averaging, sharding.

Launch with ``mpiexec -n N python train.py``; see DESIGN §7.
"""

from dualflow.distributed.communicator import Communicator
from dualflow.distributed.dataset import scatter_dataset
from dualflow.distributed.factory import create_communicator
from dualflow.distributed.loopback import (
    LoopbackCommunicator,
    LoopbackHub,
    create_loopback_group,
    run_loopback,
)
from dualflow.distributed.multi_node_optimizer import (
    MultiNodeOptimizer,
    create_multi_node_optimizer,
)

__all__ = [
    "Communicator",
    "LoopbackCommunicator",
    "LoopbackHub",
    "MultiNodeOptimizer",
    "create_communicator",
    "create_loopback_group",
    "create_multi_node_optimizer",
    "run_loopback",
    "scatter_dataset",
]
