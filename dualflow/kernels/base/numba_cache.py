"""numba's machine code for generated kernels on disk, signed: numba never opens a cache file.

numba's own ``cache=True`` keeps an index pickle and data pickles next to the source and
unpickles them unchecked, so anyone able to write one runs code in the process. Here each
compiled signature of a kernel is one entry of the kernels store
(``kernels/__pycache__/k_<sha>.<key>.nbc``), signed like every cache entry and verified before
it is unpickled (``disk_cache``). There is no index: the entry name is a hash of what numba's
index key holds (signature, target machine, bytecode) and numba's version.
"""

from __future__ import annotations

import hashlib
import pickle
import sys
import threading
from collections.abc import Callable
from typing import Any

import numba

from dualflow.disk_cache import Store, open_store

try:  # numba internals (stable since 0.4x); without them kernels compile in every process
    from numba.core import compiler, serialize
    from numba.core.caching import _Cache
except ImportError:  # pragma: no cover - a numba that reorganized its caching
    _Cache = None

MAX_MACHINE_CODE = 64 * 2**20  # one compiled kernel is ~100 KB; anything near this is not ours


def code_fingerprint(code: Any) -> bytes:
    """The bytes that decide what a function compiles to: its bytecode, and its constants and
    names (``co_code`` only indexes them: ``x * 2`` and ``x * 3`` share it), nested functions'
    code included.

    Example:
        >>> code_fingerprint((lambda x: x * 2).__code__) == code_fingerprint(
        ...     (lambda x: x * 3).__code__)
        False
    """
    consts = [
        code_fingerprint(c) if hasattr(c, "co_code") else repr((type(c).__name__, c)).encode()
        for c in code.co_consts
    ]
    names = repr((code.co_names, code.co_varnames, code.co_freevars)).encode()
    return b"\0".join([code.co_code, names, *consts])


class SignedCache(_Cache or object):  # type: ignore[misc]
    """A dispatcher's disk cache (``dispatcher._cache``) reading and writing signed entries."""

    def __init__(self, py_func: Any, store: Store, stem: str) -> None:
        self._store, self._stem, self._module = store, stem, py_func.__module__
        # the module is part of the key: a pickled entry names the module it rebuilds in, so a
        # function that moved (dualflow.ops.expr -> dualflow.kernels.expr) gets new entries
        where = f"{py_func.__module__}.{py_func.__qualname__}".encode()
        self._code = hashlib.sha256(where + code_fingerprint(py_func.__code__)).hexdigest()

    @property
    def cache_path(self) -> str:
        """The folder numba's messages name."""
        return str(self._store.directory / "__pycache__")

    def enable(self) -> None:
        """Always on (numba's API)."""

    def disable(self) -> None:
        """Always on (numba's API)."""

    def flush(self) -> None:
        """Nothing to flush (numba's API)."""

    def _name(self, sig: Any, codegen: Any) -> str:
        key = repr((numba.__version__, sig, codegen.magic_tuple(), self._code)).encode()
        return f"__pycache__/{self._stem}.{hashlib.sha256(key).hexdigest()[:24]}.nbc"

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        """The compiled function for ``sig`` from a verified entry, or None (numba compiles)."""
        target_context.refresh()
        name = self._name(sig, target_context.codegen())
        payload = self._store.load(name, MAX_MACHINE_CODE)
        if payload is None:
            return None
        try:  # signed by this user's key: only bytes save_overload wrote are unpickled
            return compiler.CompileResult._rebuild(target_context, *pickle.loads(payload))
        except Exception as exc:  # written by another numba build: compile again
            self._store.damaged(name, f"numba cannot load it ({type(exc).__name__}: {exc})")
            return None

    def stored(self, sig: Any, target_context: Any) -> bool:
        """Whether the store holds an entry for ``sig`` (not yet verified: ``load_overload``
        does that, and compiles when it fails)."""
        return (self._store.directory / self._name(sig, target_context.codegen())).is_file()

    def save_overload(self, sig: Any, data: Any) -> None:
        """Store a fresh compile result (numba's cachability rules: no lifted loops or
        dynamic globals); a folder that cannot be written only costs the next compile."""
        if any(not x.can_cache for x in data.lifted) or data.library.has_dynamic_globals:
            return
        if sys.modules.get(self._module) is None:
            # a generated module dropped from sys.modules (``numba_elementwise.MAX_MODULES``) whose
            # kernel a plan still runs: numba names it "<dynamic>", which no process can load
            return
        name = self._name(sig, data.codegen)
        try:
            payload = serialize.dumps(data._reduce())
        except Exception:  # an object numba cannot serialize: keep it in memory only
            return
        self._store.save(name, payload)


