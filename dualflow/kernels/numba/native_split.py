"""Flat fused kernels split over the native crew (``kernels.base.native_crew``): the ``entry``
and ``split`` functions a flat kernel's module holds beside ``kernel``, and when a call uses them.

``split(ctls, entry_at, spins, out, *inputs, *constants)`` runs in one ``nogil`` call: it writes
each worker's block (its row range, every operand's address and length, each constant's
address), posts it, runs the first rows itself and waits for the workers. ``entry(block)`` is
what a worker calls through its address: it rebuilds the operands from the block and runs
``kernel`` over its rows. Each part writes only its own rows, as ``cpu_threads``' parts do, so the
result never depends on the split, the crew or timing.

A crew whose workers still linger (``NativeCrew.awake``) takes a part for a few microseconds: a
call splits where the time its elements save split (a copy-like kernel's time per element in
the caches, times the kernel's work, ``kernel_work``) repays what a split costs its caller, both
measured once per crew (``_split_model``). A sleeping crew costs a wake-up, like
``cpu_threads``' workers: a call splits from the machine's ``part_min`` then (which also wakes
the crew for the calls after it). Waking it for a smaller call without splitting it cost that
call 10-30 us of system call on a KVM guest, more than the calls after it saved.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from dualflow.background.placement import current_cpu
from dualflow.background.workers import IN_WORKER
from dualflow.kernels.base import native_crew
from dualflow.kernels.base.machine_constants import PART_MIN_FLOOR
from dualflow.kernels.base.native_calls import BLOCK_TYPE
from dualflow.kernels.base.native_crew import NativeCrew
from dualflow.kernels.base.per_machine import least_seconds


def render(
    njit: str, flat: tuple[bool, ...], out_dtype: str, in_dtypes: tuple, const_dtypes: tuple
) -> list[str]:
    """The source lines of ``entry`` and ``split`` for a flat kernel (``njit``: the decorator
    line; dtypes as ``scalar_type`` renders them; ``flat[k]``: input k is full-size).

    Example:
        >>> lines = render("@numba.njit", (True, False), "np.float32", ("np.float32",) * 2, ())
        >>> lines[3], lines[-3]
        ('def entry(block):', '    kernel(out[:hi], in0[:hi], in1)')
    """
    # numba's carray and np.empty take numpy's bool type, not Python's ``bool`` of the kernels
    out_dtype, in_dtypes, const_dtypes = (
        _array_dtype(out_dtype),
        tuple(_array_dtype(d) for d in in_dtypes),
        tuple(_array_dtype(d) for d in const_dtypes),
    )
    operands = [("out", out_dtype, True)]
    operands += [(f"in{k}", d, full) for k, (d, full) in enumerate(zip(in_dtypes, flat))]
    consts = [f"_c{k}" for k in range(len(const_dtypes))]
    entry = ["", "", njit, "def entry(block):", "    lo, hi = block[0], block[1]"]
    fill = []
    for k, (name, dtype, _) in enumerate(operands):
        entry.append(
            f"    {name} = numba.carray(as_voidptr(block[{2 + 2 * k}]), "
            f"(block[{3 + 2 * k}],), {dtype})"
        )
        fill += [f"b[{2 + 2 * k}] = address_of({name}, 0)", f"b[{3 + 2 * k}] = {name}.shape[0]"]
    at = 2 + 2 * len(operands)
    held = []
    for k, dtype in enumerate(const_dtypes):
        entry.append(f"    _c{k} = numba.carray(as_voidptr(block[{at + k}]), (1,), {dtype})[0]")
        held += [f"    c{k} = np.empty(1, {dtype})", f"    c{k}[0] = _c{k}"]
        fill.append(f"b[{at + k}] = address_of(c{k}, 0)")
    rows = [f"{n}[lo:hi]" if full else n for n, _, full in operands]
    entry.append(f"    kernel({', '.join(rows + consts)})")
    params = ["ctls", "entry_at", "spins", *(n for n, _, _ in operands), *consts]
    mine = [f"{n}[:hi]" if full else n for n, _, full in operands]
    split = ["", "", njit, f"def split({', '.join(params)}):"]
    split += ["    n, parts = out.shape[0], ctls.shape[0] + 1", *held]
    split += [f"    blocks = np.empty((parts - 1, {at + len(consts)}), np.int64)"]
    split += ["    posted = np.empty(parts - 1, np.int64)", "    for w in range(parts - 1):"]
    split += ["        b = blocks[w]"]
    split += ["        b[0], b[1] = n * (w + 1) // parts, n * (w + 2) // parts"]
    split += [f"        {line}" for line in fill]
    split += ["        posted[w] = post(ctls[w], entry_at, b)", "    hi = n // parts"]
    split += [f"    kernel({', '.join(mine + consts)})", "    for w in range(parts - 1):"]
    return entry + split + ["        wait_done(ctls[w], posted[w], spins)"]


def _array_dtype(scalar: str) -> str:
    return "np.bool_" if scalar == "bool" else scalar


MODEL_ELEMENTS = 1 << 16  # 256 KiB of float32 in and out: in any L2 (``_split_model``)
MODEL_CALLS = 50  # runs of each, the least taken


def splits(
    size: int, work: float, part_min: int, model_module: Callable[[], Any]
) -> NativeCrew | None:
    """The crew to split a flat call of ``size`` elements doing ``work`` copies' time each over
    (``part_min``: the machine's for that work), or None where it runs on one thread;
    ``model_module()`` gives the flat module of a float32 negation (``_split_model``).

    Example:
        >>> splits(10, 1.0, 1 << 20, lambda: None) is None
        True
    """
    if size < 2 * PART_MIN_FLOOR or IN_WORKER.active:
        return None  # (a call inside another call's part runs alone)
    crew = native_crew.crew()
    model = None if crew is None else _split_model(crew, model_module)
    if model is None:
        return None
    parts, (cost, per_element) = len(crew.ctls) + 1, model
    saved = per_element * max(1.0, work) * (1.0 - 1.0 / parts)  # by each element, split
    if size * saved < cost or size < parts * PART_MIN_FLOOR:
        return None
    if crew.awake():  # a part costs the measured hand-off, not a wake-up
        return crew
    return crew if size >= parts * part_min else None  # worth a wake-up


def _split_model(crew: NativeCrew, model_module: Callable[[], Any]) -> tuple[float, float] | None:
    """(seconds a split call costs its caller beyond its parts' work, the workers awake;
    seconds a copy-like kernel takes per element alone, its operands in the caches): from the
    least times of a float32 negation (``model_module()``, built as every flat kernel is) of
    ``MODEL_ELEMENTS`` alone (A) and split over the crew (S), as a line through both: per
    element A / n, cost S - A / parts. Measured once per crew (~2 ms), holding its threads; the
    crew keeps them. None while another thread's call holds the threads (measured later)."""
    return crew.measured_once("flat split", lambda: _measure(crew, model_module()))


def _measure(crew: NativeCrew, module: Any) -> tuple[float, float]:
    # ``_split_model``'s timings, the caller holding the crew's threads
    x, y = np.ones(MODEL_ELEMENTS, np.float32), np.empty(MODEL_ELEMENTS, np.float32)
    alone = least_seconds(functools.partial(module.kernel, y, x), MODEL_CALLS)
    split = least_seconds(functools.partial(_split_held, module, crew, y, [x], ()), MODEL_CALLS)
    parts = len(crew.ctls) + 1
    return max(0.0, split - alone / parts), alone / x.size


def run(module: Any, crew: NativeCrew, target: np.ndarray, ins: list, values: tuple) -> None:
    """``module.kernel(target, *ins, *values)`` split over ``crew`` and this thread (flat 1-D
    C-ordered operands, as the flat runner passes them)."""
    lock = crew.lock  # one caller at a time uses the threads (``cpu_threads``' too)
    if IN_WORKER.active or not lock.acquire(False):
        module.kernel(target, *ins, *values)
        return
    try:
        if crew.closed:  # closed since ``splits`` chose it (``shutdown``, a new thread count)
            module.kernel(target, *ins, *values)
            return
        _split_held(module, crew, target, ins, values)
    finally:
        lock.release()


def _split_held(module: Any, crew: NativeCrew, target: Any, ins: list, values: tuple) -> None:
    # ``run``'s split, its caller holding the crew's lock (``_split_model`` times this)
    entry = getattr(module, "entry_at", None)  # the module keeps it: it lives as long
    if entry is None:
        entry = module.entry_at = _entry_or_none(module)
    if not entry:  # numba could not type the native functions: the call runs alone
        module.kernel(target, *ins, *values)
        return
    crew.keep_off(current_cpu())  # the OS would pile the workers onto this CPU
    try:
        module.split(crew.ctls, entry, crew.spins, target, *ins, *values)
    except numba.core.errors.NumbaError:  # typing or lowering: raised before anything ran
        module.entry_at = 0
        module.kernel(target, *ins, *values)


def _entry_or_none(module: Any) -> int:
    """The address of the module's ``entry``, or 0 where numba cannot compile it (an operand
    type its ``carray`` lacks): unknown types run the kernel alone, never fail the call."""
    try:
        return native_crew.entry_address(module.entry)
    except numba.core.errors.NumbaError:
        return 0


def prepare(module: Any, dtype: Any, shape: tuple, arrays: list, out: Any, values: tuple) -> None:
    """Compile (so store) a flat module's ``entry`` and ``split`` for the operand types its
    runner passes them for ``arrays`` (into ``out``, or a fresh array of ``dtype`` and
    ``shape``): the compile worker does this for the kernels it builds, which its one-thread
    process never splits; nothing for calls too small to split.

    Example:
        >>> from dualflow.kernels.expr.typed_program import lower_expr
        >>> from dualflow.kernels.numba.numba_elementwise import load_module, render_source
        >>> p = lower_expr(("call", "negative", ("var", "a0")), ("a0",), ("float32",))
        >>> module = load_module(render_source(p, (True,))[0])
        >>> x = np.ones((2, PART_MIN_FLOOR), np.float32)
        >>> prepare(module, np.float32, x.shape, [x], None, ()); len(module.split.signatures)
        1
    """
    if math.prod(shape) < 2 * PART_MIN_FLOOR:
        return
    module.entry.compile((BLOCK_TYPE,))
    target = (np.empty(shape, dtype) if out is None else out).reshape(-1)
    ins = [np.ascontiguousarray(a).reshape(-1) for a in arrays]
    no_workers = np.zeros((0, native_crew.WORDS), np.int64)
    module.split(no_workers, 0, 1, target, *ins, *values)  # runs ``kernel`` on every row
