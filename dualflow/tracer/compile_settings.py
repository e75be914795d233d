"""``compile``'s settings: checking them where they are set, and switching compilation off."""

from __future__ import annotations

from typing import Any

from dualflow._config import env_flag
from dualflow.errors import ConfigError

DISABLED = [env_flag("DUALFLOW_DISABLE_COMPILE")]  # a list: one flag every module shares


def disable_compile(disabled: bool = True) -> None:
    """Make every compiled function run eagerly (``DUALFLOW_DISABLE_COMPILE=1`` does the same).

    Example:
        >>> disable_compile(True); disable_compile(False)
    """
    DISABLED[0] = bool(disabled)


def check_settings(max_traces: Any, fallback: Any, lazy: Any = True) -> None:
    """``compile``'s own settings, checked where they are set (a ConfigError naming each)."""
    if lazy not in (True, False, "always"):
        raise ConfigError(f"compile: lazy must be True, False or 'always', got {lazy!r}")
    if isinstance(max_traces, bool) or not isinstance(max_traces, int) or max_traces < 0:
        raise ConfigError(f"compile: max_traces={max_traces!r} must be an int >= 0")
    if fallback not in ("eager", "error"):
        raise ConfigError(f"compile: fallback must be 'eager' or 'error', got {fallback!r}")
