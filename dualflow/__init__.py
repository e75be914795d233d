"""dualflow: define-by-run deep learning whose training steps compile to optimized graphs.

This module is the public API only; see README.md for a tour. Names are loaded on first use
(PEP 562), so ``import dualflow.graph_ir`` loads and runs a saved graph without importing the
eager machinery (tensor, autograd, tracer), as DESIGN §1 asks.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from dualflow._config import (
    Config,
    config,
    enable_grad,
    is_grad_enabled,
    no_grad,
    set_debug,
    using_config,
)
from dualflow._installed import install as _install
from dualflow._memory import tune_malloc as _tune_malloc
from dualflow._version import __version__ as __version__
from dualflow.background import get_num_threads, set_num_threads
from dualflow.device import Device, get_array_module

_tune_malloc()  # see dualflow/_memory.py: large temporaries reuse heap memory


def _choose_blas_kernels() -> None:
    # before dualflow computes anything, so every call of the process rounds alike
    from dualflow.kernels.base.blas_core import apply  # noqa: PLC0415 - kept out of the namespace

    apply()


_choose_blas_kernels()


# What lower layers use from higher ones, installed here (dualflow/_installed.py): each loader
# runs at the first use, so importing a layer alone loads nothing above it.
def _eager_interpreter() -> Any:
    from dualflow.autograd.eager import EAGER  # noqa: PLC0415 - loaded at the first op call

    return EAGER


def _generator_source() -> Any:
    from dualflow.tensor.random import default_generator_for  # noqa: PLC0415

    return default_generator_for


def _backward() -> Any:
    from dualflow.autograd.engine import backward  # noqa: PLC0415

    return backward


_install("interpreter", _eager_interpreter)  # ops.dispatch: no interpreter active
_install("generator_source", _generator_source)  # ops.random_ops: generator=None
_install("backward", _backward)  # Tensor.backward

_FACTORIES = ("zeros", "ones", "full", "empty", "zeros_like", "ones_like", "full_like")
_FACTORIES += ("empty_like", "arange", "linspace")
_RANDOM = ("manual_seed", "initial_seed", "randn", "rand", "randint", "randn_like", "rand_like")
_RANDOM += ("randint_like",)

# public name -> the module that defines it (or the submodule itself)
_LAZY = {
    "Tensor": "dualflow.tensor.core",
    "tensor": "dualflow.tensor.core",
    "as_tensor": "dualflow.tensor.core",
    "from_dlpack": "dualflow.tensor.transfer",
    "backward": "dualflow.autograd",
    "grad": "dualflow.autograd",
    "compile": "dualflow.tracer",
    "disable_compile": "dualflow.tracer",
    "explain": "dualflow.tracer",
    "mark_dynamic": "dualflow.tracer",
    "mark_static": "dualflow.tracer",
    "save": "dualflow.serialization",
    "save_safetensors": "dualflow.interop",
    "load_safetensors": "dualflow.interop",
    "load_torch": "dualflow.interop",
    "load": "dualflow.serialization",
    # PyTorch-style creation functions (torch.zeros, torch.randn, torch.manual_seed...)
    **dict.fromkeys(_FACTORIES, "dualflow.tensor.factories"),
    **dict.fromkeys(_RANDOM, "dualflow.tensor.random"),
    "Size": "dualflow.tensor.methods",
    "autocast": "dualflow.amp",
    "is_floating_point": "dualflow.dtypes",
}
# PyTorch's dtype names (dualflow.float32, dualflow.long...): numpy dtypes
_LAZY.update(dict.fromkeys(importlib.import_module("dualflow.dtypes").NAMES, "dualflow.dtypes"))
# PyTorch's tensor functions (dualflow.cat, dualflow.sum(x, dim)...): dualflow/functions.py;
# torch.index_add, scatter_reduce, repeat_interleave, unique: dualflow/index_functions.py. Their
# names come from dualflow/function_names.py (names only: nothing of the tensor is imported).
# Not in __all__: a star import would shadow the builtins sum, max, min, abs, all, any.
_NAMES = importlib.import_module("dualflow.function_names")
_FUNCTIONS, _INDEX_FUNCTIONS = _NAMES.FUNCTIONS, _NAMES.INDEX_FUNCTIONS
_LAZY.update(dict.fromkeys(_FUNCTIONS, "dualflow.functions"))
_LAZY.update(dict.fromkeys(_INDEX_FUNCTIONS, "dualflow.index_functions"))
_LAZY.update(dict.fromkeys(("sparse_coo_tensor", "spmm"), "dualflow.tensor.sparse"))  # COO tensors
_COMPLEX = ("complex", "polar", "view_as_real", "view_as_complex", "is_complex")  # complex
_LAZY.update(dict.fromkeys(_COMPLEX, "dualflow.tensor.complex_tensors"))
# PyTorch names written as composites in dualflow/tensor/methods/ported.py (issue 40)
_PORTED = ("atan2", "arctan2", "outer", "select", "diag", "eye", "set_grad_enabled", "tan")
_PORTED += ("arctan", "atan")
_LAZY.update(dict.fromkeys(_PORTED, "dualflow.tensor.methods.ported"))
_LAZY.update(dict.fromkeys(("randperm", "multinomial"), "dualflow.tensor.methods.ported_random"))
_SUBMODULES = ("amp", "data", "errors", "gradcheck", "nn", "ops", "optim", "random", "training")
_SUBMODULES += ("sparse",)
# torch.random and torch.sparse: public modules whose code lives in the tensor package
_MODULES = {"random": "dualflow.tensor.random", "sparse": "dualflow.tensor.sparse"}


class _Package(types.ModuleType):
    """The type of the ``dualflow`` module: ``dualflow.tensor`` stays PyTorch's ``tensor(data)``
    function when Python binds the subpackage ``dualflow/tensor/`` as an attribute (it does at
    the subpackage's first import), as ``torch.tensor`` is a function beside ``torch/_tensor.py``.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "tensor" and isinstance(value, types.ModuleType):
            return  # the package stays reachable as sys.modules["dualflow.tensor"]
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif name in _MODULES:
        value = importlib.import_module(_MODULES[name])
    else:
        try:  # any subpackage: dualflow.tracer, dualflow.graph_ir, ...
            value = importlib.import_module(f"dualflow.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"dualflow.{name}":
                raise
            raise _missing(name) from None
    globals()[name] = value
    return value


def _missing(name: str) -> AttributeError:
    """The AttributeError for ``dualflow.name``: what to use for PyTorch's ``torch.name``."""
    if name.startswith("__"):
        return AttributeError(f"module 'dualflow' has no attribute {name!r}")
    from dualflow.tensor.methods.hints import TENSOR_HINTS, missing  # noqa: PLC0415
    from dualflow.tensor.methods.suggest import TORCH_HINTS, TORCH_RENAMES  # noqa: PLC0415

    hints = {**TENSOR_HINTS, **TORCH_HINTS}
    return missing("module 'dualflow'", f"torch.{name}", name, hints, __dir__, TORCH_RENAMES)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_SUBMODULES))


__all__ = [
    "Config",
    "Device",
    "Tensor",
    "arange",
    "as_tensor",
    "backward",
    "compile",
    "config",
    "disable_compile",
    "empty",
    "empty_like",
    "enable_grad",
    "errors",
    "explain",
    "from_dlpack",
    "full",
    "full_like",
    "get_array_module",
    "get_num_threads",
    "grad",
    "gradcheck",
    "initial_seed",
    "is_grad_enabled",
    "linspace",
    "load",
    "load_safetensors",
    "load_torch",
    "manual_seed",
    "mark_dynamic",
    "mark_static",
    "nn",
    "no_grad",
    "ones",
    "ones_like",
    "ops",
    "optim",
    "rand",
    "rand_like",
    "randint",
    "randint_like",
    "randn",
    "randn_like",
    "random",
    "save",
    "save_safetensors",
    "set_debug",
    "set_num_threads",
    "tensor",
    "training",
    "using_config",
    "zeros",
    "zeros_like",
]
