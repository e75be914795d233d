"""Holding Ctrl-C while a compiled call commits, so a call leaves all old or all new state.

Swapping the SIGINT handler around every call costs microseconds; instead a wrapper handler is
installed once (on the main thread, the only one Python delivers signals to) around whatever
handler was there, and holding is a counter. An interrupt that arrives while held is delivered,
to the handler it wrapped, as soon as the call has committed. ``remove`` puts the wrapped
handler back (``dualflow.background.shutdown``); the next hold installs the wrapper again.
"""

from __future__ import annotations

import _signal  # the C functions: signal.getsignal converts to an enum on every call
import signal
import threading
from typing import Any


class SigintHold:
    """The wrapper's state: how deep the holds are, an interrupt held back, the handler wrapped.

    Example:
        >>> hold = SigintHold()
        >>> hold.hold(), hold.held
        (True, 1)
        >>> hold.release(); hold.remove(); hold.installed()
        False
    """

    def __init__(self) -> None:
        self.held = 0
        self.pending: Any = None
        self.wrapped: Any = signal.default_int_handler
        self.main = threading.main_thread().ident

    def _handler(self, number: int, frame: Any) -> None:
        if self.held:
            self.pending = frame
            return
        self._deliver(number, frame)

    def _deliver(self, number: int, frame: Any) -> None:
        wrapped = self.wrapped
        if callable(wrapped):
            wrapped(number, frame)
        elif wrapped != signal.SIG_IGN:  # SIG_DFL: what Python does by default for Ctrl-C
            raise KeyboardInterrupt

    def installed(self) -> bool:
        """Whether the wrapper is the process's SIGINT handler now."""
        return _signal.getsignal(signal.SIGINT) == self._handler

    def hold(self) -> bool:
        """Start holding SIGINT; returns whether it is held (only the main thread can)."""
        if threading.get_ident() != self.main:
            return False
        current = _signal.getsignal(signal.SIGINT)
        if current != self._handler:  # first use, or the program installed its own since
            try:
                signal.signal(signal.SIGINT, self._handler)
            except ValueError:  # not the main interpreter
                return False
            self.wrapped = current
        self.held += 1
        return True

    def release(self) -> None:
        """Stop holding; an interrupt that arrived meanwhile is delivered now."""
        self.held -= 1
        if not self.held and self.pending is not None:
            frame, self.pending = self.pending, None
            self._deliver(signal.SIGINT, frame)

    def remove(self) -> None:
        """Put the wrapped handler back, when the wrapper is installed, nothing is held and this
        is the main thread (elsewhere Python cannot change handlers: left as it is)."""
        if self.held or threading.get_ident() != self.main or not self.installed():
            return
        try:
            signal.signal(signal.SIGINT, self.wrapped)
        except ValueError:
            return

    def after_fork(self) -> None:
        """In a forked child: the same holds (the child returns through the same calls) and
        handler (its memory is the parent's), and the thread that forked as the main one."""
        self.main = threading.get_ident()
