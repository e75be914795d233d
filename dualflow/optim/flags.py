"""The keyword flags of PyTorch optimizers that only pick an implementation strategy.

``foreach``, ``fused`` and ``capturable`` change how PyTorch runs an update, not what it computes;
dualflow accepts them (a compiled step fuses the per-parameter loop anyway). ``differentiable``
changes what is computed (gradients through the update) and is rejected.
"""

from __future__ import annotations

from typing import Any


def check_flags(name: str, differentiable: bool = False, **ignored: Any) -> None:
    """Accept the implementation flags; raise for ``differentiable=True``.

    Example:
        >>> check_flags("SGD", foreach=True, fused=None)
        >>> check_flags("SGD", differentiable=True)
        Traceback (most recent call last):
        ...
        NotImplementedError: SGD: differentiable=True is not supported
    """
    unknown = set(ignored) - {"foreach", "fused", "capturable"}
    if unknown:
        raise TypeError(f"{name}: unexpected keyword arguments {sorted(unknown)}")
    if differentiable:
        raise NotImplementedError(f"{name}: differentiable=True is not supported")
