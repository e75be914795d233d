"""Compiled plan bytecode kept on disk, so lowering a graph seen before skips ``compile()``.

A plan's generated Python source for a big graph takes CPython tens of milliseconds to compile;
a process loading a stored plan (or re-lowering the same graph) reads the marshalled code instead.
Keyed by the source text and the interpreter's bytecode magic number; an entry is unmarshalled
only when its signature verifies (``disk_cache``), and must then be exactly this source's code.
"""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import types

from dualflow.disk_cache import open_store

_MIN_SOURCE = 4096  # small plans compile faster than a file can be read
_MAX_CODE = 64 * 2**20


def compile_plan(source: str, filename: str) -> types.CodeType:
    """``compile(source, filename, "exec")``, through the on-disk bytecode cache.

    Example:
        >>> code = compile_plan("def run():\\n    return 1\\n", "<plan>")
        >>> namespace = {}; exec(code, namespace); namespace["run"]()
        1
    """
    store = open_store("bytecode") if len(source) >= _MIN_SOURCE else None
    if store is None:
        return compile(source, filename, "exec")
    # the name binds the entry to this source and interpreter (the signature covers the name)
    key = hashlib.sha256(importlib.util.MAGIC_NUMBER + source.encode()).hexdigest()
    name = f"{key}.marshal"
    payload = store.load(name, _MAX_CODE)
    if payload is not None:
        try:
            code = marshal.loads(payload)
            if isinstance(code, types.CodeType) and code.co_filename == filename:
                return code
        except (ValueError, EOFError, TypeError):
            store.damaged(name, "it does not unmarshal")
    code = compile(source, filename, "exec")
    store.save(name, marshal.dumps(code))  # a read-only cache folder only costs the compile
    return code
