"""The strong-Wolfe line search of ``LBFGS`` (``line_search_fn="strong_wolfe"``), a port of
``torch.optim.lbfgs._strong_wolfe`` (itself minFunc's): the same trial steps, brackets and
stopping rules, so the iterates are PyTorch's.

Scalars (losses, directional derivatives, steps) are Python floats read from the tensors, since
each decision branches on them; the gradients are dualflow tensors (flat, one per evaluation).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


def cubic_interpolate(
    x1: float,
    f1: float,
    g1: float,
    x2: float,
    f2: float,
    g2: float,
    bounds: tuple[float, float] | None = None,
) -> float:
    """The minimizer of the cubic through ``(x1, f1, g1)`` and ``(x2, f2, g2)``, within bounds
    (the interval's middle when the cubic has no minimum).

    Example:
        >>> round(cubic_interpolate(0.0, 0.0, -1.0, 2.0, 0.0, 1.0), 6)  # f = x^2 - 2x: min at 1
        1.0
    """
    low, high = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1**2 - g1 * g2
    if d2_square < 0:
        return (low + high) / 2.0
    d2 = math.sqrt(d2_square)
    if x1 <= x2:
        at = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        at = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(at, low), high)


@dataclass
class _Bracket:
    """The interval the zoom phase narrows: steps, losses, gradients, directional derivatives."""

    t: list[float]
    f: list[float]
    g: list[Any]
    gtd: list[float] = field(default_factory=list)

    def ends(self) -> tuple[int, int]:
        """``(low, high)``: the position with the smaller loss first."""
        return (0, 1) if self.f[0] <= self.f[-1] else (1, 0)

    def set(self, at: int, t: float, f: float, g: Any, gtd: float) -> None:
        self.t[at], self.f[at], self.g[at], self.gtd[at] = t, f, g, gtd


Evaluate = Callable[[Any, float, Any], tuple[float, Any]]


def _dot(a: Any, b: Any) -> float:
    return float((a * b).sum().item())


def _bracket_phase(
    evaluate: Evaluate,
    x: Any,
    t: float,
    d: Any,
    f: float,
    g: Any,
    gtd: float,
    c1: float,
    c2: float,
    max_ls: int,
) -> tuple[_Bracket, bool, int, int]:
    """Grow the step until an interval holds a point meeting the strong Wolfe conditions."""
    f_new, g_new = evaluate(x, t, d)
    evals, gtd_new = 1, _dot(g_new, d)
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            return (
                _Bracket([t_prev, t], [f_prev, f_new], [g_prev, g_new], [gtd_prev, gtd_new]),
                False,
                ls_iter,
                evals,
            )
        if abs(gtd_new) <= -c2 * gtd:
            return _Bracket([t], [f_new], [g_new]), True, ls_iter, evals
        if gtd_new >= 0:
            return (
                _Bracket([t_prev, t], [f_prev, f_new], [g_prev, g_new], [gtd_prev, gtd_new]),
                False,
                ls_iter,
                evals,
            )
        low, high = t + 0.01 * (t - t_prev), t * 10
        t_prev, t = t, cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, (low, high))
        f_prev, g_prev, gtd_prev = f_new, g_new, gtd_new
        f_new, g_new = evaluate(x, t, d)
        evals, gtd_new = evals + 1, _dot(g_new, d)
        ls_iter += 1
    # reached max_ls: PyTorch keeps [0, t] without directional derivatives
    return _Bracket([0.0, t], [f, f_new], [g, g_new]), False, ls_iter, evals


def _zoom_step(bracket: _Bracket, insufficient: bool) -> tuple[float, bool]:
    """The next trial step inside the bracket, kept away from its ends (PyTorch's safeguard)."""
    t = cubic_interpolate(
        bracket.t[0], bracket.f[0], bracket.gtd[0], bracket.t[1], bracket.f[1], bracket.gtd[1]
    )
    top, bottom = max(bracket.t), min(bracket.t)
    eps = 0.1 * (top - bottom)
    if min(top - t, t - bottom) >= eps:
        return t, False
    if insufficient or t >= top or t <= bottom:
        t = top - eps if abs(t - top) < abs(t - bottom) else bottom + eps
        return t, False
    return t, True


def strong_wolfe(
    evaluate: Evaluate,
    x: Any,
    t: float,
    d: Any,
    f: float,
    g: Any,
    gtd: float,
    c1: float = 1e-4,
    c2: float = 0.9,
    tolerance_change: float = 1e-9,
    max_ls: int = 25,
) -> tuple[float, Any, float, int]:
    """``(loss, flat_grad, step, evaluations)`` of the strong-Wolfe search from ``x`` along
    ``d``; ``evaluate(x, t, d)`` gives the loss and flat gradient at ``x + t * d``.

    Example:
        >>> import dualflow
        >>> def evaluate(x, t, d):  # f(p) = (p - 3)^2 from p = x + t * d
        ...     p = x + t * d
        ...     return float(((p - 3.0) ** 2).sum()), 2.0 * (p - 3.0)
        >>> x, g = dualflow.tensor([0.0]), dualflow.tensor([-6.0])
        >>> loss, grad, step, evals = strong_wolfe(evaluate, x, 1.0, -g, 9.0, g, -36.0)
        >>> round(step, 6), loss
        (0.5, 0.0)
    """
    d_norm = float(d.abs().max().item())
    bracket, done, ls_iter, evals = _bracket_phase(evaluate, x, t, d, f, g, gtd, c1, c2, max_ls)
    low, high = bracket.ends()
    insufficient = False
    while not done and ls_iter < max_ls:
        if abs(bracket.t[1] - bracket.t[0]) * d_norm < tolerance_change:
            break
        t, insufficient = _zoom_step(bracket, insufficient)
        f_new, g_new = evaluate(x, t, d)
        evals, gtd_new = evals + 1, _dot(g_new, d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket.f[low]:
            bracket.set(high, t, f_new, g_new, gtd_new)
            low, high = bracket.ends()
            continue
        if abs(gtd_new) <= -c2 * gtd:
            done = True
        elif gtd_new * (bracket.t[high] - bracket.t[low]) >= 0:
            bracket.set(high, bracket.t[low], bracket.f[low], bracket.g[low], bracket.gtd[low])
        bracket.set(low, t, f_new, g_new, gtd_new)
    return bracket.f[low], bracket.g[low], bracket.t[low], evals
