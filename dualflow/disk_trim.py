"""What a disk cache owns, and the LRU trim and clear that remove nothing else.

A file is the cache's when its header carries the owner tag the cache's key makes for its name
(``disk_trust.owns``: read from the first bytes only), or when it lies in, or is, a temporary
file or staging folder whose name carries a tag of the key (``disk_trust.is_temp``) and is over
an hour old (younger ones may be another process's write in flight). A name that only looks like
an entry (``.tmp-*``, ``<64 hex>/<16 hex>/``) is never enough: a plans folder may be one the user
shares with their own files. Folders are opened without following links and files removed
relative to them, so a trim never leaves the cache folder.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from dualflow.disk_trust import HEADER_BYTES, is_temp, open_safely, owns

# the files plan_cache writes in an entry folder <key>/<entry>/
ENTRY_FILES = frozenset(
    ["meta.json", "forward.npz", "forward.graph", "backward.npz", "backward.graph"]
)
_STEM = re.compile(r"(k_[0-9a-z_]+)\..*")  # kernels: k_<sha>.py and its __pycache__ code
_YOUNG_TMP_NS = 3600 * 10**9
_NOATIME = getattr(os, "O_NOATIME", 0)  # reading a header must not count as a use (LRU order)
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass
class Unit:
    """One entry the LRU removes whole: (folder, name) of its files, folders as parts below the
    cache folder (kernels: ``k_<sha>.py`` and its machine code in ``__pycache__``)."""

    folder: tuple[str, ...]
    files: list[tuple[tuple[str, ...], str]]
    size: int
    used: int  # last use (ns): the latest atime/mtime of its files
    remove_folder: bool = False  # a plans entry or staging folder goes with its files

    def add(self, rel: tuple[str, ...], name: str, info: os.stat_result) -> None:
        """Count file ``name`` of folder ``rel`` as part of this entry."""
        self.files.append((rel, name))
        self.size += info.st_size
        self.used = max(self.used, info.st_atime_ns, info.st_mtime_ns)


def _listing(fd: int) -> list[tuple[str, os.stat_result]]:
    found = []
    for name in os.listdir(fd):
        with contextlib.suppress(OSError):
            found.append((name, os.stat(name, dir_fd=fd, follow_symlinks=False)))
    return found


def _head(fd: int, name: str, info: os.stat_result) -> bytes:
    """The header of a regular file of yours (empty for anything else)."""
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
        return b""
    try:
        file = os.open(name, _FILE | _NOATIME, dir_fd=fd)
    except PermissionError:  # O_NOATIME on a file that is not yours
        return b""
    except OSError:
        return b""
    try:
        return os.read(file, HEADER_BYTES)
    finally:
        os.close(file)


class _Scan:
    """The owned entries of one cache folder of ``kind`` under ``key``."""

    def __init__(self, key: bytes, kind: str) -> None:
        self.key, self.kind = key, kind
        self.now = time.time_ns()
        self.units: dict[str, Unit] = {}

    def old_temp(self, name: str, info: os.stat_result) -> bool:
        return is_temp(self.key, name) and self.now - info.st_mtime_ns >= _YOUNG_TMP_NS

    def files(self, fd: int, rel: tuple[str, ...], group: bool) -> None:
        """Owned files of the folder ``rel``: each its own entry, or (kernels) by stem."""
        for name, info in _listing(fd):
            if not stat.S_ISREG(info.st_mode):
                continue
            if self.old_temp(name, info):
                unit_name = "/".join((*rel, name))
            elif owns(self.key, "/".join((self.kind, *rel, name)), _head(fd, name, info)):
                match = _STEM.fullmatch(name) if group else None
                unit_name = match.group(1) if match else "/".join((*rel, name))
            else:
                continue
            self.units.setdefault(unit_name, Unit(rel, [], 0, 0)).add(rel, name, info)

    def plans(self, fd: int) -> None:
        """plans/<key>/<entry>/: an entry is a folder whose meta.json is owned."""
        self.files(fd, (), False)
        for key_name, info in _listing(fd):
            if stat.S_ISDIR(info.st_mode):
                with _opened(fd, key_name) as inner:
                    if inner is not None:
                        self.plan_key(inner, key_name)

    def plan_key(self, fd: int, key_name: str, only: str | None = None) -> None:
        """The entries (and leftover staging folders) of plans/<key>/, or just ``only``."""
        if only is None:
            self.files(fd, (key_name,), False)
        for name, info in _listing(fd):
            if not stat.S_ISDIR(info.st_mode) or only not in (None, name):
                continue
            with _opened(fd, name) as inner:
                unit = None if inner is None else self.plan_entry(inner, (key_name, name), info)
            if unit is not None:
                self.units[f"{key_name}/{name}"] = unit

    def plan_entry(self, fd: int, rel: tuple[str, str], info: os.stat_result) -> Unit | None:
        """A plan entry folder is the cache's when any file in it is owned (so one tampered or
        replaced file does not orphan it), or it is an old staging folder of the cache's; then
        the files the cache writes there (``ENTRY_FILES``, whatever they became: never
        followed) and any owned file are its. Other files stay, and keep the folder."""
        staging = self.old_temp(rel[1], info)
        prefix = "/".join(("plans", *rel))
        listing = _listing(fd)
        owned = {
            name
            for name, file_info in listing
            if owns(self.key, f"{prefix}/{name}", _head(fd, name, file_info))
        }
        if not owned and not staging:
            return None  # not an entry of this cache, whatever its name
        unit = Unit(rel, [], 0, 0, remove_folder=True)
        for name, file_info in listing:
            if stat.S_ISDIR(file_info.st_mode):
                continue
            if (
                name in owned
                or name in ENTRY_FILES
                or (staging and stat.S_ISREG(file_info.st_mode))
            ):
                unit.add(rel, name, file_info)
        return unit


@contextlib.contextmanager
def _opened(fd: int | None, name: str | Path):
    """A folder's descriptor, opened without following a link (None when it cannot be)."""
    try:
        inner = open_safely(name, dir_fd=fd)
    except OSError:
        yield None
        return
    try:
        yield inner
    finally:
        os.close(inner)


