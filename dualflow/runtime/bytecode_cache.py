"""Compiled plan bytecode kept on disk, so lowering a graph seen before skips ``compile()``.

A plan's generated Python source for a big graph takes CPython tens of milliseconds to compile;
a process loading a stored plan (or re-lowering the same graph) reads the marshalled code instead.
Keyed by the source text and the interpreter's bytecode magic number.
"""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
import tempfile
import types
from pathlib import Path

from dualflow.runtime.kernels_numba import cache_dir

_MIN_SOURCE = 4096  # small plans compile faster than a file can be read


def _path(source: str) -> Path:
    key = hashlib.sha256(importlib.util.MAGIC_NUMBER + source.encode()).hexdigest()
    return cache_dir().parent / "bytecode" / f"{key}.marshal"


def compile_plan(source: str, filename: str) -> types.CodeType:
    """``compile(source, filename, "exec")``, through the on-disk bytecode cache.

    Example:
        >>> code = compile_plan("def run():\\n    return 1\\n", "<plan>")
        >>> namespace = {}; exec(code, namespace); namespace["run"]()
        1
    """
    if len(source) < _MIN_SOURCE:
        return compile(source, filename, "exec")
    path = _path(source)
    try:
        code = marshal.loads(path.read_bytes())
        if code.co_filename == filename:
            return code
    except (OSError, ValueError, EOFError, TypeError):
        pass
    code = compile(source, filename, "exec")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(marshal.dumps(code))
        os.replace(tmp, path)  # atomic: concurrent processes never read half a file
    except OSError:
        pass  # a read-only cache folder only costs the compile
    return code
