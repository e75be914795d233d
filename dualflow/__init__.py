"""dualflow: define-by-run deep learning whose training steps compile to optimized graphs.

This module is the public API only; see README.md for a tour.
"""

import sys as _sys

from dualflow import errors, nn, ops, optim, random, training
from dualflow._config import (
    Config,
    config,
    enable_grad,
    is_grad_enabled,
    no_grad,
    set_debug,
    using_config,
)
from dualflow._memory import tune_malloc as _tune_malloc
from dualflow.autograd import (
    backward,
    grad,
    gradcheck,
)
from dualflow.device import Device, get_array_module
from dualflow.serialization import load, save
from dualflow.tensor import Tensor, as_tensor, tensor
from dualflow.tracer import compile, disable_compile, explain

_tune_malloc()  # see dualflow/_memory.py: large temporaries reuse heap memory

# `dualflow.gradcheck` is the public name of the checks that live in the autograd layer.
_sys.modules[__name__ + ".gradcheck"] = gradcheck

__version__ = "0.1.0"

__all__ = [
    "Config",
    "Device",
    "Tensor",
    "as_tensor",
    "backward",
    "compile",
    "config",
    "disable_compile",
    "enable_grad",
    "errors",
    "explain",
    "get_array_module",
    "grad",
    "gradcheck",
    "is_grad_enabled",
    "load",
    "nn",
    "no_grad",
    "ops",
    "optim",
    "random",
    "save",
    "set_debug",
    "tensor",
    "training",
    "using_config",
]