def units(key: bytes, folder: Path, kind: str) -> dict[str, Unit]:
    """The entries under ``folder`` that the cache of ``key`` wrote, by name.

    Example:
        >>> import tempfile
        >>> from dualflow.disk_trust import sign
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / "ab.marshal").write_bytes(sign(b"k" * 32, "bytecode/ab.marshal", b"1"))
        >>> _ = (folder / "cd.marshal").write_bytes(b"the user's")
        >>> list(units(b"k" * 32, folder, "bytecode"))
        ['ab.marshal']
    """
    scan = _Scan(key, kind)
    with _opened(None, folder) as fd:
        if fd is None:
            return {}
        if kind == "plans":
            scan.plans(fd)
        else:
            scan.files(fd, (), kind == "kernels")
            if kind == "kernels":
                with _opened(fd, "__pycache__") as inner:
                    if inner is not None:
                        scan.files(inner, ("__pycache__",), True)
    return scan.units


def remove(folder: Path, unit: Unit) -> None:
    """Remove the files of ``unit`` (and its folder, and a plans key folder left empty)."""
    for rel in dict.fromkeys(rel for rel, _ in unit.files):
        with _path(folder, rel) as fds:
            if fds is None:
                continue
            for name in (name for where, name in unit.files if where == rel):
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=fds[-1])
    if not unit.remove_folder:
        return
    with _path(folder, unit.folder[:-1]) as fds:
        # the entry's folder, then an emptied key folder (plans/<key>/) too
        for depth in range(len(unit.folder), 0, -1) if fds is not None else ():
            try:
                os.rmdir(unit.folder[depth - 1], dir_fd=fds[depth - 1])
            except OSError:  # not empty: something else is in it, left alone
                break


@contextlib.contextmanager
def _path(folder: Path, rel: tuple[str, ...]):
    """Descriptors of ``folder`` and each folder of ``rel`` below it, no link followed; None
    when one cannot be opened (never a relative path: that would act on the working folder)."""
    with contextlib.ExitStack() as stack:
        fds = [stack.enter_context(_opened(None, folder))]
        for part in rel:
            if fds[-1] is None:
                break
            fds.append(stack.enter_context(_opened(fds[-1], part)))
        yield None if None in fds else fds


Budget = tuple[tuple[Path, str], ...]  # (folder, kind) sharing one size limit


def trim(key: bytes, budget: Budget, limit: int) -> int:
    """Remove the least recently used entries until the budget's folders hold at most 3/4 of
    ``limit`` (if they hold more than ``limit``); returns the bytes removed."""
    everything = [
        (unit.used, folder, unit)
        for folder, kind in budget
        for unit in units(key, folder, kind).values()
    ]
    total = sum(unit.size for _, _, unit in everything)
    if total <= limit:
        return 0
    removed = 0
    for _, folder, unit in sorted(everything, key=lambda e: e[0]):
        if total - removed <= limit * 3 // 4:
            break
        remove(folder, unit)
        removed += unit.size
    return removed


def clear(key: bytes, budget: Budget) -> int:
    """Remove every entry of the budget's folders; returns the bytes removed."""
    removed = 0
    for folder, kind in budget:
        for unit in units(key, folder, kind).values():
            remove(folder, unit)
            removed += unit.size
    return removed


def usage(key: bytes, budget: Budget) -> list[tuple[Path, int, int]]:
    """(folder, entries, bytes) of each folder of the budget."""
    rows = []
    for folder, kind in budget:
        found = units(key, folder, kind)
        rows.append((folder, len(found), sum(unit.size for unit in found.values())))
    return rows


def plan_entry(key: bytes, folder: Path, name: str) -> Unit | None:
    """The plans entry ``name`` (``<key>/<entry>``) of ``folder`` if this cache wrote it (its
    meta.json is owned), else None."""
    key_name, entry = name.split("/")
    scan = _Scan(key, "plans")
    with _path(folder, (key_name,)) as fds:
        if fds is None:
            return None
        scan.plan_key(fds[-1], key_name, only=entry)
    return scan.units.get(name)


def discard(key: bytes, folder: Path, name: str) -> bool:
    """Remove the plans entry ``name`` of ``folder`` if this cache wrote it; anything else
    there is left alone. True when it was removed."""
    unit = plan_entry(key, folder, name)
    if unit is not None:
        remove(folder, unit)
    return unit is not None
