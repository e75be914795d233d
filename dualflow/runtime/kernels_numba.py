"""numba kernels for arithmetic-only fused expressions, rendered to a Python file, cached on disk.

The source goes to ``$DUALFLOW_CACHE_DIR`` (default ``~/.cache/dualflow/kernels``) named by its hash
and is imported as a module with ``cache=True``: numba only caches functions defined in real files,
and a later process then loads the machine code (~5 ms) instead of compiling (~330 ms).
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba  # noqa: F401 - fail at import when numba is missing (the caller falls back)
import numpy as np

from dualflow.ops.expr_typing import COMPARISON_SYMBOLS, Program, Ref, Step, is_two

_MODULES: dict[str, Any] = {}
_BINARY = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/", "power": "**"}


def cache_dir() -> Path:
    """Where generated kernel sources (and numba's ``__pycache__`` next to them) live.

    Example:
        >>> cache_dir().name
        'kernels'
    """
    root = os.environ.get("DUALFLOW_CACHE_DIR")
    base = Path(root) if root else Path.home() / ".cache" / "dualflow"
    return base / "kernels"


def _scalar_type(dtype: np.dtype) -> str:
    return "bool" if dtype == np.bool_ else f"np.{dtype.name}"


def _const(value: Any, dtype: np.dtype, consts: list[str]) -> str:
    """A module-level typed constant (numba freezes globals), so float32 math stays float32."""
    if isinstance(value, float | np.floating) and not math.isfinite(value):
        literal = f"float('{value}')"
    else:
        literal = repr(value.item() if isinstance(value, np.generic) else value)
    consts.append(f"{_scalar_type(dtype)}({literal})")
    return f"_c{len(consts) - 1}"


def _operand(ref: Ref, ctype: np.dtype, consts: list[str], in_types: tuple) -> str:
    if ref[0] == "const":
        return _const(ref[1], ctype, consts)
    name = f"x{ref[1]}" if ref[0] == "in" else f"t{ref[1]}"
    source = in_types[ref[1]] if ref[0] == "in" else None
    return name if source == ctype else f"{_scalar_type(ctype)}({name})"


def _const_two(ref: Ref) -> bool:
    return ref[0] == "const" and is_two(ref[1])


def _statement(step: Step, ops: list[str]) -> str:
    """The numba expression of one step (operands already cast to the step's compute type)."""
    fn = step.fn
    if fn == "power" and step.dtype.kind == "f" and _const_two(step.operands[1]):
        body = f"{ops[0]} * {ops[0]}"  # eager's ``x ** 2`` is numpy's square: exactly x * x
    elif fn in _BINARY:
        body = f"{ops[0]} {_BINARY[fn]} {ops[1]}"
    elif fn in COMPARISON_SYMBOLS:
        return f"{ops[0]} {COMPARISON_SYMBOLS[fn]} {ops[1]}"
    elif fn in ("maximum", "minimum"):
        # numpy's rule: the first operand wins ties and NaN in either operand propagates
        cmp = ">=" if fn == "maximum" else "<="
        body = f"{ops[0]} if ({ops[0]} {cmp} {ops[1]} or {ops[0]} != {ops[0]}) else {ops[1]}"
    elif fn == "negative":
        body = f"-{ops[0]}"
    elif fn == "abs":
        body = f"abs({ops[0]})"
    elif fn == "sqrt":
        body = f"math.sqrt({ops[0]})"
    elif fn == "where":
        body = f"{ops[1]} if {ops[0]} else {ops[2]}"
    elif fn == "astype":
        body = ops[0]
    else:
        raise NotImplementedError(f"no numba rendering for {fn}")
    return f"{_scalar_type(step.dtype)}({body})"


def render_source(program: Program, flat: tuple[bool, ...] | None, ndim: int) -> str:
    """Python source of ``kernel(out, *inputs)``: flat (``flat[k]``: input k is full-size, else a
    one-element array) or an ``ndim`` loop nest over broadcast views.

    Example:
        >>> from dualflow.ops.expr_typing import lower_expr
        >>> p = lower_expr(("call", "add", ("var", "a0"), ("const", 1.0)), ("a0",), ("float32",))
        >>> "np.float32(1.0)" in render_source(p, (True,), 1)
        True
    """
    consts: list[str] = []
    in_types = program.in_dtypes
    names = [f"in{k}" for k in range(len(in_types))]
    if flat is not None:
        loops, index = ["for i in range(out.shape[0]):"], "i"
        loads = [
            f"x{k} = {n}[{'i' if full else 0}]" for k, (n, full) in enumerate(zip(names, flat))
        ]
    else:
        loops = [f"for i{d} in range(out.shape[{d}]):" for d in range(ndim)]
        index = ", ".join(f"i{d}" for d in range(ndim)) or "()"
        loads = [f"x{k} = {n}[{index}]" for k, n in enumerate(names)]
    body = list(loads)
    for j, step in enumerate(program.steps):
        ctypes = [np.dtype(bool)] if step.fn == "where" else []
        ctypes += [step.ctype] * (len(step.operands) - len(ctypes))
        refs = step.operands[:1] if step.fn == "astype" else step.operands
        ops = [_operand(r, c, consts, in_types) for r, c in zip(refs, ctypes)]
        body.append(f"t{j} = {_statement(step, ops)}")
    body.append(f"out[{index}] = t{len(program.steps) - 1}")
    lines = ["import math", "import numba", "import numpy as np", ""]
    lines += [f"_c{i} = {c}" for i, c in enumerate(consts)]
    lines += ["", "", '@numba.njit(parallel=False, cache=True, error_model="numpy")']
    lines.append(f"def kernel(out, {', '.join(names)}):")
    for depth, loop in enumerate(loops):
        lines.append("    " * (depth + 1) + loop)
    lines += ["    " * (len(loops) + 1) + s for s in body]
    return "\n".join(lines) + "\n"


def load_module(source: str) -> Any:
    """Write ``source`` to the cache directory (once, atomically) and import it as a module.

    Example:
        >>> load_module("X = 1\\n").X
        1
    """
    digest = hashlib.sha256(source.encode()).hexdigest()[:24]
    if digest in _MODULES:
        return _MODULES[digest]
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"k_{digest}.py"
    if not path.exists():  # never rewrite: numba's cache is keyed on the file's timestamp
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(source)
        os.replace(tmp, path)
    name = f"dualflow_kernels_k_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    _MODULES[digest] = module
    return module


def numba_kernel(program: Program, shapes: tuple, shape: tuple[int, ...]) -> Callable:
    """``f(xp, *arrays, out=None)`` running the program's numba kernel over an output of ``shape``
    (into ``out``, a C-contiguous array of that shape and the result dtype, when given).

    Each index reads all its inputs before writing ``out``, so ``out`` may be an input of exactly
    the output's shape (never a broadcast one).

    Example:
        >>> from dualflow.ops.expr_typing import lower_expr
        >>> p = lower_expr(("call", "add", ("var", "a0"), ("const", 1)), ("a0",), ("int64",))
        >>> numba_kernel(p, ((3,),), (3,))(np, np.arange(3)).tolist()
        [1, 2, 3]
    """
    size = math.prod(shape)
    flat = tuple(math.prod(s) != 1 for s in shapes)
    if not all(not full or tuple(s) == shape for s, full in zip(shapes, flat)):
        flat = None  # a partly broadcast input: index broadcast views instead
    module = load_module(render_source(program, flat, len(shape)))
    kernel, dtype = module.kernel, program.dtype

    def run(xp: Any, *arrays: Any, out: Any = None, **_attrs: Any) -> Any:
        if out is None:
            out = np.empty(shape, dtype)
        if flat is not None:
            ins = [np.ascontiguousarray(a).reshape(-1) for a in arrays]
            kernel(out.reshape(size), *ins)
        else:
            kernel(out, *(np.broadcast_to(a, shape) for a in arrays))
        return out

    return run
