"""One per-thread Config and the context managers that change it (grad mode, train, debug).

The environment table at the bottom lists every DUALFLOW_* variable the package reads, so there
is exactly one place to look them up.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from pathlib import Path
from typing import Any

from dualflow.errors import ConfigError

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def env_flag(name: str, default: bool = False) -> bool:
    """The boolean environment variable ``name`` (unset: ``default``), read when called.

    Raises:
        ConfigError: it holds something other than 1/true/yes/on or 0/false/no/off.

    Example:
        >>> os.environ["DUALFLOW_DOC_FLAG"] = "On"
        >>> env_flag("DUALFLOW_DOC_FLAG"), env_flag("DUALFLOW_DOC_UNSET", default=True)
        (True, True)
        >>> os.environ["DUALFLOW_DOC_FLAG"] = "2"
        >>> try:
        ...     env_flag("DUALFLOW_DOC_FLAG")
        ... except ConfigError as exc:
        ...     print(str(exc)[:45])
        DUALFLOW_DOC_FLAG='2' is not a flag: use 1/tr
        >>> del os.environ["DUALFLOW_DOC_FLAG"]
    """
    text = os.environ.get(name)
    if text is None:
        return default
    value = text.strip().lower()
    if value not in _TRUE + _FALSE:
        raise ConfigError(
            f"{name}={text!r} is not a flag: use 1/true/yes/on or 0/false/no/off (or unset it)"
        )
    return value in _TRUE


def env_number(name: str, default: float, low: float, high: float, unit: str = "") -> float:
    """The numeric environment variable ``name`` (unset or empty: ``default``), which must be a
    finite number in ``[low, high]``; read when called.

    Raises:
        ConfigError: it is not a number, not finite, or out of range (the message says which).

    Example:
        >>> os.environ["DUALFLOW_DOC_MB"] = "nan"
        >>> env_number("DUALFLOW_DOC_MB", 1, 0, 10, "MB")
        Traceback (most recent call last):
        ...
        dualflow.errors.ConfigError: DUALFLOW_DOC_MB='nan' must be a finite number of MB in [0, 10]
        >>> del os.environ["DUALFLOW_DOC_MB"]
    """
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and low <= value <= high):
        what = f"a finite number of {unit}" if unit else "a finite number"
        raise ConfigError(f"{name}={text!r} must be {what} in [{_plain(low)}, {_plain(high)}]")
    return value


def _plain(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else repr(number)


def user_path(value: str | os.PathLike) -> Path:
    """A folder setting as the user means it: ``~`` and ``~user`` expanded (like a shell).

    Example:
        >>> user_path("~/pc") == Path.home() / "pc"
        True
    """
    return Path(os.path.expanduser(os.fspath(value)))


AUTOCAST_THREADS: set[int] = set()  # threads whose config.autocast is on (see Config.autocast)


class Config(threading.local):
    """Per-thread flags read on the hot path; class attributes are the defaults of a new thread.

    Threads matter because the loopback communicator runs ranks as threads in one process.
    """

    grad_enabled: bool = True
    train: bool = True
    debug: bool = env_flag("DUALFLOW_DEBUG")  # read at import: it applies to every op
    _autocast: tuple[tuple[str, str], ...] | None = None

    @property
    def autocast(self) -> tuple[tuple[str, str], ...] | None:
        """dualflow.amp.autocast: ((device type, low dtype name), ...) or None when off."""
        return self._autocast

    @autocast.setter
    def autocast(self, setting: tuple[tuple[str, str], ...] | None) -> None:
        self._autocast = setting
        # which threads have it on: dispatch skips the per-thread read while none has
        if setting is None:
            AUTOCAST_THREADS.discard(threading.get_ident())
        else:
            AUTOCAST_THREADS.add(threading.get_ident())

    def snapshot(self) -> tuple[bool, bool, bool, tuple | None]:
        """The flags that change what a traced function computes (part of a compile cache key)."""
        return (self.grad_enabled, self.train, self.debug, self.autocast)


config = Config()


class _UsingConfig(contextlib.ContextDecorator):
    """``using_config``'s context manager: a class, not a generator (~1 us a ``with`` instead of
    ~2.7; ``grad()`` and every ``no_grad`` block enter one). Each entry saves the flags it
    changes on a stack, so one instance may be entered again inside itself (a decorated
    recursive function)."""

    def __init__(self, flags: dict[str, Any]) -> None:
        self.flags, self.saved = flags, []

    def __enter__(self) -> None:
        flags = self.flags
        for name in flags:
            if not hasattr(Config, name):
                raise AttributeError(
                    f"unknown config flag {name!r}; known: grad_enabled, train, debug, autocast"
                )
        saved = []  # a loop, not a comprehension: no function frame
        for name, value in flags.items():
            saved.append((name, getattr(config, name)))
            setattr(config, name, value)
        self.saved.append(saved)

    def __exit__(self, *exc: object) -> None:
        for name, value in self.saved.pop():
            setattr(config, name, value)


def using_config(**flags: Any) -> contextlib.AbstractContextManager[None]:
    """Temporarily set config flags on this thread (also a function decorator).

    Example:
        >>> with using_config(train=False):
        ...     config.train
        False
    """
    return _UsingConfig(flags)


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

    Raises:
        ConfigError: ``enabled`` is not a bool (or 0/1): ``set_debug("no")`` must not mean on.

    Example:
        >>> set_debug(False); config.debug
        False
    """
    value = enabled.item() if getattr(enabled, "shape", None) == () else enabled  # np.bool_
    if not isinstance(value, (bool, int)) or value not in (0, 1):
        raise ConfigError(f"set_debug({enabled!r}): enabled must be True or False")
    config.debug = bool(value)
    Config.debug = bool(value)  # new threads inherit the choice too


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
        return Path(os.path.abspath(user_path(root)))
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    # the XDG spec: a relative XDG_CACHE_HOME is invalid and must be ignored
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "dualflow"


