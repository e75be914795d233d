"""Is a saved optimizer state dict this optimizer's? Refuse another optimizer's state.

PyTorch's optimizer state dicts do not name their class; loading SGD's into Adam is accepted and
fails at the first ``step()`` (``KeyError: 'step'``). The hyperparameter keys of the saved param
groups tell the optimizers apart, so the load is refused at once with a CheckpointError naming
both classes.
"""

from __future__ import annotations

import inspect
from typing import Any

from dualflow.errors import CheckpointError, with_location

# group keys that are not hyperparameters: schedulers' bookkeeping and the parameter list
_BOOKKEEPING = {"params", "lr", "initial_lr", "max_lr", "min_lr", "max_momentum", "base_momentum"}
# PyTorch's implementation flags and keys newer PyTorch versions add to older optimizers
_OPTIONAL = {"foreach", "capturable", "differentiable", "fused", "maximize"}
_OPTIONAL |= {"decoupled_weight_decay"}


def check_same_kind(optimizer: Any, saved_groups: list[dict]) -> None:
    """CheckpointError unless every saved group has ``optimizer``'s hyperparameters.

    Example:
        >>> import numpy as np
        >>> from dualflow.nn import Parameter
        >>> from dualflow.optim import SGD, Adam
        >>> sgd = SGD([Parameter(np.zeros(2))], lr=0.1).state_dict()["param_groups"]
        >>> check_same_kind(Adam([Parameter(np.zeros(2))]), sgd)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dualflow.errors.CheckpointError: Adam.load_state_dict: the saved state is SGD's, not ...
        ...
    """
    own = set(optimizer.defaults) - _BOOKKEEPING
    name = type(optimizer).__name__
    for index, saved in enumerate(saved_groups):
        keys = set(saved) - _BOOKKEEPING
        foreign, missing = sorted(keys - own - _OPTIONAL), sorted(own - keys - _OPTIONAL)
        if not (foreign or missing):
            continue
        raise CheckpointError(
            with_location(
                f"{name}.load_state_dict: the saved state is {_saved_by(keys)}'s, not {name}'s: "
                f"its param group {index} has {foreign or 'no other'} hyperparameters and lacks "
                f"{missing or 'none'} of {name}'s. Create the optimizer it was saved from, or "
                f"start {name} afresh (load only the model's state)"
            )
        )


def _saved_by(keys: set[str]) -> str:
    """The optimizer classes whose constructor takes exactly these hyperparameters."""
    from dualflow.optim.optimizer import Optimizer  # noqa: PLC0415 - optimizer imports this

    wanted = keys - _OPTIONAL
    found = [cls.__name__ for cls in _subclasses(Optimizer) if _hyperparameters(cls) == wanted]
    return " or ".join(sorted(found)) or "another optimizer"


def _subclasses(cls: type) -> list[type]:
    return [c for sub in cls.__subclasses__() for c in (sub, *_subclasses(sub))]


def _hyperparameters(cls: type) -> set[str] | None:
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    params = inspect.signature(cls.__init__).parameters.values()
    names = {p.name for p in params if p.kind in kinds} - {"self", "params"}
    return names - _BOOKKEEPING - _OPTIONAL
