"""One per-thread Config and the context managers that change it (grad mode, train, debug).

The environment table at the bottom lists every DUALFLOW_* variable the package reads, so there
is exactly one place to look them up.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


class Config(threading.local):
    """Per-thread flags read on the hot path; class attributes are the defaults of a new thread.

    Threads matter because the loopback communicator runs ranks as threads in one process.
    """

    grad_enabled: bool = True
    train: bool = True
    debug: bool = _env_flag("DUALFLOW_DEBUG")

    def snapshot(self) -> tuple[bool, bool, bool]:
        """The flags that change what a traced function computes (part of a compile cache key)."""
        return (self.grad_enabled, self.train, self.debug)


config = Config()


@contextlib.contextmanager
def using_config(**flags: Any) -> Iterator[None]:
    """Temporarily set config flags on this thread.

    Example:
        >>> with using_config(train=False):
        ...     config.train
        False
    """
    for name in flags:
        if not hasattr(Config, name):
            raise AttributeError(f"unknown config flag {name!r}; known: grad_enabled, train, debug")
    old = {name: getattr(config, name) for name in flags}
    for name, value in flags.items():
        setattr(config, name, value)
    try:
        yield
    finally:
        for name, value in old.items():
            setattr(config, name, value)


def no_grad() -> contextlib.AbstractContextManager[None]:
    """Context in which ops record no tape (like ``torch.no_grad``).

    Example:
        >>> with no_grad():
        ...     config.grad_enabled
        False
    """
    return using_config(grad_enabled=False)


def enable_grad() -> contextlib.AbstractContextManager[None]:
    """Context that turns recording back on inside ``no_grad``.

    Example:
        >>> with no_grad(), enable_grad():
        ...     config.grad_enabled
        True
    """
    return using_config(grad_enabled=True)


def set_debug(enabled: bool = True) -> None:
    """Turn debug mode (NaN/Inf checks naming the op and the user's line) on or off.

    Example:
        >>> set_debug(False); config.debug
        False
    """
    config.debug = bool(enabled)
    Config.debug = bool(enabled)  # new threads inherit the choice too


def is_grad_enabled() -> bool:
    """Whether ops currently record a tape.

    Example:
        >>> is_grad_enabled()
        True
    """
    return config.grad_enabled


def cache_dir() -> Path:
    """The one root of dualflow's disk caches: ``$DUALFLOW_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/dualflow``, else ``~/.cache/dualflow`` (never a shared temp folder).

    Only the location: ``dualflow.disk_cache`` creates it (mode 0700) and refuses it when
    another user could write it.

    Example:
        >>> cache_dir().is_absolute()
        True
    """
    root = os.environ.get("DUALFLOW_CACHE_DIR")
    if root:
        return Path(os.path.abspath(os.path.expanduser(root)))
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    # the XDG spec: a relative XDG_CACHE_HOME is invalid and must be ignored
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "dualflow"


def cache_limit() -> int:
    """Bytes the disk caches under one root may hold before the least recently used entries
    are removed (``$DUALFLOW_CACHE_MAX_MB``, default 512 MB).

    Example:
        >>> cache_limit() > 0
        True
    """
    try:
        megabytes = float(os.environ.get("DUALFLOW_CACHE_MAX_MB") or 512)
    except ValueError:
        megabytes = 512.0
    return max(int(megabytes * 2**20), 0)


# Every environment variable dualflow reads, with what it does.
ENVIRONMENT = {
    "DUALFLOW_DEBUG": "1 turns on debug mode (NaN/Inf checks with source lines) at import",
    "DUALFLOW_DISABLE_COMPILE": "1 runs every @dualflow.compile function eagerly",
    "DUALFLOW_PASSES": "O0/O1/O2/exact or a comma-separated pass list for compiled functions",
    "DUALFLOW_DUMP_IR": "directory where the pass manager dumps every intermediate graph",
    "DUALFLOW_VERIFY_PASSES": "1 verifies the graph after every pass (the test suite sets it)",
    "DUALFLOW_CACHE_DIR": "root of the kernel/bytecode caches (default $XDG_CACHE_HOME/dualflow, "
    "else ~/.cache/dualflow); must be owned by you and writable only by you",
    "DUALFLOW_CACHE_MAX_MB": "size limit of each cache folder in MB (default 512), LRU-trimmed",
    "DUALFLOW_PLAN_CACHE": "folder (or 1: <cache root>/plans) where compiled plans persist",
    "DUALFLOW_BACKGROUND_COMPILE": "0 compiles fused CPU kernels in the calling process instead "
    "of a worker process (the blocked evaluator runs them until the worker's are ready)",
    "DUALFLOW_MALLOC_TUNING": "0 keeps glibc's default malloc thresholds (see dualflow/_memory.py)",
    "DUALFLOW_COLLECTIVE_TIMEOUT": "seconds a collective waits for the other ranks before the "
    "watchdog aborts the job: a finite number > 0 (default 300; per communicator: comm.timeout)",
}