CACHE_MAX_MB = 2**30  # a petabyte: larger is surely a typo


def cache_limit() -> int:
    """Bytes the disk caches under one root may hold before the least recently used entries
    are removed (``$DUALFLOW_CACHE_MAX_MB``, default 512 MB; read at every write).

    Raises:
        ConfigError: ``DUALFLOW_CACHE_MAX_MB`` is not a finite number in [0, 2**30].

    Example:
        >>> cache_limit() > 0
        True
    """
    return int(env_number("DUALFLOW_CACHE_MAX_MB", 512, 0, CACHE_MAX_MB, "MB") * 2**20)


# Every environment variable dualflow reads, with what it does.
ENVIRONMENT = {
    "DUALFLOW_DEBUG": "1 turns on debug mode (NaN/Inf checks with source lines) at import",
    "DUALFLOW_DISABLE_COMPILE": "1 runs every @dualflow.compile function eagerly",
    "DUALFLOW_UNTESTED_PYTHON": "1 compiles on a Python the tracer's probe is not tested on",
    "DUALFLOW_PASSES": "O0/O1/O2/exact or a comma-separated pass list for compiled functions",
    "DUALFLOW_DUMP_IR": "directory where the pass manager dumps every intermediate graph",
    "DUALFLOW_VERIFY_PASSES": "1 verifies the graph after every pass (the test suite sets it)",
    "DUALFLOW_CACHE_DIR": "root of the kernel/bytecode caches (default $XDG_CACHE_HOME/dualflow, "
    "else ~/.cache/dualflow); must be owned by you and writable only by you",
    "DUALFLOW_CACHE_MAX_MB": "size limit of each cache folder in MB (default 512), LRU-trimmed",
    "DUALFLOW_PLAN_CACHE": "folder (or 1: <cache root>/plans) where compiled plans persist",
    "DUALFLOW_NUM_THREADS": "threads a CPU kernel call is split over, and OpenBLAS's GEMMs use "
    "(a whole number in [1, 1024]; default: the CPUs os.sched_getaffinity allows)",
    "DUALFLOW_BACKGROUND_COMPILE": "0 compiles fused CPU kernels in the calling process instead "
    "of a worker process (the blocked evaluator runs them until the worker's are ready)",
    "DUALFLOW_NATIVE_THREADS": "0 splits fused CPU kernels over Python worker threads only, not "
    "the native crew's threads that run without the GIL (read at import)",
    "DUALFLOW_MALLOC_TUNING": "0 keeps glibc's default malloc thresholds (see dualflow/_memory.py)",
    "DUALFLOW_CHECKPOINT_MAX_GB": "most GiB a checkpoint's arrays may take once decompressed "
    "(default 4; dualflow.load(..., max_bytes=) per call)",
    "DUALFLOW_CUDNN": "0 runs convolutions and pooling on GPU without cuDNN (read at import)",
    "DUALFLOW_CUDNN_TF32": "1 lets float32 convolutions use cuDNN where it would use TF32 math",
    "DUALFLOW_MACHINE_CONSTANTS": "defaults: the cost constants measured once per machine "
    "(thin-rows GEMM route, remat balance, kernel part sizes) take fixed defaults (the test suite "
    "sets it); measured (or unset): measured and kept in the kernels cache",
    "DUALFLOW_COLLECTIVE_TIMEOUT": "seconds a collective waits for the other ranks before the "
    "watchdog aborts the job: a finite number > 0 (default 300; per communicator: comm.timeout)",
}
