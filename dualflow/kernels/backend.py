"""One ``Backend`` record per array module: what dualflow runs on that module's arrays.

Ops and plans do not test ``xp is np`` to pick a path: they ask ``backend_of(xp)`` for its eager
elementwise kernels, its fused and fused-sum kernels, the library that overrides some ops (cuDNN),
dualflow's scalar functions for the module (erf, numpy's float32 tanh/exp) and whether dualflow's
numba CPU kernels take its arrays. (An eager elementwise forward keeps one identity check as
numpy's fast path; every other module goes through ``device_elementwise``.) numpy and cupy are
built in; an array module dualflow does not know runs every op through its own ``xp``
functions (``register_backend`` adds a backend for one).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from dualflow.kernels.expr.module_functions import BUILT_IN, register_functions
from dualflow.kernels.fused_cpu.fused_elementwise import cpu_kernel, one_loop
from dualflow.kernels.fused_cpu.fused_sum import cpu_sum_kernel

Metas = tuple[tuple[tuple[int, ...], str], ...]  # (shape, dtype name) per kernel input


@dataclass(frozen=True)
class FusionCost:
    """When the ``fuse`` pass makes a region of elementwise nodes one ``fused`` node on a
    backend (its cost model): a region of ``calls`` ufunc calls in numpy over ``size`` output
    elements fuses when ``size >= min_size`` and it makes ≥ 2 calls, or its one node's output
    has ≥ ``single_size`` elements; below ``min_size`` only when it makes ≥ ``min_ops`` calls and
    ``one_loop(expr, args, dtypes)`` says the fused node's kernel is one loop. The defaults are
    the CPU's, measured (docs/design-notes.md, "CPU kernels on both cores").
    """

    # Below this many output elements a fused kernel call (numba dispatch ~5-10 µs, the blocked
    # evaluator's setup ~10 µs) costs more than the numpy calls and temporaries it saves.
    min_size: int = 4096
    # One elementwise node this big is a region of its own: its kernel makes one pass on both
    # cores (``relu_grad``'s ``where(y > 0, gy, 0)`` is two numpy passes on one: 2M float32 8-14
    # ms in numpy, 1.4 ms as one kernel).
    single_size: int = 1 << 18
    # From this many ufunc calls a small region still fuses when its kernel is one numba loop: an
    # op like sigmoid (4 calls) or tanh_grad (3) on 16x16 float32 took 3.6-5.7 us as its ufunc
    # calls and ~1.5 us as one kernel call; the 50-op tiny-ops step (36 plan steps) 0.11-0.14 ms
    # at 3, 0.15-0.17 at 4, 0.19-0.22 at 6 (one run).
    min_ops: int = 3
    one_loop: Callable[[tuple, tuple[str, ...], tuple[str, ...]], bool] = one_loop

    def worth(self, calls: int, size: int, min_size: int | None = None) -> tuple[bool, bool]:
        """(fuse, fuse only if one loop) for a region making ``calls`` ufunc calls in numpy with
        an output of ``size`` elements (``min_size``: this one instead of the record's): a long
        region is worth one loop at any size, not a kernel making the same calls plus its own
        setup.

        Example:
            >>> FusionCost().worth(2, 1 << 20), FusionCost().worth(3, 16), FusionCost().worth(2, 16)
            ((True, False), (False, True), (False, False))
        """
        floor = self.min_size if min_size is None else min_size
        enough = size >= floor and (calls >= 2 or size >= self.single_size)
        return enough, not enough and calls >= self.min_ops


def _never(expr: tuple, args: tuple[str, ...], dtypes: tuple[str, ...]) -> bool:
    return False


CPU_FUSION = FusionCost()
# An array module dualflow has no kernels for runs a fused node one ``xp`` call per step: never
# one loop, so only big regions fuse (they still save the sum's temporary)
PLAIN_FUSION = FusionCost(one_loop=_never)


@dataclass(frozen=True)
class Backend:
    """What runs on one array module.

    ``elementwise(op_name, expr, args, fallback)`` gives ``run(xp, arrays, attrs)`` running an
    eager elementwise op as one kernel (None: the op's expression through ``xp`` functions);
    ``fused(expr, args, metas)`` and ``fused_sum(expr, args, metas, keepdims)`` give the kernels
    ``f(xp, *arrays, out=None)`` of a fused node (``metas``: (shape, dtype) per input);
    ``library`` is a module whose calls replace some ops' ``xp`` code (``kernels.cuda.cudnn``: conv,
    pooling, batch norm; None: none); ``functions`` dualflow's scalar functions for ``xp`` (ones
    it lacks, erf; numpy's tanh and exp with dualflow's float32 loops); ``host_kernels`` whether
    dualflow's numba CPU kernels (``kernels.conv``'s column and layout copies, 1x1 and Winograd
    routes, ``kernels.pool``) take the module's arrays; ``fusion`` when fusing pays on it.
    """

    name: str
    fused: Callable[..., Callable]
    fused_sum: Callable[..., Callable]
    elementwise: Callable[..., Callable] | None = None
    library: Any = None
    functions: Mapping[str, Callable] = field(default_factory=lambda: MappingProxyType({}))
    host_kernels: bool = False
    fusion: FusionCost = PLAIN_FUSION


def xp_fused(expr: tuple, args: tuple[str, ...], metas: Metas) -> Callable:
    """A fused node's expression run through ``xp`` functions, one call per step (no fusion
    gain, but the plan runs): for array modules or dtypes without fused kernels.

    Example:
        >>> import numpy as np
        >>> xp_fused(("call", "exp", ("var", "a0")), ("a0",), (((1,), "float64"),))(np, np.zeros(1))
        array([1.])
    """
    from dualflow.kernels.cuda.cuda_fused import xp_runner  # noqa: PLC0415 - a cycle through cupy's

    return xp_runner(expr, args, None, False)


def xp_fused_sum(expr: tuple, args: tuple[str, ...], metas: Metas, keepdims: bool) -> Callable:
    """``xp_fused`` followed by ``xp.sum`` over all axes."""
    from dualflow.kernels.cuda.cuda_fused import xp_runner  # noqa: PLC0415

    return xp_runner(expr, args, "sum", keepdims)


def _numpy() -> Backend:
    return Backend(
        "numpy",
        cpu_kernel,
        cpu_sum_kernel,
        functions=BUILT_IN["numpy"],
        host_kernels=True,
        fusion=CPU_FUSION,
    )


def _cupy() -> Backend:
    from dualflow.kernels.cuda import cudnn  # noqa: PLC0415 - imports nothing of cupy until used
    from dualflow.kernels.cuda.cuda_elementwise import device_forward  # noqa: PLC0415
    from dualflow.kernels.cuda.cuda_fused import cuda_kernel, one_kernel  # noqa: PLC0415

    def fused(expr: tuple, args: tuple[str, ...], metas: Metas) -> Callable:
        return cuda_kernel(expr, args, tuple(d for _, d in metas))

    def fused_sum(expr: tuple, args: tuple[str, ...], metas: Metas, keepdims: bool) -> Callable:
        return cuda_kernel(expr, args, tuple(d for _, d in metas), "sum", keepdims)

    # every fused node is one CUDA kernel (float16 ones excepted); the size thresholds are the
    # CPU's, not measured on a GPU
    fusion = FusionCost(one_loop=one_kernel)
    return Backend("cupy", fused, fused_sum, device_forward, cudnn, BUILT_IN["cupy"], fusion=fusion)


# array module name -> its backend's factory (built on first use: cupy's imports stay lazy)
FACTORIES: dict[str, Callable[[], Backend]] = {"numpy": _numpy, "cupy": _cupy}
_BY_MODULE: dict[Any, Backend] = {}


def backend_of(xp: Any) -> Backend:
    """The Backend of array module ``xp`` (numpy, cupy, or a plain one running ``xp`` code).

    Example:
        >>> import numpy as np
        >>> backend_of(np).name, backend_of(np).library is None
        ('numpy', True)
    """
    backend = _BY_MODULE.get(xp)
    if backend is None:
        name = getattr(xp, "__name__", type(xp).__name__)
        factory = FACTORIES.get(name)
        backend = factory() if factory is not None else Backend(name, xp_fused, xp_fused_sum)
        _BY_MODULE[xp] = backend
    return backend


def register_backend(xp: Any, backend: Backend) -> None:
    """Make ``backend`` the one of array module ``xp`` (a new array library, or a test's).

    Example:
        >>> import types
        >>> module = types.ModuleType("mine")
        >>> register_backend(module, Backend("mine", xp_fused, xp_fused_sum))
        >>> backend_of(module).name
        'mine'
    """
    _BY_MODULE[xp] = backend
    register_functions(xp, backend.functions)  # the scalar table's erf row reads them there


def device_elementwise(
    name: str, expr: tuple, args: tuple[str, ...], fallback: Callable
) -> Callable:
    """``run(xp, arrays, attrs)`` of elementwise op ``name`` on arrays of a module other than
    numpy: its backend's elementwise kernels, or ``fallback(xp, *arrays, **attrs)`` (the op's
    plain ``xp`` forward) when the backend has none. Built per backend on first use.

    Example:
        >>> import types, numpy as np
        >>> run = device_elementwise("exp", ("call", "exp", ("var", "x")), ("x",),
        ...                          lambda xp, x: xp.exp(x))
        >>> module = types.ModuleType("plain"); module.exp = np.exp
        >>> float(run(module, (np.float64(0.0),), {}))
        1.0
    """
    runs: dict[Any, Callable] = {}

    def plain(xp: Any, arrays: tuple, attrs: dict) -> Any:
        return fallback(xp, *arrays, **attrs)

    def run(xp: Any, arrays: tuple, attrs: dict) -> Any:
        kernel = runs.get(xp)
        if kernel is None:
            factory = backend_of(xp).elementwise
            kernel = runs[xp] = plain if factory is None else factory(name, expr, args, fallback)
        return kernel(xp, arrays, attrs)

    return run


# The ops' numba kernel modules, imported at first use (numba loads only then); literal names,
# so the layering test sees what this module imports
HOST_LOADERS: dict[str, Callable[[], Any]] = {
    "pool": lambda: importlib.import_module("dualflow.kernels.pool.pool_kernels"),
    "cross_entropy": lambda: importlib.import_module("dualflow.kernels.loss.cross_entropy"),
    "batch_norm": lambda: importlib.import_module("dualflow.kernels.norm.batch_norm"),
    "batch_norm_grad": lambda: importlib.import_module("dualflow.kernels.norm.batch_norm_grad"),
    "layer_norm": lambda: importlib.import_module("dualflow.kernels.norm.layer_norm"),
    "layer_norm_grad": lambda: importlib.import_module("dualflow.kernels.norm.layer_norm_grad"),
    "adam": lambda: importlib.import_module("dualflow.kernels.optim.adam"),
}
_HOST_MODULES: dict[str, Any] = {}  # each once imported, or None without numba


def host_kernels(xp: Any, name: str, *arrays: Any) -> Any:
    """The numba kernels module ``HOST_LOADERS[name]`` when ``xp``'s backend runs host kernels
    and the module's ``covers`` takes ``arrays``; None otherwise, and without numba (the op's
    array-module path runs).

    Example:
        >>> import numpy as np
        >>> logits, labels = np.zeros((2, 3), np.float32), np.zeros(2, np.int64)
        >>> host_kernels(np, "cross_entropy", logits, labels).__name__
        'dualflow.kernels.loss.cross_entropy'
        >>> host_kernels(np, "cross_entropy", logits.astype(np.float16), labels) is None
        True
    """
    if not backend_of(xp).host_kernels:  # numba's CPU kernels: numpy arrays only
        return None
    if name not in _HOST_MODULES:
        try:
            _HOST_MODULES[name] = HOST_LOADERS[name]()
        except ImportError:
            _HOST_MODULES[name] = None
    kernels = _HOST_MODULES[name]
    return kernels if kernels is not None and kernels.covers(*arrays) else None
