"""Eager autograd: the eager interpreter (installed as the default), the tape and the engine."""

from dualflow.autograd import eager  # noqa: F401 - installs the eager interpreter
from dualflow.autograd.engine import backward, grad

__all__ = ["backward", "grad"]
