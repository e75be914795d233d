"""``nn.parallel`` on the one device a dualflow process computes on: ``DataParallel`` and
``data_parallel`` run the module itself; several devices or nodes are ``dualflow.distributed``
(one process per device, gradients averaged by ``create_multi_node_optimizer``).
"""

from __future__ import annotations

from typing import Any

from dualflow.nn.ported import DataParallel
from dualflow.tensor.methods.hints import missing

_INSTEAD = {
    "DistributedDataParallel": "use dualflow.distributed.create_multi_node_optimizer (one "
    "process per device, launched with mpiexec)",
    "replicate": "one process per device: see dualflow.distributed",
    "scatter": "one process per device: see dualflow.distributed.scatter_dataset",
    "gather": "one process per device: see dualflow.distributed",
    "parallel_apply": "one process per device: see dualflow.distributed",
}


def data_parallel(
    module: Any,
    inputs: Any,
    device_ids: Any = None,
    output_device: Any = None,
    dim: int = 0,
    module_kwargs: dict | None = None,
) -> Any:
    """``module(inputs)``: PyTorch's functional DataParallel on one device.

    Example:
        >>> import dualflow
        >>> data_parallel(dualflow.nn.Linear(2, 1), dualflow.ones(3, 2), range(1)).shape
        (3, 1)
    """
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    return module(*inputs, **(module_kwargs or {}))


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    subject = "module 'dualflow.nn.parallel'"
    raise missing(subject, f"nn.parallel.{name}", name, _INSTEAD, lambda: __all__)


__all__ = ["DataParallel", "data_parallel"]
