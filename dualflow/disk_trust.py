"""Trust checks under the disk caches: who owns a folder or file, the per-user key, signatures.

A cache folder is used only when no other user can write it (checked as ssh checks its keys),
and every entry starts with an HMAC-SHA256 of its name and bytes under a per-user secret key kept
in the cache root. Only regular files of bounded size are read, without following links or
blocking on FIFOs. ``disk_cache`` builds the stores on these.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import stat
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from dualflow._config import cache_dir

KEY_NAME = "secret.key"
# then 32 hex digits of the owner tag (HMAC of the name alone: who wrote it, from the header
# only), a space, 64 hex digits of the tag of name and bytes, and a newline
_MAGIC = b"#dualflow-signed2 "
LEGACY_MAGIC = b"#dualflow-signed "  # entries before owner tags: ignored quietly, rewritten
_OWNER_HEX = 32
HEADER_BYTES = len(_MAGIC) + _OWNER_HEX + 1 + 65
_TEMP = ".tmp-"  # then 12 hex digits of a nonce, 12 of its tag under the key, "-", random
_TEMP_LEN = len(_TEMP) + 24 + 1
MAX_ENTRY = 256 * 2**20  # no single cache file is read beyond this
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # no FIFO waits, no links
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_LOCK = threading.Lock()
_WARNED: set[str] = set()


class Untrusted(OSError):
    """A cache file or folder that must not be used (not regular, foreign, too big...)."""


def warn_once(message: str) -> None:
    """Warn ``message`` (a RuntimeWarning) the first time this process sees it."""
    with _LOCK:
        if message in _WARNED:
            return
        _WARNED.add(message)
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def own_problem(info: os.stat_result, what: str) -> str | None:
    """Why a cache folder or file cannot be trusted: another owner, or others may write it.

    Example:
        >>> own_problem(os.stat(tempfile.mkdtemp()), "it") is None
        True
    """
    if info.st_uid != os.geteuid():
        return f"{what} is owned by uid {info.st_uid}, not by you (uid {os.geteuid()})"
    if info.st_mode & 0o022:
        return f"{what} is writable by group or others (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def ancestors_problem(path: Path) -> str | None:
    """Why a folder above ``path`` would let another user swap the cache: as ssh requires, each
    belongs to you or root and no one else may write it, unless its sticky bit forbids others
    to rename what is not theirs (``/tmp``)."""
    for parent in path.parents:
        info = os.stat(parent)
        if info.st_uid not in (0, os.geteuid()):
            return f"{parent} is owned by uid {info.st_uid}"
        if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
            return f"{parent} is writable by group or others (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def make_private(path: Path) -> None:
    """Create ``path`` and its missing parents, each with mode 0700."""
    missing = []
    while not os.path.lexists(path) and path != path.parent:
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, 0o700)


def read_regular(
    path: Path | str, limit: int, own: bool = True, dir_fd: int | None = None
) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; ``own``: also owned by you and
    writable by no one else. A symlink, FIFO or device is refused without blocking.

    Raises:
        FileNotFoundError: there is no such file.
        Untrusted: the file must not be read (why is the message).

    Example:
        >>> read_regular("/dev/zero", 10, own=False)
        Traceback (most recent call last):
        ...
        dualflow.disk_trust.Untrusted: /dev/zero is not a regular file
    """
    fd = open_safely(path, _OPEN, dir_fd)
    try:
        return _read_fd(fd, path, limit, own)
    finally:
        os.close(fd)


def open_safely(path: Path | str, flags: int = _OPEN_DIR, dir_fd: int | None = None) -> int:
    """``os.open`` without following a symlink: a link, or a folder that is not one, raises
    ``Untrusted`` (a missing path ``FileNotFoundError``)."""
    try:
        return os.open(path, flags, dir_fd=dir_fd)
    except (FileNotFoundError, NotADirectoryError) as exc:
        if isinstance(exc, NotADirectoryError) and flags & os.O_DIRECTORY:
            raise Untrusted(f"{path} is not a folder (links are refused)") from None
        raise FileNotFoundError(exc.errno, exc.strerror, str(path)) from None
    except OSError as exc:  # ELOOP: a symlink
        raise Untrusted(f"{path} cannot be opened safely ({exc.strerror})") from None


