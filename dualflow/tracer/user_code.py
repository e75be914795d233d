"""Which source files are user code: the code the environment probe follows while tracing.

dualflow's own package (but the folders it counts as user code, ``errors.user_code_folders``: the
bench's workloads), the standard library, numpy and generated code are not followed: their reads
of user objects go through Module/Optimizer versions and the tracer's hooks, or (``provenance``)
count as reads the probe cannot name.
"""

from __future__ import annotations

import os
import sysconfig

import numpy as np

from dualflow.errors import GENERATED_PREFIX, user_code_folders

_DUALFLOW = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_LIBRARY = tuple(
    {sysconfig.get_paths()[k] + os.sep for k in ("stdlib", "platstdlib")}
    | {os.path.dirname(np.__file__) + os.sep}
)
_USER_FILES: dict[str, bool] = {}


def is_user_file(filename: str) -> bool:
    """Whether code from ``filename`` is followed by the probe (not dualflow, stdlib, numpy).

    Example:
        >>> is_user_file("/home/me/train.py"), is_user_file(np.__file__)
        (True, False)
    """
    known = _USER_FILES.get(filename)
    if known is None:
        library = filename.startswith((_DUALFLOW, *_LIBRARY, GENERATED_PREFIX, "<frozen"))
        inside = user_code_folders()  # e.g. the bench's workloads (registered at its import)
        known = _USER_FILES[filename] = not library or filename.startswith(inside)
    return known