def attach(dispatcher: Any, store: Store, stem: str) -> None:
    """Give a numba dispatcher (compiled with ``cache=False``) the signed disk cache.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> store = open_store("plans", Path(tempfile.mkdtemp()))  # any store will do
        >>> f = numba.njit(lambda x: x + 1)
        >>> attach(f, store, "k_doc"); f(1)
        2
        >>> len(list(store.directory.glob("__pycache__/k_doc.*.nbc")))
        1
    """
    if _Cache is not None:
        dispatcher._cache = SignedCache(dispatcher.py_func, store, stem)


def compiled_or_stored(dispatcher: Any, signature: tuple) -> bool:
    """Whether ``dispatcher`` has machine code for ``signature`` in this process or in its
    signed store (loading it then costs milliseconds, compiling it ~0.1 s).

    Example:
        >>> f = numba.njit(lambda x: x + 2)
        >>> compiled_or_stored(f, (numba.types.int64,)), f(1), compiled_or_stored(
        ...     f, (numba.types.int64,))
        (False, 3, True)
    """
    if tuple(signature) in dispatcher.overloads:
        return True
    cache = getattr(dispatcher, "_cache", None)
    return isinstance(cache, SignedCache) and cache.stored(signature, dispatcher.targetctx)


def in_kernels_store(dispatcher: Any, stem: str) -> None:
    """``attach`` the dispatcher to the signed kernels store (nothing when it cannot be opened:
    the kernel then compiles in every process).

    Example:
        >>> f = numba.njit(lambda x: x - 1)
        >>> in_kernels_store(f, "k_doc_minus"); f(1)
        0
    """
    store = open_store("kernels")
    if store is not None:
        attach(dispatcher, store, stem)


_BUILDING = threading.Lock()


def built_once(table: dict, key: Any, build: Callable[[], tuple[Any, str]]) -> Any:
    """``table[key]``, built at its first need by ``build()`` (a dispatcher and its stem in the
    signed kernels store, ``in_kernels_store``) under one lock, so two threads never compile the
    same kernel twice; later calls read the table without the lock (a dict read is atomic).

    Example:
        >>> table = {}
        >>> f = built_once(table, "k", lambda: (numba.njit(lambda x: x * 3), "k_doc_triple"))
        >>> f(2), built_once(table, "k", lambda: None) is f
        (6, True)
    """
    kernel = table.get(key)
    if kernel is not None:
        return kernel
    with _BUILDING:
        kernel = table.get(key)
        if kernel is None:
            kernel, stem = build()
            in_kernels_store(kernel, stem)
            table[key] = kernel
        return kernel


def cached_njit(py_func: Any, stem: str) -> Any:
    """``py_func`` compiled as dualflow's fixed kernels are (``nogil`` for ``cpu_threads``,
    numpy's error model, numba's own unverified cache off), its machine code in the signed
    kernels store as ``stem``.

    Example:
        >>> def _double(x):
        ...     return 2 * x
        >>> cached_njit(_double, "k_doc_double")(4)
        8
    """
    kernel = numba.njit(nogil=True, cache=False, error_model="numpy")(py_func)
    in_kernels_store(kernel, stem)
    return kernel


def cached_ufunc(py_func: Any, signatures: list[str], stem: str) -> Any:
    """``numba.vectorize(signatures)(py_func)`` whose machine code is kept in the signed kernels
    store as ``stem`` (numba's ``cache=True`` would write its unverified pickles instead).

    Example:
        >>> import math
        >>> def _erf(v):
        ...     return math.erf(v)
        >>> float(cached_ufunc(_erf, ["float64(float64)"], "k_docerf")(0.0))
        0.0
    """
    ufunc = numba.vectorize(py_func)  # a DUFunc: nothing compiled yet
    store = open_store("kernels")
    if store is not None and _Cache is not None and hasattr(ufunc, "_dispatcher"):
        ufunc._dispatcher.cache = SignedCache(py_func, store, stem)
    for signature in signatures:
        ufunc.add(signature)
    ufunc.disable_compile()
    return ufunc