def _read_fd(fd: int, path: Path | str, limit: int, own: bool) -> bytes:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise Untrusted(f"{path} is not a regular file")
    problem = own_problem(info, str(path)) if own else None
    if problem is not None:
        raise Untrusted(problem)
    if info.st_size > limit:
        raise Untrusted(f"{path} holds {info.st_size} bytes, more than {limit}")
    with os.fdopen(os.dup(fd), "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise Untrusted(f"{path} grew beyond {limit} bytes while read")
    if own:  # the LRU order: atime is the last use (mtime stays, numba-style stamps use it)
        with contextlib.suppress(OSError):
            os.utime(fd, ns=(time.time_ns(), info.st_mtime_ns))
    return data


@dataclass
class Root:
    """A trusted cache root: its real path and the per-user key entries are signed with."""

    path: Path
    key: bytes
    key_id: tuple[int, int] = (0, 0)  # (inode, mtime) of the key file this key came from
    written: int = 0  # bytes this process wrote since the last trim
    trimmed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def refresh_key(self) -> bool:
        """Re-read the key when its file was replaced (the cache was deleted and recreated by
        another process); True when the key changed."""
        try:
            info = os.stat(self.path / KEY_NAME)
        except OSError:
            return False
        if (info.st_ino, info.st_mtime_ns) == self.key_id:
            return False
        try:
            self.key, self.key_id = load_key(self.path)
        except OSError:
            return False
        return True


def load_key(root: Path) -> tuple[bytes, tuple[int, int]]:
    """The root's secret key (32 random bytes, mode 0600), created on first use.

    Raises:
        Untrusted: the key file is a link, foreign, or readable by others.
    """
    path = root / KEY_NAME
    for _ in range(3):
        try:
            fd = os.open(path, _OPEN)
        except FileNotFoundError:
            _create_key(path)
            continue
        try:
            info = os.fstat(fd)
            data = _read_fd(fd, path, 64, own=True)
        finally:
            os.close(fd)
        if stat.S_IMODE(info.st_mode) & 0o077:
            raise Untrusted(f"{path} is readable by others (mode {stat.S_IMODE(info.st_mode):o})")
        if len(data) == 32:
            return data, (info.st_ino, info.st_mtime_ns)
        os.unlink(path)  # cut short (a full disk): a new key; entries signed with it are rebuilt
    raise Untrusted(f"{path} could not be created")


def _create_key(path: Path) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-key-")  # mode 0600
    try:
        os.write(fd, os.urandom(32))  # no fsync: a key cut short by a crash is replaced
        os.close(fd)
        os.link(tmp, path)  # atomic and exclusive: a concurrent first use keeps one key
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)


_ROOTS: dict[Path, Root | None] = {}
PROBLEMS: dict[Path, str | None] = {}  # why a root was refused (None: it is used)


def trusted_root(path: Path | None = None) -> Root | None:
    """The cache root at ``path`` (default ``_config.cache_dir()``), created 0700; None (with one
    warning) when another user could write it or it cannot be created.

    Example:
        >>> trusted_root(Path(tempfile.mkdtemp()) / "c").path.stat().st_mode & 0o777 == 0o700
        True
    """
    path = cache_dir() if path is None else path
    with _LOCK:
        if path in _ROOTS:
            return _ROOTS[path]
    transient = False
    for _ in range(3):  # a root deleted while it is set up is created again
        try:
            root, problem = _open_root(path)
            transient = False
            break
        except FileNotFoundError as exc:  # deleted again: this call goes without, the next retries
            root, problem, transient = None, str(exc), True
        except OSError as exc:
            root, problem = None, str(exc)
            break
    if transient:  # being deleted (`dualflow cache clear`): no verdict, no warning
        return None
    if root is None:
        warn_once(f"dualflow: not using the disk cache at {path}: {problem}; running without it")
    with _LOCK:
        PROBLEMS.setdefault(path, problem)
        return _ROOTS.setdefault(path, root)


def _open_root(path: Path) -> tuple[Root | None, str | None]:
    make_private(path)
    real = Path(os.path.realpath(path))
    info = os.lstat(real)
    problem = None if stat.S_ISDIR(info.st_mode) else f"{real} is not a folder"
    problem = problem or own_problem(info, str(real)) or ancestors_problem(real)
    return (None, problem) if problem else (Root(real, *load_key(real)), None)


