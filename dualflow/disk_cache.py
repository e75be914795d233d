"""Signed entries in owner-only folders: the stores every disk cache of dualflow goes through.

``open_store(kind)`` is the kernels, bytecode or plans folder under the trusted cache root
(``_config.cache_dir()``), or a plans folder the user chose, checked the same way (``disk_trust``).
``load`` returns an entry's bytes only when its signature verifies; ``save`` writes atomically.
The entries under one root stay under ``_config.cache_limit()``: the least recently used go first.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from dualflow._config import cache_limit
from dualflow.disk_trim import trim
from dualflow.disk_trust import (
    HEADER_BYTES,
    LEGACY_MAGIC,
    MAX_ENTRY,
    Root,
    folder_problem,
    make_private,
    open_safely,
    read_regular,
    sign,
    temp_prefix,
    trusted_root,
    verify,
    warn_once,
)

# The kinds of cache; what an entry is, and which files are the cache's: ``disk_trim``.
KINDS = ("kernels", "bytecode", "plans")
_LOCK = threading.Lock()
_WRITTEN: dict[tuple, int] = {}  # bytes written per budget since this process last trimmed it


@dataclass(frozen=True)
class Store:
    """One cache folder: signed entries by name (a relative path such as ``k_ab.py``)."""

    root: Root
    kind: str
    directory: Path
    budget: tuple[tuple[Path, str], ...]  # (folder, kind) sharing one size limit

    def load(self, name: str, limit: int = MAX_ENTRY) -> bytes | None:
        """The verified payload of entry ``name``; None when it is missing (silently) or damaged,
        foreign, not a regular file or too large (one warning: the caller rebuilds it)."""
        try:
            data = self._read(name, limit + HEADER_BYTES)
        except FileNotFoundError:
            return None
        except OSError as exc:
            self.damaged(name, str(exc))
            return None
        payload = verify(self.root.key, f"{self.kind}/{name}", data)
        if payload is None and self.root.refresh_key():
            payload = verify(self.root.key, f"{self.kind}/{name}", data)
        if payload is None and data.startswith(LEGACY_MAGIC):
            return None  # written by a dualflow before owner tags: rebuilt without a warning
        if payload is None:
            self.damaged(name, "its signature does not match its contents")
        return payload

    def _read(self, name: str, limit: int) -> bytes:
        parts = _parts(name)
        fd = open_safely(self.directory)
        try:
            for part in parts[:-1]:  # every folder on the way is a real folder, not a link
                inner = open_safely(part, dir_fd=fd)
                os.close(fd)
                fd = inner
            return read_regular(parts[-1], limit, own=True, dir_fd=fd)
        finally:
            os.close(fd)

    def signed(self, name: str, payload: bytes) -> bytes:
        """The bytes ``save`` writes for ``name`` (for callers that place files themselves)."""
        _parts(name)
        return sign(self.root.key, f"{self.kind}/{name}", payload)

    def save(self, name: str, payload: bytes) -> Path | None:
        """Write entry ``name`` atomically (mode 0600); None when the folder cannot be written
        (the caller runs without the cache)."""
        path = self.directory / name
        data = self.signed(name, payload)
        for attempt in range(2):
            try:
                _unlink_links(self.directory, _parts(name)[:-1])
                write_atomic(path, data, temp_prefix(self.root.key))
                break
            except FileNotFoundError:  # the cache was deleted meanwhile: recreate it once
                if attempt:
                    return None
            except OSError as exc:
                why = exc.strerror or exc  # one warning per folder and cause, not per file
                warn_once(f"dualflow: cannot write the disk cache at {self.directory}: {why}")
                return None
        self.account(len(data))
        return path

    def account(self, size: int) -> None:
        """Count ``size`` bytes written; trim the budget at the first write of the process and
        after each eighth of the limit written since."""
        limit = cache_limit()
        with _LOCK:
            written = _WRITTEN.get(self.budget)
            due = written is None or written + size > limit // 8
            _WRITTEN[self.budget] = 0 if due else written + size
        if due:
            trim(self.root.key, self.budget, limit)

    def damaged(self, name: str, why: str) -> None:
        """Warn once that entry ``name`` is ignored (it is rebuilt by the caller)."""
        warn_once(f"dualflow: ignoring cache entry {self.directory / name}: {why}; rebuilding it")


def _parts(name: str) -> list[str]:
    parts = name.split("/")
    if any(p in ("", ".", "..") or "\0" in p for p in parts):
        raise ValueError(f"bad cache entry name {name!r}")
    return parts


def _unlink_links(directory: Path, folders: list[str]) -> None:
    """Remove symlinks standing where the entry's folders go: writes never leave the cache."""
    for depth in range(1, len(folders) + 1):
        folder = directory.joinpath(*folders[:depth])
        if folder.is_symlink():
            os.unlink(folder)


def write_atomic(path: Path, data: bytes, prefix: str = ".tmp-") -> None:
    """Write ``data`` to ``path`` through a temporary file (mode 0600, named ``prefix``...) and
    a rename, creating missing folders 0700: readers see the whole file or none."""
    make_private(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


_STORES: dict[tuple, Store | None] = {}


def open_store(kind: str, directory: Path | None = None) -> Store | None:
    """The store of ``kind`` under the cache root, or in ``directory`` (plans elsewhere); None
    with one warning when the root or folder is not trusted (the caller runs uncached).

    Example:
        >>> store = open_store("plans", Path(tempfile.mkdtemp()))
        >>> store.save("a/b", b"data").read_bytes().endswith(b"\\ndata")
        True
        >>> store.load("a/b")
        b'data'
    """
    root = trusted_root()
    if root is None:
        return None
    cache_limit()  # a bad DUALFLOW_CACHE_MAX_MB fails at the cache's first use, not a later write
    if directory is not None and os.path.realpath(directory) == str(root.path / kind):
        directory = None  # the root's own folder: one budget with the other kinds
    key = (root.path, kind, directory)
    with _LOCK:
        if key in _STORES:
            return _STORES[key]
    folder = root.path / kind if directory is None else Path(directory)
    try:
        problem = folder_problem(folder)
    except FileNotFoundError:
        return None  # being deleted: this use goes without the cache, the next one retries
    store = None
    if problem is not None:
        warn_once(
            f"dualflow: not using the {kind} cache at {folder}: {problem}; running without it"
        )
    elif directory is None:
        budget = tuple((root.path / k, k) for k in KINDS)
        store = Store(root, kind, Path(os.path.realpath(folder)), budget)
    else:
        real = Path(os.path.realpath(folder))
        store = Store(root, kind, real, ((real, kind),))
    with _LOCK:
        return _STORES.setdefault(key, store)
