"""How much one-thread time a fused elementwise kernel spends per element, in copies of a float32
element: the work ratio by which its split threshold is lowered below a copy's
(``MachineConstants.part_min_for``), read off its typed program when the kernel is built.

Each function's weight is its own compute per element, measured once on one core (a 2-core
AMD EPYC with AVX-512: numba kernels of chains of 1, 2 and 3 calls over 64K float32 elements in
the caches, ``time.process_time``), over a float32 copy out of the caches (0.27 ns an element):
design notes, issue 38 `consts`. A kernel's ratio is the sum of its steps' weights, at least one:
a kernel that computes little is bound by its memory traffic, a copy's (a tanh^4 kernel over
128K elements took 5.6 copies an element, its weights sum to 5.6; a sigmoid 1.7 against 2.3).
Beyond the caches compute hides under the memory traffic (sigmoid over 8M elements: 1.3 copies):
there the weights overstate the work, and a heavy kernel may split early (one hand-off lost on a
call of milliseconds). Weights are per element whatever the dtype (a float64 step costs
more: its ratio is then low, which only keeps its threshold higher).
"""

from __future__ import annotations

from dualflow.kernels.expr.typed_program import Program

WEIGHTS = {
    "divide": 0.37,
    "maximum": 0.2,  # NaN-propagating selects
    "minimum": 0.2,
    "sqrt": 0.62,
    "exp": 1.9,  # fast_math's vectorized float32 loops (1.8-2.1 and 1.2-1.5 measured)
    "tanh": 1.4,
}
LIGHT = 0.02
"""The weight of every other function: adds, multiplies, negations, abs, comparisons, where
(vectorized selects), squares and casts measured 0.00-0.05 (their cost is the memory traffic,
already the ratio's floor of one); unmeasured ones (remainders) take it too, so an unmeasured
step never lowers a threshold more than a measured one would."""


def work_ratio(program: Program) -> float:
    """The kernel's one-thread time per element in float32 copies: its steps' weights summed,
    at least 1 (a kernel is never cheaper than the copy its memory traffic costs).

    Example:
        >>> from dualflow.kernels.expr.typed_program import lower_expr
        >>> x = ("var", "a0")
        >>> add = lower_expr(("call", "add", x, x), ("a0",), ("float32",))
        >>> tanh = lower_expr(("call", "tanh", ("call", "tanh", x)), ("a0",), ("float32",))
        >>> work_ratio(add), work_ratio(tanh)
        (1.0, 2.8)
    """
    return max(1.0, sum(WEIGHTS.get(step.fn, LIGHT) for step in program.steps))
