"""A dict that keeps its most recently used entries only: the CPU kernel cache's eviction.

Kernels hold compiled modules (~1.1 MB of numba state each); a long session that compiles many
shapes must not keep them all, while plans keep the kernels they use themselves.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any


class Recent(OrderedDict):
    """The ``limit`` most recently used kernels (each numba one holds a ~1.1 MB module; plans
    keep the kernels they use).

    Example:
        >>> recent = Recent(2)
        >>> recent["a"], recent["b"] = 1, 2
        >>> recent.get("a"); recent["c"] = 3
        1
        >>> list(recent)
        ['a', 'c']
    """

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def get(self, key: Any, default: Any = None) -> Any:
        try:
            self.move_to_end(key)
        except KeyError:  # unknown, or dropped by another thread meanwhile
            return default
        return super().get(key, default)

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        while len(self) > self.limit:
            self.popitem(last=False)
