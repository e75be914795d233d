"""How much one-thread time a fused elementwise kernel spends per element, in copies of a float32
element: the work ratio by which its split threshold is lowered below a copy's
(``MachineConstants.part_min_for``), read off its typed program when the kernel is built.

Each function's weight is its own compute per element, measured once per machine
(``fast_math.work_weights``: numba loops of one and of three calls over 64K float32 elements in
the caches, over the one-thread copy ``part_min`` was derived from). A kernel's ratio is the sum
of its steps' weights, at least one: a kernel that computes little is bound by its memory
traffic, a copy's (on the development machine a tanh^4 kernel over 128K elements took 5.6 copies
an element, its weights sum to 5.6; a sigmoid 1.7 against 2.3). Beyond the caches compute hides
under the memory traffic (sigmoid over 8M elements: 1.3 copies): there the weights overstate the
work, and a heavy kernel may split early (one hand-off lost on a call of milliseconds). Weights
are per element whatever the dtype (a float64 step costs more: its ratio is then low, which only
keeps its threshold higher).
"""

from __future__ import annotations

from dualflow.kernels.expr.typed_program import Program
from dualflow.kernels.fast_math.work_weights import work_weights


def work_ratio(program: Program) -> float:
    """The kernel's one-thread time per element in float32 copies: its steps' weights summed
    (this machine's, ``work_weights``), at least 1 (a kernel is never cheaper than the copy its
    memory traffic costs).

    Example:
        >>> from dualflow.kernels.expr.typed_program import lower_expr
        >>> x = ("var", "a0")
        >>> add = lower_expr(("call", "add", x, x), ("a0",), ("float32",))
        >>> tanh = lower_expr(("call", "tanh", ("call", "tanh", x)), ("a0",), ("float32",))
        >>> work_ratio(add), work_ratio(tanh) == max(1.0, 2 * work_weights().tanh)
        (1.0, True)
    """
    weights = work_weights()
    return max(1.0, sum(weights.of(step.fn) for step in program.steps))


def compute_bound(program: Program) -> bool:
    """Whether the kernel computes longer than it moves an element: its steps' weights summed
    exceed a copy's (this machine's, ``work_weights``). Such loops run at the widest vectors
    (``base.wide_vectors``); a memory-bound loop at 512 bits lost 3-8% to split cache lines.

    Example:
        >>> from dualflow.kernels.expr.typed_program import lower_expr
        >>> x = ("var", "a0")
        >>> add = lower_expr(("call", "add", x, x), ("a0",), ("float32",))
        >>> exp = lower_expr(("call", "exp", ("call", "exp", x)), ("a0",), ("float32",))
        >>> compute_bound(add), compute_bound(exp) == (2 * work_weights().exp > 1)
        (False, True)
    """
    return work_ratio(program) > 1.0  # the ratio's floor is the copy: above it, compute
