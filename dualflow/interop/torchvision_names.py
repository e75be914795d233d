"""``from_torchvision``: a torchvision state dict's names onto a dualflow zoo model's.

The zoo's models already use torchvision's parameter names (DESIGN §8: ``conv1``, ``bn1``,
``layer1.0.conv1``..., ``fc``; ``features.N``/``classifier.N``), so what is left to map is how
checkpoints drift from a bare model: the ``module.`` prefix ``DataParallel`` adds, the
``_orig_mod.`` prefix ``torch.compile`` adds, and BatchNorm's ``num_batches_tracked``, absent
from checkpoints written before PyTorch 0.4.1. The result is checked against the model by name
and shape so a wrong architecture fails here, naming the keys, not deep inside a load.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from dualflow.errors import CheckpointError
from dualflow.tensor.core import Tensor

_PREFIXES = ("module.", "_orig_mod.")


def from_torchvision(state_dict: Mapping[str, Any], model: Any) -> dict[str, Any]:
    """``state_dict`` (e.g. from ``dualflow.load_torch``) renamed for ``model.load_state_dict``.

    Args:
        state_dict: a torchvision model's state dict (tensors or arrays by name).
        model: the dualflow model it should load into (e.g. ``vision.models.resnet18()``).

    Returns:
        A dict with exactly ``model.state_dict()``'s keys, in its order.

    Raises:
        CheckpointError: names the model needs that the checkpoint lacks, names it has that
            the model does not, or a shape that differs.

    Example:
        >>> import numpy as np
        >>> from dualflow import nn
        >>> model = nn.Sequential(nn.Linear(2, 3))
        >>> sd = {"module.0.weight": np.zeros((3, 2)), "module.0.bias": np.zeros(3)}
        >>> list(from_torchvision(sd, model))
        ['0.weight', '0.bias']
    """
    renamed = {_strip(name): value for name, value in state_dict.items()}
    target = model.state_dict()
    for name, value in target.items():  # pre-0.4.1 checkpoints: BN counts start at 0
        if name.endswith("num_batches_tracked") and name not in renamed:
            renamed[name] = Tensor(np.zeros(tuple(value.shape), np.int64))
    missing = [k for k in target if k not in renamed]
    unexpected = [k for k in renamed if k not in target]
    if missing or unexpected:
        raise CheckpointError(
            f"the checkpoint does not fit {type(model).__name__}: missing {missing[:5]}"
            f"{' ...' if len(missing) > 5 else ''}, unexpected {unexpected[:5]}"
            f"{' ...' if len(unexpected) > 5 else ''} (another architecture or width?)"
        )
    for name, value in target.items():
        found = renamed[name]
        shape = tuple(found.shape) if hasattr(found, "shape") else np.shape(found)
        if shape != tuple(value.shape):
            raise CheckpointError(
                f"{name}: the checkpoint holds shape {shape}, {type(model).__name__} has "
                f"{tuple(value.shape)} (another number of classes or width?)"
            )
    return {name: renamed[name] for name in target}


def _strip(name: str) -> str:
    changed = True
    while changed:
        changed = False
        for prefix in _PREFIXES:
            if name.startswith(prefix):
                name, changed = name[len(prefix) :], True
    return name
