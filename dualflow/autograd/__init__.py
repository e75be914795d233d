"""Eager autograd: the eager interpreter (the default one, which ``dualflow/__init__`` installs
into ``ops``) and the engine; the tape a Tensor carries is ``dualflow/tensor/tape.py``."""

from dualflow.autograd import eager  # noqa: F401 - dualflow.autograd.eager, as before
from dualflow.autograd.engine import backward, grad

__all__ = ["backward", "grad"]
