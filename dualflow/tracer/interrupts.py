"""Hold Ctrl-C while a compiled call commits, so a call leaves all old or all new state.

The SIGINT wrapper and its state belong to the background owner (``dualflow.background.sigint``:
installed at the first hold, removed by ``dualflow.background.shutdown()``); these are the two
calls the tracer makes around a commit.
"""

from __future__ import annotations

from dualflow.background.process import owner


def hold() -> bool:
    """Start holding SIGINT; returns whether it is held (only the main thread can).

    Example:
        >>> held = hold()
        >>> release() if held else None
    """
    return owner().sigint.hold()


def release() -> None:
    """Stop holding; an interrupt that arrived meanwhile is delivered now.

    Example:
        >>> hold(); release()
        True
    """
    owner().sigint.release()
