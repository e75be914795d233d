"""Defaults that ``dualflow/__init__`` installs for lower layers, so that no layer imports upward.

Three things a layer uses live in a layer above it: ``ops`` runs a call through the eager
interpreter (``autograd``) when no other is active, the random ops draw from the default
generator of the input's device (``dualflow.tensor.random``), and ``Tensor.backward`` runs the
engine (``autograd``). ``dualflow/__init__`` (the top, which may import anything) installs a
loader for each here when the package is imported; the first use calls the loader and keeps what
it returns. Loading at first use rather than at install keeps ``import dualflow.graph_ir`` free of
the eager machinery (DESIGN §1).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_loaders: dict[str, Callable[[], Any]] = {}
_loaded: dict[str, Any] = {}


def install(name: str, loader: Callable[[], Any]) -> None:
    """Make ``loader()`` the provider of ``name``; its value is loaded again at the next use.

    Example:
        >>> install("example", lambda: 42); installed("example")
        42
    """
    _loaders[name] = loader
    _loaded.pop(name, None)


def installed(name: str) -> Any:
    """What the loader installed for ``name`` returns (called once, at the first use).

    Raises:
        RuntimeError: nothing is installed for ``name``: the layers were imported without
            ``dualflow/__init__`` (which installs the defaults).

    Example:
        >>> installed("interpreter").__class__.__name__
        'EagerInterpreter'
    """
    try:
        return _loaded[name]
    except KeyError:
        pass
    loader = _loaders.get(name)
    if loader is None:
        raise RuntimeError(
            f"dualflow: no default {name!r} is installed; the layers were imported without "
            "dualflow/__init__.py, which installs it (import dualflow first)"
        )
    value = _loaded[name] = loader()
    return value