def folder_problem(directory: Path) -> str | None:
    """Why a cache folder (created 0700 here if missing) cannot be trusted, else None.

    Raises:
        FileNotFoundError: it kept disappearing while it was created (deleted concurrently).
    """
    problem = None
    for _ in range(3):  # a folder deleted while it is checked is created again
        try:
            make_private(directory)
            real = Path(os.path.realpath(directory))
            info = os.lstat(real)
            if not stat.S_ISDIR(info.st_mode):
                return f"{real} is not a folder"
            return own_problem(info, str(real)) or ancestors_problem(real)
        except FileNotFoundError as exc:
            problem = str(exc)
        except OSError as exc:
            return str(exc)
    raise FileNotFoundError(problem)  # deleted again and again: not a verdict on the folder


def sign(key: bytes, name: str, payload: bytes) -> bytes:
    """The signed form of an entry: a header line with the owner tag of ``name`` and
    HMAC-SHA256(key, name, payload), then the payload (a Python source stays valid Python: the
    header is a comment).

    Example:
        >>> sign(b"k" * 32, "kernels/a.py", b"x = 1\\n").startswith(b"#dualflow-signed2 ")
        True
    """
    owner = _owner(key, name).hex().encode()
    return _MAGIC + owner + b" " + _tag(key, name, payload).hex().encode() + b"\n" + payload


def owns(key: bytes, name: str, head: bytes) -> bool:
    """Whether ``head`` (a file's first ``HEADER_BYTES``) is the header this key wrote for an
    entry named ``name``: how the trim knows a file is the cache's without reading it all.

    Example:
        >>> key = b"k" * 32
        >>> owns(key, "a", sign(key, "a", b"1")), owns(key, "b", sign(key, "a", b"1"))
        (True, False)
    """
    if len(head) < HEADER_BYTES or not head.startswith(_MAGIC):
        return False
    stored = head[len(_MAGIC) : len(_MAGIC) + _OWNER_HEX]
    return hmac.compare_digest(stored, _owner(key, name).hex().encode())


def verify(key: bytes, name: str, data: bytes) -> bytes | None:
    """The payload of a signed entry, or None when its tags do not match its name and bytes.

    Example:
        >>> key = b"k" * 32
        >>> verify(key, "a", sign(key, "a", b"1")), verify(key, "b", sign(key, "a", b"1"))
        (b'1', None)
    """
    if not owns(key, name, data) or data[HEADER_BYTES - 1] != 10:
        return None
    try:
        tag = bytes.fromhex(data[HEADER_BYTES - 65 : HEADER_BYTES - 1].decode("ascii"))
    except ValueError:
        return None
    payload = data[HEADER_BYTES:]
    return payload if hmac.compare_digest(tag, _tag(key, name, payload)) else None


def temp_prefix(key: bytes) -> str:
    """A prefix for a temporary file or folder that marks it as written by the cache of
    ``key`` (``is_temp``): a crashed write's leftovers are removed, a user's ``.tmp-*`` never.

    Example:
        >>> key = b"k" * 32
        >>> is_temp(key, temp_prefix(key) + "x"), is_temp(key, ".tmp-big.bin")
        (True, False)
    """
    nonce = os.urandom(6).hex()
    return f"{_TEMP}{nonce}{_temp_tag(key, nonce)}-"


def is_temp(key: bytes, name: str) -> bool:
    """Whether ``name`` was made by ``temp_prefix(key)``."""
    if len(name) < _TEMP_LEN or not name.startswith(_TEMP) or name[_TEMP_LEN - 1] != "-":
        return False
    nonce, tag = name[len(_TEMP) : len(_TEMP) + 12], name[len(_TEMP) + 12 : _TEMP_LEN - 1]
    return hmac.compare_digest(tag, _temp_tag(key, nonce))


def _temp_tag(key: bytes, nonce: str) -> str:
    return hmac.new(key, b"temp\0" + nonce.encode(), hashlib.sha256).hexdigest()[:12]


def _owner(key: bytes, name: str) -> bytes:
    return hmac.new(key, b"owner\0" + name.encode(), hashlib.sha256).digest()[:16]


def _tag(key: bytes, name: str, payload: bytes) -> bytes:
    mac = hmac.new(key, name.encode() + b"\0", hashlib.sha256)
    mac.update(payload)
    return mac.digest()
