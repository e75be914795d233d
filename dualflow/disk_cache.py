"""Signed entries in owner-only folders: the stores every disk cache of dualflow goes through.

``open_store(kind)`` is the kernels, bytecode or plans folder under the trusted cache root
(``_config.cache_dir()``), or a plans folder the user chose, checked the same way (``disk_trust``).
``load`` returns an entry's bytes only when its signature verifies; ``save`` writes atomically.
The entries under one root stay under ``_config.cache_limit()``: the least recently used go first.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from dualflow._config import cache_limit
from dualflow.disk_trust import (
    HEADER_BYTES,
    MAX_ENTRY,
    Root,
    folder_problem,
    make_private,
    open_safely,
    read_regular,
    sign,
    trusted_root,
    verify,
    warn_once,
)

# The kinds of cache and what one entry (the unit the LRU removes) is: kernels/k_<sha>.py with
# its numba files in kernels/__pycache__, bytecode/<sha>.marshal, plans/<key>/<entry>/.
KINDS = ("kernels", "bytecode", "plans")
_KEY = re.compile("[0-9a-f]{64}")
_ENTRY = re.compile("[0-9a-f]{16}")
_PATTERNS = {
    "kernels": re.compile(r"(k_[0-9a-z]+)\..*"),
    "bytecode": re.compile(r"([0-9a-f]+)\.marshal"),
}
_YOUNG_TMP_NS = 3600 * 10**9  # a newer temporary file may be another process's write in flight
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
                write_atomic(path, data)
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
            trim(self.budget, limit)

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


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file (mode 0600) and a rename, creating
    missing folders 0700: readers see the whole file or none."""
    make_private(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
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


def _unit(parts: tuple[str, ...], kind: str) -> str | None:
    """The entry a file belongs to, or None for a file that is none of this cache's (never
    removed: a plans folder may be one the user shares with other files)."""
    if kind == "plans" and len(parts) > 2 and parts[1].startswith(".tmp-"):
        return "/".join(parts[:2])  # an entry being written, or left by an interrupted write
    if parts[-1].startswith(".tmp-"):
        return "/".join(parts)
    if kind == "plans":
        ok = len(parts) > 2 and _KEY.fullmatch(parts[0]) and _ENTRY.fullmatch(parts[1])
        return "/".join(parts[:2]) if ok else None
    if kind == "kernels" and parts[0] == "__pycache__" and len(parts) == 2:
        parts = parts[1:]  # numba's machine code of kernel k_<sha>
    match = _PATTERNS[kind].fullmatch(parts[0]) if len(parts) == 1 else None
    return match.group(1) if match else None


def units(folder: Path, kind: str) -> dict[str, list[tuple[Path, int, int]]]:
    """The files under ``folder`` grouped into entries: unit -> [(path, bytes, last use ns)].
    Temporary files of writes still in flight (under an hour old) are left out."""
    found: dict[str, list[tuple[Path, int, int]]] = {}
    now = time.time_ns()
    for dirpath, _, filenames in os.walk(folder):  # walk does not follow symlinks
        rel = Path(dirpath).relative_to(folder).parts
        for name in filenames:
            path = Path(dirpath, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            unit = _unit((*rel, name), kind)
            if unit is None or (".tmp-" in unit and now - info.st_mtime_ns < _YOUNG_TMP_NS):
                continue
            used = max(info.st_atime_ns, info.st_mtime_ns)
            found.setdefault(unit, []).append((path, info.st_size, used))
    return found


def _remove(folder: Path, unit: str, files: list[tuple[Path, int, int]], kind: str) -> None:
    for path, _, _ in files:
        with contextlib.suppress(OSError):
            os.unlink(path)
    if kind == "plans" and unit.count("/") == 1:
        shutil.rmtree(folder / unit, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.rmdir((folder / unit).parent)  # an emptied key folder


def trim(budget: tuple[tuple[Path, str], ...], limit: int) -> int:
    """Remove the least recently used entries until the budget's folders hold at most 3/4 of
    ``limit`` (if they hold more than ``limit``); returns the bytes removed."""
    everything = [
        (max(u for _, _, u in files), sum(s for _, s, _ in files), folder, kind, unit, files)
        for folder, kind in budget
        for unit, files in units(folder, kind).items()
    ]
    total = sum(entry[1] for entry in everything)
    if total <= limit:
        return 0
    removed = 0
    for _, size, folder, kind, unit, files in sorted(everything, key=lambda e: e[0]):
        if total - removed <= limit * 3 // 4:
            break
        _remove(folder, unit, files, kind)
        removed += size
    return removed


def clear(budget: tuple[tuple[Path, str], ...]) -> int:
    """Remove every entry of the budget's folders; returns the bytes removed."""
    removed = 0
    for folder, kind in budget:
        for unit, files in units(folder, kind).items():
            _remove(folder, unit, files, kind)
            removed += sum(s for _, s, _ in files)
    return removed


def usage(budget: tuple[tuple[Path, str], ...]) -> list[tuple[Path, int, int]]:
    """(folder, entries, bytes) of each folder of the budget."""
    rows = []
    for folder, kind in budget:
        found = units(folder, kind)
        rows.append((folder, len(found), sum(s for f in found.values() for _, s, _ in f)))
    return rows
