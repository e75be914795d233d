"""Hold Ctrl-C while a compiled call commits, so a call leaves all old or all new state.

Swapping the SIGINT handler around every call costs microseconds; instead a wrapper handler is
installed once (on the main thread, the only one Python delivers signals to) around whatever
handler was there, and holding is a counter. An interrupt that arrives while held is delivered,
to the handler it wrapped, as soon as the call has committed.
"""

from __future__ import annotations

import _signal  # the C functions: signal.getsignal converts to an enum on every call
import signal
import threading
from typing import Any

_MAIN = threading.main_thread().ident
_state: dict[str, Any] = {"held": 0, "pending": None, "wrapped": signal.default_int_handler}


def _handler(number: int, frame: Any) -> None:
    if _state["held"]:
        _state["pending"] = frame
        return
    _deliver(number, frame)


def _deliver(number: int, frame: Any) -> None:
    wrapped = _state["wrapped"]
    if callable(wrapped):
        wrapped(number, frame)
    elif wrapped != signal.SIG_IGN:  # SIG_DFL: what Python does by default for Ctrl-C
        raise KeyboardInterrupt


def hold() -> bool:
    """Start holding SIGINT; returns whether it is held (only the main thread can)."""
    if threading.get_ident() != _MAIN:
        return False
    current = _signal.getsignal(signal.SIGINT)
    if current is not _handler:  # first use, or the program installed its own since: wrap it
        try:
            signal.signal(signal.SIGINT, _handler)
        except ValueError:  # not the main interpreter
            return False
        _state["wrapped"] = current
    _state["held"] += 1
    return True


def release() -> None:
    """Stop holding; an interrupt that arrived meanwhile is delivered now.

    Example:
        >>> hold(); release()
        True
    """
    _state["held"] -= 1
    if not _state["held"] and _state["pending"] is not None:
        frame, _state["pending"] = _state["pending"], None
        _deliver(signal.SIGINT, frame)
