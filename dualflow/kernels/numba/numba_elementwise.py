"""numba kernels for arithmetic-only elementwise fused expressions (their sums: ``numba_sum``),
rendered to Python source and executed as a module (at most ``MAX_MODULES`` kept).
The source is stored signed in the kernels cache for people to read, never imported from there;
the machine code numba compiles goes to that cache through ``numba_cache`` (signed and verified
before it is loaded), so a later process loads machine code (~5 ms), not compiles (~330 ms).
"""

from __future__ import annotations

import functools
import hashlib
import math
import sys
import threading
import types
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numba  # fails at import when numba is missing (the caller falls back)
import numpy as np

from dualflow.disk_cache import open_store
from dualflow.errors import KERNEL_MODULE_PREFIX
from dualflow.kernels.base import native_crew, numba_cache, wide_vectors
from dualflow.kernels.base.cpu_threads import parts_for, run_parts, split
from dualflow.kernels.base.machine_constants import PART_MIN_FLOOR, machine_constants
from dualflow.kernels.expr.expression import number_source
from dualflow.kernels.expr.kernel_work import compute_bound, work_ratio
from dualflow.kernels.expr.scalar_table import FUNCTIONS
from dualflow.kernels.expr.typed_program import Program, Ref, Step, lower_expr
from dualflow.kernels.numba import flat_view, kernel_chain, native_split
from dualflow.kernels.numba.broadcast_nest import collapse, render_nest
from dualflow.kernels.numba.small_call_runner import small_flat_runner

# ~1.1 MB of numba state a module: the least recently used beyond this dropped (plans keep theirs)
MAX_MODULES = 128
_MODULES: OrderedDict[str, Any] = OrderedDict()
_MODULES_LOCK = threading.Lock()
# cache=False: numba's own disk cache unpickles unverified files; numba_cache replaces it
# nogil: ``cpu_threads`` runs parts of one call at once (numba's own prange pool fought OpenBLAS)
NJIT = '@numba.njit(parallel=False, nogil=True, cache=False, error_model="numpy")'
# Elements per part below which one thread runs the whole call: None takes the machine's
# (``machine_constants``: where a split copy's saved time repays the measured hand-off; 2M was
# one machine's) over the kernel's work per element in copies (``kernel_work``); an int overrides
PART_MIN: int | None = None
# Elements below which a flat call passes its operands as they are (one machine code per rank,
# ~1 us less a call); from here 1-D views, one signature for relu of a 4-D and a 2-D array
UNFLATTENED_MAX = 1 << 13
_MAX_SOURCE = 2**20


def _part_min(work: float = 1.0) -> int:
    """Elements per part from which a call of a kernel doing ``work`` copies' time per element
    (``kernel_work``) is split: ``PART_MIN``, else the machine's for that work."""
    return PART_MIN or machine_constants().part_min_for(work)


def scalar_type(dtype: np.dtype) -> str:
    """The numba source text of a numeric dtype's scalar type.

    Example:
        >>> scalar_type(np.dtype("float32")), scalar_type(np.dtype("bool"))
        ('np.float32', 'bool')
    """
    dtype = np.dtype(dtype)
    if dtype.kind not in "biuf":  # the name is written into source: numeric dtypes only
        raise NotImplementedError(f"no numba rendering for dtype {dtype}")
    return "bool" if dtype == np.bool_ else f"np.{dtype.name}"


def _const(value: Any, dtype: np.dtype, consts: list[tuple]) -> str:
    """A typed constant ``_c<k>`` (its (dtype, value) appended to ``consts``): a module-level
    global (``header``) or an elementwise kernel's argument (``render_source``), so float32 math
    stays float32."""
    consts.append((np.dtype(dtype), value))
    return f"_c{len(consts) - 1}"


def const_values(consts: list[tuple]) -> tuple:
    """The constants as typed numpy scalars, the arguments an elementwise kernel takes them as.

    Example:
        >>> const_values([(np.dtype("float32"), 0.1)])
        (np.float32(0.1),)
    """
    return tuple(dtype.type(value) for dtype, value in consts)


def _operand(ref: Ref, ctype: np.dtype, consts: list[tuple], in_types: tuple) -> str:
    if ref[0] == "const":
        return _const(ref[1], ctype, consts)
    if ref[0] not in ("in", "step") or type(ref[1]) is not int or ref[1] < 0:
        raise NotImplementedError(f"bad operand {ref!r}")
    name = f"x{ref[1]}" if ref[0] == "in" else f"t{ref[1]}"
    source = in_types[ref[1]] if ref[0] == "in" else None
    return name if source == ctype else f"{scalar_type(ctype)}({name})"


