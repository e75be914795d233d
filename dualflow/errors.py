"""The dualflow exception hierarchy (DESIGN §9).

Every error names what failed, the offending shapes/dtypes/devices, where (the user's source line)
and how to fix it. `user_frame()` finds the first stack frame outside the dualflow package.
"""

from __future__ import annotations

import os
import sys
from typing import Any

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# folders inside the package whose code counts as user code, each filled in by the package that
# owns it at its import (the bench's workloads: their lines are where ops come from)
_USER_FOLDERS: list[str] = []
GENERATED_PREFIX = "<dualflow "  # file name prefix of code dualflow generates (ops, plans)
KERNEL_MODULE_PREFIX = "dualflow_kernels_"  # generated kernel modules (their file: the store)


class DualflowError(Exception):
    """Base class of every error dualflow raises on purpose."""


class ShapeError(DualflowError, ValueError):
    """An op got inputs whose shapes or ranks it cannot work with."""


class DTypeError(DualflowError, TypeError):
    """An op got inputs whose dtypes it cannot work with."""


class DeviceError(DualflowError, RuntimeError):
    """Inputs live on different or unsupported devices."""


class TracingError(DualflowError, RuntimeError):
    """A compiled function did something that cannot be traced safely."""


class RecomputeError(DualflowError, RuntimeError):
    """A checkpointed segment, re-run for backward, computed differently than in the forward
    (PyTorch's ``torch.utils.checkpoint.CheckpointError``)."""


class CompileError(DualflowError, RuntimeError):
    """Lowering or an optimization pass failed."""


class CheckpointError(DualflowError, OSError):
    """A checkpoint file is missing, truncated or corrupted, or its contents do not fit what
    they are loaded into (another optimizer's state, a value its target dtype cannot hold)."""


class ExportError(DualflowError, ValueError):
    """A model or graph cannot be exported (ONNX): an op without an equivalent, control flow
    on a value or a dynamic size, a training-mode forward."""


class ArgumentError(DualflowError, ValueError):
    """A public constructor got an argument of the wrong type or out of its range."""


class ConfigError(DualflowError, ValueError):
    """A setting (an environment variable, or an argument or attribute that configures dualflow)
    holds a value outside what it accepts; the message names the setting, the value and the
    accepted range."""


class CommunicatorError(DualflowError, RuntimeError):
    """A distributed communicator failed or ranks disagree."""


class NumericalError(DualflowError, FloatingPointError):
    """Debug mode found NaN or Inf in an op's output or gradient."""


def count_as_user_code(folder: str) -> None:
    """Make the frames of files under ``folder`` (inside dualflow) count as user code: for
    ``user_frame`` (the line an error names) and the tracer's environment probe (which follows
    user code). A package calls it for its own folder when it is imported.

    Example:
        >>> count_as_user_code(os.path.join(_PACKAGE_DIR, "bench"))  # as dualflow.bench does
        >>> os.path.join(_PACKAGE_DIR, "bench", "workloads.py").startswith(user_code_folders())
        True
    """
    path = os.path.join(os.path.abspath(folder), "")
    if path not in _USER_FOLDERS:
        _USER_FOLDERS.append(path)


def user_code_folders() -> tuple[str, ...]:
    """The folders inside dualflow whose code counts as user code (``count_as_user_code``).

    Example:
        >>> all(folder.endswith(os.sep) for folder in user_code_folders())
        True
    """
    return tuple(_USER_FOLDERS)


def user_frame(depth: int = 1) -> tuple[str, int] | None:
    """Return ``(filename, lineno)`` of the innermost frame outside the dualflow package (code
    under ``user_code_folders()``, e.g. the bench's workloads, counts as outside).

    Example:
        >>> user_frame() is not None
        True
    """
    frame, user_folders = sys._getframe(depth), tuple(_USER_FOLDERS)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith((_PACKAGE_DIR, GENERATED_PREFIX)) or filename.startswith(
            user_folders
        ):
            return filename, frame.f_lineno
        frame = frame.f_back
    return None


def format_location(loc: tuple[str, int] | None) -> str:
    """Render a source location as ``file.py:LINE`` (or ``<unknown>``).

    Example:
        >>> format_location(("/a/b/train.py", 41))
        '/a/b/train.py:41'
    """
    if loc is None:
        return "<unknown>"
    return f"{loc[0]}:{loc[1]}"


def with_location(message: str, loc: tuple[str, int] | None = None) -> str:
    """Append ``  at file.py:LINE`` (the user's line) to an error message.

    Example:
        >>> with_location("bad", ("x.py", 3))
        'bad\\n  at x.py:3'
    """
    if loc is None:
        loc = user_frame(2)
    return f"{message}\n  at {format_location(loc)}"


class LazyText:
    """Message text made only when a message is shown: the text of a size that is an
    expression (a dynamic-shape trace) is its value, a guard a trace would keep for nothing.

    Example:
        >>> f"got {LazyText(lambda: 'shape (2, 3)')}"
        'got shape (2, 3)'
    """

    __slots__ = ("make",)

    def __init__(self, make: Any) -> None:
        self.make = make

    def __format__(self, spec: str) -> str:
        return format(self.make(), spec)

    def __str__(self) -> str:
        return self.make()
