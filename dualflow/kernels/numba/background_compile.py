"""Fused numba kernels that a worker process compiles while calls run the blocked evaluator.

A fused region's numba kernel takes 0.2-0.5 s to compile, and numba's pipeline holds the GIL (a
compile thread stalled a ResNet-18 step 3.6x). A kernel whose machine code is neither in memory
nor in the kernels store is asked of the worker (``compile_worker``) at lowering. Until it
answers, an elementwise kernel's calls run the blocked numpy evaluator, bit-identical to it (the
same rounded operations: tests/kernels/test_scalar_table.py), and a sum's first call waits (its
other evaluators add in another order); then the kernel runs, loaded from the store. What runs
is compiled from this process's own source: a missing entry just compiles here, as before.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from dualflow.kernels.expr.scalar_table import FUNCTIONS
from dualflow.kernels.expr.typed_program import Program
from dualflow.kernels.numba import numba_elementwise, numba_sum
from dualflow.kernels.numba.compile_worker import Job, Worker, active, worker_for

# A caller that must wait for the worker (a sum, a donated call it cannot run blocked) compiles
# the kernel itself after this long: a worker that hangs never stops a step.
WAIT_S = 60.0


def _stored(directory: Path, stem: str) -> bool:
    """Whether the store holds machine code of ``stem`` (some signature: a missing one only
    compiles here, as without the worker)."""
    return any((directory / "__pycache__").glob(f"{stem}.*.nbc"))


def _request(spec: tuple, shapes: tuple, shape: tuple, source: str) -> tuple[Any, list] | None:
    """The worker and the plain-data request for a kernel of ``source`` not yet compiled; None
    when it is (in memory or stored) or cannot be asked for."""
    if not active():
        return None
    store = numba_elementwise.open_store("kernels")
    stem = numba_elementwise.stem(source)
    if store is None or numba_elementwise.compiled(source) or _stored(store.directory, stem):
        return None
    try:
        request = json.loads(json.dumps([*spec, shapes, shape]))  # plain data, or not at all
    except (TypeError, ValueError):
        return None
    worker = worker_for(store.directory)
    return None if worker is None else (worker, [stem, *request])


def pending_kernel(
    spec: tuple, program: Program, shapes: tuple, shape: tuple, blocked: Callable[[], Callable]
) -> Callable | None:
    """A runner for the numba kernel of ``program`` (``spec``: its (expr, args, dtypes)) that
    runs ``blocked()``'s kernel until the worker has compiled it; None when it is compiled
    already (in memory or stored), or background compiling is off or impossible.

    Example:
        >>> from dualflow.kernels.fused_cpu.fused_elementwise import blocked_kernel
        >>> from dualflow.kernels.expr.typed_program import lower_expr
        >>> e = ("call", "add", ("var", "a0"), ("const", 0.25))
        >>> p = lower_expr(e, ("a0",), ("float64",))
        >>> run = pending_kernel((e, ("a0",), ("float64",)), p, ((2,),), (2,),
        ...                      lambda: blocked_kernel(p, (2,)))
        >>> (run or numba_elementwise.numba_kernel(p, ((2,),), (2,)))(np, np.ones(2)).tolist()
        [1.25, 1.25]
    """
    flat, nest = numba_elementwise.layout(program, shapes, shape)
    found = _request(spec, shapes, shape, numba_elementwise.render_source(program, flat, nest)[0])
    if found is None:
        return None
    (worker, request), job = found, Job()
    worker.ask(job, [*request, "map", None])
    ask = functools.partial(ask_entry, spec, program, shapes, shape)
    build = functools.partial(numba_elementwise.numba_kernel, program, shapes, shape, ask)
    variants = _variants(job, worker, request, (tuple(shape), flat, nest, program))
    inplace = FUNCTIONS[program.steps[-1].fn].inplace
    return _runner(job, worker, build, (blocked, variants, inplace))


def ask_entry(spec: tuple, program: Program, shapes: tuple, shape: tuple, k: int | None) -> None:
    """Ask the worker for the native ``entry`` of a flat kernel's module (``k``: the variant
    reading input k through ``out``; None: the kernel's own), which a plan's chain of small steps
    calls (``kernel_chain``); nothing when background compiling is off.

    Example:
        >>> from dualflow.kernels.expr.typed_program import lower_expr
        >>> e = ("call", "negative", ("var", "a0"))
        >>> p = lower_expr(e, ("a0",), ("float32",))
        >>> ask_entry((e, ("a0",), ("float32",)), p, ((2,),), (2,), None)
    """
    store = numba_elementwise.open_store("kernels")
    if not active() or store is None:
        return
    flat, nest = numba_elementwise.layout(program, shapes, shape)
    source = numba_elementwise.render_source(program, flat, nest, k)[0]
    try:
        request = json.loads(json.dumps([*spec, shapes, shape]))
    except (TypeError, ValueError):
        return
    worker = worker_for(store.directory)
    if worker is not None:
        worker.ask(Job(), [numba_elementwise.stem(source), *request, "entry", k])


def pending_sum(
    spec: tuple, program: Program, shapes: tuple, shape: tuple, layout: tuple
) -> Callable | None:
    """A runner for the numba sum kernel of ``program`` over ``layout`` (dims, views, out_shape:
    ``numba_sum.numba_sum_kernel``'s) asked of the worker now, at lowering; its first call
    waits for it (a sum's other evaluators add in another order: not the kernel's bits). None
    as for ``pending_kernel``.

    Example:
        >>> from dualflow.kernels.expr.typed_program import lower_expr
        >>> e = ("call", "multiply", ("var", "a0"), ("const", 2.0))
        >>> p = lower_expr(e, ("a0",), ("float64",))
        >>> run = pending_sum((e, ("a0",), ("float64",)), p, ((3,),), (3,), ((3,), ((3,),), ()))
        >>> run is None or run(np, np.ones(3)).item() == 6.0
        True
    """
    source = numba_sum.sum_source(program, layout[1])
    found = _request(spec, shapes, shape, source)
    if found is None:
        return None
    (worker, request), job = found, Job()
    worker.ask(job, [*request, "sum", layout[2]])
    build = functools.partial(numba_sum.numba_sum_kernel, program, *layout)
    return _runner(job, worker, build, None)


def _variants(job: Job, worker: Worker, request: list, target: tuple) -> Callable:
    """``ask(arrays, out)``: ask the worker for the in-place variant of each input that is
    ``out`` (a donated call reads input k through ``out``: ``numba_elementwise.numba_kernel``)."""
    shape, flat, nest, program = target

    def ask(arrays: tuple, out: Any) -> bool:
        for k, a in enumerate(arrays):
            if a is out and np.shape(a) == shape and k not in job.variants:
                job.variants.add(k)
                source = numba_elementwise.render_source(program, flat, nest, k)[0]
                worker.ask(job, [numba_elementwise.stem(source), *request[1:], "map", k])
        return any(a is out for a in arrays)

    return ask


def _runner(job: Job, worker: Worker, build: Callable, stand_in: tuple | None) -> Callable:
    """``run(xp, *arrays, out=None)``: while ``job`` is outstanding, the stand-in's kernel
    (``stand_in``: ``blocked()`` making it, ``variants`` asking for donated calls' kernels, and
    whether its last step writes ``out`` in one pass, else a donated call waits) or, without one,
    a wait for the worker; ``build()``'s kernel from then on."""
    state: list = [None, None]  # the numba runner once compiled; the blocked one meanwhile
    blocked, variants, inplace = stand_in or (None, None, False)

    def run(xp: Any, *arrays: Any, out: Any = None, **_attrs: Any) -> Any:
        kernel = state[0]
        if kernel is None:
            if job.outstanding > 0 and blocked is not None:
                donated = out is not None and variants(arrays, out)
                if not donated or inplace:
                    if state[1] is None:
                        state[1] = blocked()
                    return state[1](xp, *arrays, out=out)
            with worker.done:  # the worker's machine code, or its end (then it compiles here)
                worker.done.wait_for(lambda: job.outstanding == 0, WAIT_S)
            kernel = state[0] = build()  # its first call loads the worker's machine code
        return kernel(xp, *arrays, out=out)

    run.resolved = lambda: state[0]  # the built runner, once a call found the job done
    return run