def _statement(step: Step, ops: list[str]) -> str:
    """The numba expression of one step (operands already cast to the step's compute type), as
    its scalar-function row renders it; comparisons are bools already, the rest are cast."""
    row = FUNCTIONS[step.fn]
    if row.numba is None:
        raise NotImplementedError(f"no numba rendering for {step.fn}")
    body = row.numba(ops, step)
    return body if row.predicate else f"{scalar_type(step.dtype)}({body})"


def render_source(
    program: Program, flat: tuple[bool, ...] | None, nest: tuple = (), from_out: int | None = None
) -> tuple[str, tuple]:
    """(Python source of ``kernel(out, *inputs, *constants)``, the constants' typed values):
    flat (C-ordered operands of any shape, which it flattens; ``flat[k]``: input k is
    full-size, else a one-element array) or, with ``flat`` None,
    the loop nest ``nest`` = (the output's dims, each input's dims) of ``broadcast_nest
    .collapse`` (inputs reshaped to those dims). ``from_out=k`` reads input k from ``out``
    itself, for calls where it is ``out``'s very array: the loop then has no two
    pointers to one array, which LLVM needs to vectorize it. Constants are arguments, not text:
    programs that differ only in them (a batch norm's running-variance factor per layer) share
    one module and its machine code.

    Example:
        >>> from dualflow.kernels.expr.typed_program import lower_expr
        >>> p = lower_expr(("call", "add", ("var", "a0"), ("const", 1.0)), ("a0",), ("float32",))
        >>> source, values = render_source(p, (True,), 1)
        >>> "def kernel(out_, in0_, _c0):" in source, values  # flat: it flattens them
        (True, (np.float32(1.0),))
    """
    consts: list[tuple] = []
    names = [f"in{k}" for k in range(len(program.in_dtypes))]
    steps = render_steps(program, consts)
    store = f"out[{{}}] = t{len(program.steps) - 1}"
    wide = flat is not None and compute_bound(program)  # memory-bound loops lose at 512 bits
    if flat is None:
        refs = [
            {r[1] if r[0] == "in" else -1 - r[1] for r in step.operands if r[0] != "const"}
            for step in program.steps
        ]
        body = render_nest(steps, refs, nest, store, from_out)
    else:
        body = _flat_body(program, flat, steps, from_out, store, wide)
    flat_imports = (flat_view.IMPORT, native_crew.IMPORT) if flat is not None else ()
    lines = header([], imports(program) + flat_imports + (wide_vectors.IMPORT,) * wide)
    suffix = "_" if flat is not None else ""  # flat: any-shape operands the body flattens
    names = [f"{name}{suffix}" for name in ["out", *names]]
    params = names + [f"_c{k}" for k in range(len(consts))]
    lines.append(f"def kernel({', '.join(params)}):")
    if flat is not None:  # its parts can run on the native crew
        dtypes = tuple(scalar_type(d) for d in program.in_dtypes)
        const_types = tuple(scalar_type(d) for d, _ in consts)
        body += native_split.render(NJIT, flat, scalar_type(program.dtype), dtypes, const_types)
    return "\n".join(lines + body) + "\n", const_values(consts)


def _flat_body(
    program: Program, flat: tuple, steps: list[str], from_out: int | None, store: str, wide: bool
) -> list[str]:
    """The indented body of a flat kernel (``render_source``), at the widest vectors if ``wide``."""
    # One-element inputs and the steps that need nothing else are computed once, before the
    # loop: when ``out`` is an input's own array (a donated update), LLVM cannot prove they are
    # loop-invariant and would reload and recompute them per element (47x slower).
    # C-ordered operands of any shape, flattened here rather than by the caller: a small call
    # passes its arrays as they are (ravel and reshape in Python cost ~1 us of a ~2.5 us call;
    # the runner copies any other layout C-ordered first, as ``ravel`` would).
    before = ["wide_vectors()"] * wide + ["out = flat_view(out_)"]
    before += [f"in{k} = flat_view(in{k}_)" for k in range(len(flat))]
    before += [f"x{k} = in{k}[0]" for k, full in enumerate(flat) if not full]
    loads = [
        f"x{k} = {'out' if k == from_out else f'in{k}'}[i]" for k, full in enumerate(flat) if full
    ]
    invariant = _invariant_steps(program, flat)
    before += [line for j, line in enumerate(steps) if j in invariant]
    inner = loads + [line for j, line in enumerate(steps) if j not in invariant]
    inner.append(store.format("i"))
    return (
        [f"    {s}" for s in before]
        + ["    for i in range(out.shape[0]):"]
        + [f"        {s}" for s in inner]
    )


def _invariant_steps(program: Program, flat: tuple[bool, ...]) -> set[int]:
    """Steps that read only constants, one-element inputs and other such steps — except the
    last, which the loop stores (a constant program still writes every element)."""
    invariant: set[int] = set()
    for j, step in enumerate(program.steps[:-1]):
        if all(
            r[0] == "const"
            or (r[0] == "in" and not flat[r[1]])
            or (r[0] == "step" and r[1] in invariant)
            for r in step.operands
        ):
            invariant.add(j)
    return invariant


