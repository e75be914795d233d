"""One owner for the process's background work, below every compute layer (DESIGN §1).

- ``process``: ``owner()``, the ``Background`` object holding the kernel worker threads, the
  services (the kernel compile worker process and its reader thread), the SIGINT wrapper and
  the tuning of OpenBLAS's threads; all started lazily, ended by ``shutdown()``, fresh in a
  forked child.
- ``workers``: the worker threads (they sleep on a lock while idle, never spin).
- ``sigint``: holding Ctrl-C while a compiled call commits.
- ``blas``: numpy's OpenBLAS thread count, and its idle threads made to sleep at once.

The thread count comes from ``os.sched_getaffinity``, ``DUALFLOW_NUM_THREADS`` or
``set_num_threads`` (as ``torch.set_num_threads``, it applies to the GEMMs' BLAS too).
"""

from __future__ import annotations

import operator

from dualflow.background.process import MAX_THREADS, configured_threads, owner, replace
from dualflow.errors import ConfigError

__all__ = ["get_num_threads", "owner", "set_num_threads", "shutdown"]

if configured_threads() is not None:  # read at import: OpenBLAS's GEMMs get it from the start
    owner()


def get_num_threads() -> int:
    """How many threads one kernel call is split over (``torch.get_num_threads``).

    Example:
        >>> get_num_threads() >= 1
        True
    """
    return owner().threads


def set_num_threads(count: int) -> None:
    """Split kernel calls over ``count`` threads, and run OpenBLAS's GEMMs on as many
    (``torch.set_num_threads``); the worker threads start again at the next call. Call it
    between kernel calls, not from inside one (it waits for the call using the workers).

    Raises:
        ConfigError: ``count`` is not a whole number in [1, 1024].

    Example:
        >>> before = get_num_threads()
        >>> set_num_threads(1); get_num_threads()
        1
        >>> set_num_threads(before)
    """
    try:
        value = -1 if isinstance(count, bool) else operator.index(count)  # numpy ints too
    except TypeError:
        value = -1
    if not 1 <= value <= MAX_THREADS:
        raise ConfigError(f"set_num_threads({count!r}): the count must be an int in [1, 1024]")
    replace(value, explicit=True)


def shutdown() -> None:
    """End the background work: worker threads, the compile worker process, the SIGINT
    wrapper (its wrapped handler goes back). Whatever is used next starts again.

    Example:
        >>> shutdown(); owner().crew.started
        False
    """
    owner().shutdown()
