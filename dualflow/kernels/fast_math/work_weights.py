"""How much one-thread compute each heavy scalar function costs per element, in float32 copies
(``WorkWeights``): the weights by which an elementwise kernel's split threshold is lowered below a
copy's (``kernel_work.work_ratio``, ``float32_loops``), measured once per machine.

The probe (~13 ms once the loops are built; their machine code comes from the signed kernels
cache after the first process) times on one thread, over ``ELEMENTS`` float32 elements in the
caches, a numba loop calling each function once and one calling it three times in a chain, all
interleaved (the fastest of the repeats, ``best_of``). A function's weight is the chain's extra
time per call (its own compute: the loop's memory traffic cancels) over the time per element of
the copy ``part_min`` was derived from (``MachineConstants.copy_ns``, one thread, beyond the
caches): the unit ``part_min_for`` divides by. A copy in the caches would be the wrong unit: it
runs 2.5x faster than that one here, and would lower every threshold 2.5x too far. The
functions are the ones the kernels run:
``tanh_f32``/``exp_f32`` and the scalar table's numba renderings of sqrt, divide and maximum
(``RENDERED``; a test checks them against ``expr.scalar_table``, which sits above this module).
A weight outside ``BOUNDS`` (a disturbed probe, an unknown machine) keeps its default, named in
``WorkWeights.note``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, fields, replace
from typing import Any

import numba
import numpy as np

from dualflow.kernels.base import numba_cache
from dualflow.kernels.base.machine_constants import machine_constants
from dualflow.kernels.base.per_machine import PerMachine, best_of, timings_of
from dualflow.kernels.fast_math.scalars import (
    EXP_FINGERPRINT,
    TANH_FINGERPRINT,
    exp_f32,
    fingerprint,
    tanh_f32,
)

ELEMENTS = 1 << 16  # 256 KiB a float32 array: in L2 with its output, as the weights assume
REPEATS = 15
LIGHT = 0.02
"""The weight of every function not measured: adds, multiplies, negations, abs, comparisons,
where, squares and casts measured 0.00-0.05 on the development machine (their cost is the memory
traffic, already a kernel's floor of one copy); unmeasured ones (remainders) take it too, so an
unmeasured step never lowers a threshold more than a measured one would."""
MEASURED = ("exp", "tanh", "sqrt", "divide", "maximum")
BOUNDS = {
    "exp": (0.2, 16.0),
    "tanh": (0.2, 16.0),
    "sqrt": (0.05, 8.0),
    "divide": (0.05, 8.0),
    "maximum": (0.02, 4.0),
}
"""A weight outside these (the development machine's values over 4-8 either way, wider above:
a machine without the vector width may run a function 10x slower) keeps its default."""


@dataclass(frozen=True)
class WorkWeights:
    """Each heavy function's one-thread compute per element in one-thread float32 copies beyond
    the caches, with the defaults measured on a 2-core AMD EPYC with AVX-512 (design notes, issue
    38 `consts`: 0.27 ns a copy); ``minimum`` takes ``maximum``'s, every other function
    ``LIGHT``. ``note``: what was measured, or why a default was kept.
    """

    exp: float = 1.9
    tanh: float = 1.4
    sqrt: float = 0.62
    divide: float = 0.37
    maximum: float = 0.2  # NaN-propagating selects
    note: str = "defaults"

    def of(self, function: str) -> float:
        """The weight of a scalar function by its table name.

        Example:
            >>> w = WorkWeights()
            >>> w.of("tanh"), w.of("minimum"), w.of("add")
            (1.4, 0.2, 0.02)
        """
        name = "maximum" if function == "minimum" else function
        return getattr(self, name) if name in MEASURED else LIGHT

    def describe(self) -> str:
        """One line naming the weights.

        Example:
            >>> WorkWeights().describe()
            'work weights (copies an element): exp 1.9, tanh 1.4, sqrt 0.62, divide 0.37, maximum/minimum 0.2, others 0.02 (defaults)'
        """  # noqa: E501 - a doctest's output line
        named = ", ".join(
            f"{n}{'/minimum' * (n == 'maximum')} {getattr(self, n):g}" for n in MEASURED
        )
        return f"work weights (copies an element): {named}, others {LIGHT:g} ({self.note})"


DEFAULTS = WorkWeights()
FIELDS = ("elements", *(f"{n}{k}_s" for n in MEASURED for k in (1, 3)))


def derive(timings: dict, copy_ns: float) -> WorkWeights:
    """The weights from a probe's ``timings`` (seconds; ``FIELDS``) and the machine's copy time
    per element (``copy_ns``): each function's three-call chain less its one-call loop, per
    extra call and element, over the copy's (rounded to 0.01); one outside ``BOUNDS`` keeps its
    default, named in the note.

    Example:
        >>> t = dict(elements=1e5, exp1_s=3e-5, exp3_s=7e-5, tanh1_s=2e-5, tanh3_s=5e-5,
        ...          sqrt1_s=2e-5, sqrt3_s=3e-5, divide1_s=1e-5, divide3_s=2e-5,
        ...          maximum1_s=1e-5, maximum3_s=1e-5)
        >>> w = derive(t, 0.1)  # exp: 4e-5 s over 2 extra calls of 1e5 elements: 0.2 ns a call
        >>> w.exp, w.tanh, w.sqrt, w.divide, w.maximum
        (2.0, 1.5, 0.5, 0.5, 0.2)
        >>> w.note
        'measured; maximum 0.0 out of [0.02, 4.0]: default kept'
    """
    notes, values = [], {}
    per_copy = timings["elements"] * copy_ns * 1e-9  # seconds of the copy over as many elements
    for name in MEASURED:
        weight = round((timings[f"{name}3_s"] - timings[f"{name}1_s"]) / 2 / per_copy, 2)
        low, high = BOUNDS[name]
        if low <= weight <= high:
            values[name] = weight
        else:
            notes.append(f"{name} {weight} out of [{low}, {high}]: default kept")
    return replace(DEFAULTS, **values, note="measured" + "".join(f"; {n}" for n in notes))


# The scalar table's numba renderings (``expr.scalar_table``) of the functions timed here beside
# tanh_f32 and exp_f32, with the operands named x and y; a fused kernel casts each step's result
# to its dtype as the bodies below do
RENDERED = {
    "sqrt": "math.sqrt(x)",
    "divide": "x / y",
    "maximum": "x if (x > y or x != x) else y",
}


@numba.njit(inline="always", error_model="numpy")
def _sqrt(x: Any, y: Any) -> Any:  # pragma: no cover - runs compiled
    return np.float32(math.sqrt(x))


@numba.njit(inline="always", error_model="numpy")
def _divide(x: Any, y: Any) -> Any:  # pragma: no cover - runs compiled
    return np.float32(x / y)


@numba.njit(inline="always", error_model="numpy")
def _maximum(x: Any, y: Any) -> Any:  # pragma: no cover - runs compiled
    return np.float32(x if (x > y or x != x) else y)


@numba.njit(inline="always", error_model="numpy")
def _tanh(x: Any, y: Any) -> Any:  # pragma: no cover - runs compiled
    return np.float32(tanh_f32(x))


@numba.njit(inline="always", error_model="numpy")
def _exp(x: Any, y: Any) -> Any:  # pragma: no cover - runs compiled
    return np.float32(exp_f32(x))


BODIES = {
    "exp": (_exp, EXP_FINGERPRINT),
    "tanh": (_tanh, TANH_FINGERPRINT),
    "sqrt": (_sqrt, ""),
    "divide": (_divide, ""),
    "maximum": (_maximum, ""),
}
"""Each measured function as ``f(x, y)`` (a unary one ignores y), with the fingerprint of the
function it inlines."""
SIGNATURE = "void(f4[::1], f4[::1], f4, f4[::1])"


def _build(py_func: Any, stem: str) -> Any:
    kernel = numba_cache.cached_njit(py_func, stem)
    kernel.compile(SIGNATURE)
    kernel.disable_compile()
    return kernel


@functools.cache
def loops(name: str) -> tuple[Any, Any]:
    """``(once, thrice)(x, y, c, out)``: ``out = f(x, y)`` and ``f(f(f(x, y), c), c)`` for
    measured function ``name`` over 1-D float32 arrays (a scalar ``c`` for the chain's later
    operands: the same instruction, and nothing LLVM could fold), compiled or loaded from the
    signed kernels cache under a stem naming the function (the cache key sees neither the
    closure's function nor what it inlines).

    Example:
        >>> once, thrice = loops("divide")
        >>> x, y, out = (np.full(3, v, np.float32) for v in (8, 2, 0))
        >>> once(x, y, np.float32(2), out); out.tolist()
        [4.0, 4.0, 4.0]
        >>> thrice(x, y, np.float32(2), out); out.tolist()
        [1.0, 1.0, 1.0]
    """
    body, inlined = BODIES[name]
    digest = fingerprint(body, inlined)

    def once(x: Any, y: Any, c: Any, out: Any) -> None:  # pragma: no cover - runs compiled
        for i in range(out.shape[0]):
            out[i] = body(x[i], y[i])

    def thrice(x: Any, y: Any, c: Any, out: Any) -> None:  # pragma: no cover - runs compiled
        for i in range(out.shape[0]):
            out[i] = body(body(body(x[i], y[i]), c), c)

    return _build(once, f"k_work{name}1_{digest}"), _build(thrice, f"k_work{name}3_{digest}")


def measure() -> dict:
    """Time the probe now (``FIELDS``; ~13 ms, plus building the loops the first time).

    Example:
        >>> sorted(measure()) == sorted(FIELDS)
        True
    """
    rng = np.random.default_rng(0)
    # in [0.25, 1): an exp chain stays finite, sqrt's inputs positive, divide's y away from 0
    x = rng.uniform(0.25, 1.0, ELEMENTS).astype(np.float32)
    y = rng.uniform(1.0, 2.0, ELEMENTS).astype(np.float32)
    out, c = np.empty_like(x), np.float32(0.75)
    calls = [functools.partial(loop, x, y, c, out) for name in MEASURED for loop in loops(name)]
    times = best_of(tuple(calls), REPEATS)
    return dict(elements=float(ELEMENTS), **dict(zip(FIELDS[1:], times)))


def _read(record: object) -> WorkWeights | None:
    """The weights of a cache record (derived again from its timings: a model change applies
    without a new measurement), or None when it is not one (then it is measured again)."""
    timings = timings_of(record, FIELDS)
    return None if timings is None else derive(timings, machine_constants().copy_ns)


def _record() -> dict:
    timings = measure()
    derived = derive(timings, machine_constants().copy_ns)
    return {
        "timings": timings,
        "derived": {f.name: getattr(derived, f.name) for f in fields(derived)},
    }


_WEIGHTS = PerMachine(
    "work_weights", _record, _read, DEFAULTS, lambda: (TANH_FINGERPRINT, EXP_FINGERPRINT)
)


def work_weights() -> WorkWeights:
    """This machine's weights: read from the kernels cache, or measured and written there at
    the first need on a machine (key: ``per_machine.machine_key`` and the fingerprints of the
    functions measured), in the copies of ``machine_constants`` (derived again from the
    timings at each read); ``DEFAULTS`` under ``DUALFLOW_MACHINE_CONSTANTS=defaults``. Fixed for
    the process once read.

    Example:
        >>> work_weights().tanh > 0
        True
    """
    return _WEIGHTS.get()


def forget() -> None:
    """Drop this process's weights: the next ``work_weights`` reads (or measures) them again
    (tests).

    Example:
        >>> before = work_weights(); forget(); work_weights() == before
        True
    """
    _WEIGHTS.forget()