def render_steps(program: Program, consts: list[tuple]) -> list[str]:
    """Statements ``t0 = ...`` .. ``tN = ...`` over scalar inputs ``x0``.. (typed constants are
    appended to ``consts``, to be rendered by ``header``).

    Example:
        >>> from dualflow.kernels.expr.typed_program import lower_expr
        >>> p = lower_expr(("call", "negative", ("var", "a0")), ("a0",), ("float64",))
        >>> render_steps(p, [])
        ['t0 = np.float64(-x0)']
    """
    in_types, lines = program.in_dtypes, []
    for j, step in enumerate(program.steps):
        ops = [
            _operand(r, np.dtype(bool) if kind == "bool" else step.ctype, consts, in_types)
            for r, kind in zip(step.operands, FUNCTIONS[step.fn].kinds())
            if kind != "dtype"  # astype's target: the step's result type
        ]
        lines.append(f"t{j} = {_statement(step, ops)}")
    return lines


def imports(program: Program) -> tuple[str, ...]:
    """The import lines of the scalar functions the program's steps call (``fast_tanh``'s,
    ``fast_exp``'s), each naming its function's fingerprint."""
    rows = {FUNCTIONS[step.fn] for step in program.steps}
    return tuple(sorted(row.numba_import() for row in rows if row.numba_import is not None))


def header(consts: list[tuple], imports: tuple[str, ...] = ()) -> list[str]:
    """A kernel module's imports and typed module-level constants (``_const``'s (dtype, value)
    pairs), ending with the first function's decorator.

    Example:
        >>> header([(np.dtype("float32"), 0.5)])[4]
        '_c0 = np.float32(0.5)'
    """
    lines = ["import math", "import numba", "import numpy as np", *imports, ""]
    lines += [f"_c{i} = {scalar_type(d)}({number_source(v)})" for i, (d, v) in enumerate(consts)]
    return lines + ["", "", NJIT]


def stem(source: str) -> str:
    """The name of a kernel source's module and of its files in the kernels store.

    Example:
        >>> stem("X = 1\\n")[:2], len(stem("X = 1\\n"))
        ('k_', 26)
    """
    return "k_" + hashlib.sha256(source.encode()).hexdigest()[:24]


def compiled(source: str) -> bool:
    """Whether this process holds machine code of the module of ``source``'s ``kernel``.

    Example:
        >>> compiled("X = 1\\n")
        False
    """
    with _MODULES_LOCK:
        module = _MODULES.get(stem(source))
    return bool(getattr(getattr(module, "kernel", None), "overloads", None))


def load_module(source: str) -> Any:
    """Execute a kernel ``source`` as a module (kept in memory, least recently used dropped
    beyond ``MAX_MODULES``); its ``kernel`` caches machine code in the signed kernels store.

    Example:
        >>> load_module("X = 1\\n").X
        1
    """
    digest = stem(source)
    with _MODULES_LOCK:
        module = _MODULES.get(digest)
        if module is not None:
            _MODULES.move_to_end(digest)
            return module
    store = open_store("kernels")
    filename = f"<dualflow kernel {digest}>"
    if store is not None:
        # for people (and tracebacks) to read; what runs is this source, never the file's
        if store.load(f"{digest}.py", _MAX_SOURCE) != source.encode():
            store.save(f"{digest}.py", source.encode())
        filename = str(store.directory / f"{digest}.py")
    module = types.ModuleType(f"{KERNEL_MODULE_PREFIX}{digest}")
    sys.modules[module.__name__] = module  # numba rebuilds cached code by the module's name
    exec(compile("\n" + source, filename, "exec"), module.__dict__)  # line 1: the signature
    for name in ("kernel", "entry", "split"):  # entry, split: a flat kernel's native parts
        function = getattr(module, name, None)
        if store is not None and isinstance(function, numba.core.dispatcher.Dispatcher):
            numba_cache.attach(function, store, digest)
    with _MODULES_LOCK:
        _MODULES[digest] = module
        while len(_MODULES) > MAX_MODULES:
            _, old = _MODULES.popitem(last=False)
            sys.modules.pop(old.__name__, None)
    return module


_ndarray = np.ndarray  # (read at every call)


def _flat_copy(value: Any) -> Any:
    """A 1-D C-contiguous array of a non-ndarray operand (a numpy scalar: shape (1,))."""
    return np.ascontiguousarray(value).reshape(-1)


def _part(
    fn: Callable, out: Any, ins: list, full: tuple, values: tuple, start: int, stop: int
) -> None:
    """The kernel over rows ``start:stop`` of ``out`` and of the full-size inputs."""
    fn(out[start:stop], *(a[start:stop] if f else a for a, f in zip(ins, full)), *values)


