"""Test helper: run a module with some of its parameters replaced by given tensors.

Gradient checks need the parameters as *inputs* of the checked function; swapping the Parameter
objects for the checker's tensors (instead of copying values in) keeps the graph connected.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dualflow.nn import Module


def call_with(module: Module, values: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    """``module(*args, **kwargs)`` with the parameters named in ``values`` swapped for them."""
    saved = []
    for name, value in values.items():
        *path, leaf = name.split(".")
        owner = module
        for part in path:
            owner = owner._modules[part]
        saved.append((owner, leaf, owner._params[leaf]))
        owner._params[leaf] = value
    try:
        return module(*args, **kwargs)
    finally:
        for owner, leaf, old in reversed(saved):
            owner._params[leaf] = old


def as_function(module: Module, names: Sequence[str], n_args: int = 1) -> Callable:
    """``f(*args, *param_values)``: the module as a function of its inputs and named params."""

    def f(*inputs: Any) -> Any:
        args, params = inputs[:n_args], inputs[n_args:]
        return call_with(module, dict(zip(names, params)), *args)

    return f
