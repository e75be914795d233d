"""How much one-thread time a fused elementwise kernel spends per element, in copies of a float32
element: the work ratio by which its split threshold is lowered below a copy's
(``MachineConstants.part_min_for``), read off its typed program when the kernel is built.

Each function's weight is its own compute per element, measured once on one core (a 2-core
AMD EPYC with AVX-512, numba kernels of chains of 1 and 9 calls over 64K float32 elements in
the caches, ``time.process_time``), over a float32 copy out of the caches (0.24 ns an element):
design notes, issue 38 `consts`. A kernel's ratio is the sum of its steps' weights, at least one:
a kernel that computes little is bound by its memory traffic, a copy's (checked at 8M
elements: tanh 1.05 copies against 1.2 summed, sigmoid 2.9 against 2.6, tanh(0.5 tanh x) 2.5
against 2.9). Weights are per element whatever the dtype (a float64 step costs more: its ratio
is then low, which only keeps its threshold higher).
"""

from __future__ import annotations

from dualflow.kernels.expr.typed_program import Program

WEIGHTS = {
    "add": 0.4,
    "subtract": 0.4,
    "multiply": 0.5,
    "divide": 0.5,
    "power": 0.5,  # squares: numba renders other powers as libm's (blocked evaluator)
    "negative": 0.4,
    "abs": 0.4,
    "maximum": 1.8,  # NaN-propagating selects
    "minimum": 1.8,
    "where": 1.4,  # a branch per element: 1.4 when it predicts, ~16 on random signs
    "sqrt": 1.5,
    "exp": 1.2,  # fast_math's vectorized float32 loops
    "tanh": 1.2,
}
LIGHT = 0.4
"""The weight of a function not measured (comparisons, casts, remainders): the lightest measured,
so an unmeasured step never lowers a threshold more than a measured one would."""


def work_ratio(program: Program) -> float:
    """The kernel's one-thread time per element in float32 copies: its steps' weights summed,
    at least 1 (a kernel is never cheaper than the copy its memory traffic costs).

    Example:
        >>> from dualflow.kernels.expr.typed_program import lower_expr
        >>> x = ("var", "a0")
        >>> add = lower_expr(("call", "add", x, x), ("a0",), ("float32",))
        >>> tanh = lower_expr(("call", "tanh", ("call", "tanh", x)), ("a0",), ("float32",))
        >>> work_ratio(add), work_ratio(tanh)
        (1.0, 2.4)
    """
    return max(1.0, sum(WEIGHTS.get(step.fn, LIGHT) for step in program.steps))