def layout(program: Program, shapes: tuple, shape: tuple[int, ...]) -> tuple[tuple | None, tuple]:
    """(``flat``, ``nest``) of ``render_source`` for inputs of ``shapes`` and an output of
    ``shape``: flat when each input is full-size or one element, else a loop nest.

    Example:
        >>> from dualflow.kernels.expr.typed_program import lower_expr
        >>> p = lower_expr(("call", "add", ("var", "a0"), ("var", "a1")), ("a0", "a1"),
        ...                ("float32", "float32"))
        >>> layout(p, ((4, 3), (1,)), (4, 3)), layout(p, ((4, 3), (3,)), (4, 3))[0]
        (((True, False), ()), None)
    """
    flat = tuple(math.prod(s) != 1 for s in shapes)
    if all(not full or tuple(s) == tuple(shape) for s, full in zip(shapes, flat)):
        return flat, ()
    return None, collapse(shapes, shape)  # a partly broadcast input: a loop nest


def _model_module() -> Any:
    # the flat module of a float32 negation: what ``native_split`` times its crew's split on
    negate = lower_expr(("call", "negative", ("var", "a0")), ("a0",), ("float32",))
    return load_module(render_source(negate, (True,))[0])


def numba_kernel(program: Program, shapes: tuple, shape: tuple, ask: Any = None) -> Callable:
    """``f(xp, *arrays, out=None)`` running the program's numba kernel over an output of ``shape``
    (into ``out``, a C-contiguous array of that shape and the result dtype, when given).
    ``ask(k)``: asks the compile worker for an entry a chain calls (``kernel_chain``).

    Each index reads all its inputs before writing ``out``, so ``out`` may be an input of exactly
    the output's shape (never a broadcast one).

    Example:
        >>> from dualflow.kernels.expr.typed_program import lower_expr
        >>> p = lower_expr(("call", "add", ("var", "a0"), ("const", 1)), ("a0",), ("int64",))
        >>> numba_kernel(p, ((3,),), (3,))(np, np.arange(3)).tolist()
        [1, 2, 3]
    """
    size = math.prod(shape)
    flat, nest = layout(program, shapes, shape)
    source, values = render_source(program, flat, nest)
    modules = {None: load_module(source)}  # and input index -> the module reading it from out
    kernel, dtype, work = modules[None].kernel, program.dtype, work_ratio(program)

    def variant(k: int) -> Any:
        if k not in modules:
            modules[k] = load_module(render_source(program, flat, nest, k)[0])
        return modules[k].kernel

    if flat is not None and size < UNFLATTENED_MAX:
        link = kernel_chain.link_for(modules, variant, flat, values, program, shape, ask)
        return small_flat_runner(kernel, variant, flat, (shape, dtype), values, link)

    def run(xp: Any, *arrays: Any, out: Any = None, **_attrs: Any) -> Any:
        fresh = out is None
        if fresh:
            out = np.empty(shape, dtype)
        if flat is not None:
            # plain loops, no generators: a small call's Python overhead is most of its time
            ins = [a.ravel() if type(a) is _ndarray else _flat_copy(a) for a in arrays]
            fn, target, rows, which = kernel, out.reshape(size), size, None
            if not fresh:  # writing over an input (a donated update): read it through ``out``
                for k, a in enumerate(arrays):
                    if a is out and flat[k]:
                        fn, which = variant(k), k
                        break
            crew = native_split.splits(size, work, _part_min(work), _model_module)
            if crew is not None:  # threads that take a part in microseconds
                native_split.run(modules[which], crew, target, ins, values)
                return out
        else:  # C-ordered views of the nest's dims (``broadcast_nest``)
            fn, target, rows = kernel, out.reshape(nest[0]), nest[0][0]
            ins = [np.asarray(a).reshape(dims) for a, dims in zip(arrays, nest[1])]
            if not fresh:  # as above: a full input that is ``out`` is read through it
                for k, (a, dims) in enumerate(zip(arrays, nest[1])):
                    if a is out and dims == nest[0]:
                        fn = variant(k)
                        break
        # one part: no hand-off (a small call costs ~1 us less, and looks nothing up)
        if size < 2 * (PART_MIN or PART_MIN_FLOOR) or size < 2 * (part_min := _part_min(work)):
            fn(target, *ins, *values)
            return out
        # every part writes its own rows of ``target``: the result never depends on the split
        parts = split(rows, parts_for(size, part_min))
        cut = flat if flat is not None else tuple(dims[0] == rows for dims in nest[1])
        jobs = [functools.partial(_part, fn, target, ins, cut, values, a, b) for a, b in parts]
        run_parts(jobs)
        return out

    return run
