"""The blocked evaluator's invariant steps: computed once per call, as eager computes them.

A step that reads only constants, one-element inputs and other such steps has one value for the
whole output; broadcast into every chunk it was computed per element (an Adam update's
``beta ** t`` and ``sqrt(1 - beta2 ** t)``: a libm ``pow`` per parameter, ~1 ms for 64K). Here it
is computed on the one-element operands themselves, exactly the ufunc call eager makes, and the
steps that read it take the value as a constant.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.kernels.expr.typed_program import Program


def invariant_steps(program: Program, small: frozenset[int]) -> frozenset[int]:
    """Steps (all but the last, which writes the output) whose operands are constants, inputs
    numbered in ``small`` (one element) or other such steps.

    Example:
        >>> from dualflow.kernels.expr.typed_program import lower_expr
        >>> e = ("call", "multiply", ("var", "a0"), ("call", "exp", ("var", "a1")))
        >>> p = lower_expr(e, ("a0", "a1"), ("float64", "float64"))
        >>> sorted(invariant_steps(p, frozenset({1}))), sorted(invariant_steps(p, frozenset()))
        ([0], [])
    """
    found: set[int] = set()
    for j, step in enumerate(program.steps[:-1]):
        if all(_known(r, small, found) for r in step.operands):
            found.add(j)
    return frozenset(found)


def _known(ref: tuple, small: frozenset[int], found: set[int]) -> bool:
    """Whether an operand has one value for the whole output."""
    if ref[0] == "const":
        return True
    return ref[1] in (small if ref[0] == "in" else found)


def hoisted(plan: tuple, program: Program, arrays: tuple, known: dict | None = None) -> tuple:
    """(``plan`` (``fused_elementwise._schedule``'s, one op per step) for this call, the extra
    inputs it reads): invariant steps computed now (into arrays of their broadcast operand shape and
    the step's dtype, as the chunks would have written them), appended to the inputs, and read from
    there by the ops left. ``known`` caches per pattern of one-element inputs what is fixed: the
    invariant steps, their shapes and the ops left (shapes and the plan were ~2/3 of the time).

    Example:
        >>> from dualflow.kernels.fused_cpu import fused_elementwise as cpu
        >>> from dualflow.kernels.expr.typed_program import lower_expr
        >>> e = ("call", "multiply", ("var", "a0"), ("call", "exp", ("var", "a1")))
        >>> p = lower_expr(e, ("a0", "a1"), ("float64", "float64"))
        >>> (ops, _), extra = hoisted(cpu._schedule(p), p, (np.ones(4), np.zeros(())))
        >>> len(ops), ops[0][1][1], float(extra[0])
        (1, (0, 2), 1.0)
    """
    small = frozenset(k for k, a in enumerate(arrays) if a.size == 1)
    # ``known``: the kernel's own cache per pattern (hashing the Program costs more per call)
    recipe = None if known is None else known.get(small)
    if recipe is None:
        recipe = _recipe(plan, program, arrays, small)
        if known is not None:
            known[small] = recipe
    computed, kept = recipe
    if not computed:
        return kept, ()
    values: list[Any] = []
    with np.errstate(all="ignore"):  # as the chunks: a fused region stays quiet
        for fn, operands, shape, dtype in computed:
            value = np.empty(shape, dtype)
            fn(
                *[arrays[v] if k == 0 else (values[v] if k == 2 else v) for k, v in operands],
                out=value,
            )
            values.append(value)
    return kept, tuple(values)


def _recipe(plan: tuple, program: Program, arrays: tuple, small: frozenset[int]) -> tuple:
    """(the invariant steps as (fn, operand refs, shape, dtype), the plan of the ops left):
    refs are (0, input), (1, constant) or (2, invariant value); the ops left read invariant
    value k as input ``len(arrays) + k``."""
    invariant = invariant_steps(program, small)
    if not invariant:
        return (), plan
    ops, dtypes = plan
    number: dict[int, int] = {}  # invariant step -> its place among the values
    shapes: dict[int, tuple] = {}
    computed, kept = [], []
    for j, (step, (fn, refs, slot)) in enumerate(zip(program.steps, ops)):
        if j in invariant:
            operands = tuple(
                (0, r[1]) if r[0] == "in" else ((2, number[r[1]]) if r[0] == "step" else (1, r[1]))
                for r in step.operands
            )
            of = [
                np.shape(arrays[r[1]]) if r[0] == "in" else (shapes[r[1]] if r[0] == "step" else ())
                for r in step.operands
            ]
            shapes[j] = np.broadcast_shapes(*of)
            number[j] = len(computed)
            computed.append((fn, operands, shapes[j], step.dtype))
            continue
        refs = tuple(
            (0, len(arrays) + number[r[1]]) if r[0] == "step" and r[1] in number else ref
            for r, ref in zip(step.operands, refs)
        )
        kept.append((fn, refs, slot))
    return tuple(computed), (kept, dtypes)
