"""Which op calls may raise on the values they read, not only on their shapes.

Shapes and dtypes are checked when an op is called or recorded, so those errors name the
user's line in every mode. An index past a row, a label out of range or a negative integer
power shows only in the data. Any op reading an integer array may do that, so this is no per-op
fact: compiled plans write no state in place before such a step (donation), never recompute
one (rematerialization), and lazy re-execution runs one at its own line.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

INTEGER_KINDS = ("i", "u")
"""The dtype kinds whose values an op may raise on (an index, a label, an integer power)."""


def may_raise_on_values(dtypes: Iterable[Any]) -> bool:
    """Whether an op reading arrays of ``dtypes`` may raise on their values (any integer).

    Example:
        >>> may_raise_on_values(["float32", "int64"]), may_raise_on_values(["float32"])
        (True, False)
    """
    return any(np.dtype(dtype).kind in INTEGER_KINDS for dtype in dtypes)


def reads_integers(args: Iterable[Any]) -> bool:
    """Whether an op call's arguments hold an integer array (a tensor's, numpy's, a pending
    one's), also inside a list or tuple argument (``concat([a, b])``): ``may_raise_on_values``
    of the arrays it reads. Python numbers are not read.

    Example:
        >>> reads_integers([np.ones(2), 3]), reads_integers([np.arange(2)])
        (False, True)
        >>> reads_integers([[np.ones(2), np.arange(2)]])
        True
    """
    for a in args:  # a plain loop: the lazy recorder asks for every op it records
        if type(a) in (list, tuple):
            if reads_integers(a):
                return True
            continue
        dtype = getattr(getattr(a, "raw_array", a), "dtype", None)
        if getattr(dtype, "kind", None) in INTEGER_KINDS:  # numpy's, cupy's, a Pending's dtype
            return True
    return False
