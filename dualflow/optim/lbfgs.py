"""``LBFGS``: limited-memory BFGS with ``torch.optim.LBFGS``'s closure protocol, arguments,
state names and iterates (a port of PyTorch's algorithm, strong-Wolfe search included).

``step(closure)`` calls ``closure`` (which zeroes the gradients, computes the loss, calls
``backward()`` and returns the loss) several times per step; each decision of the algorithm
branches on values, so ``step`` runs eagerly. The closure may be a ``@dualflow.compile``d
function: its plan runs at every evaluation. ``step`` itself inside a compiled function fails
closed (the call runs eagerly with the tracer's warning).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any

from dualflow import ops
from dualflow._config import enable_grad, no_grad
from dualflow.ops.dispatch import tracing
from dualflow.optim.line_search import strong_wolfe
from dualflow.optim.optimizer import Optimizer
from dualflow.optim.param_group import as_float
from dualflow.tensor.core import Tensor


def _dot(a: Tensor, b: Tensor) -> float:
    return float((a * b).sum().item())


class LBFGS(Optimizer):
    """L-BFGS (PyTorch's formulas): one param group; ``step(closure)`` runs up to ``max_iter``
    iterations and ``max_eval`` closure evaluations, with a fixed step ``lr`` (the first one
    scaled by ``min(1, 1 / |g|_1)``) or ``line_search_fn="strong_wolfe"``.

    Args:
        params: Parameters (a single group).
        lr: Learning rate (step length).
        max_iter: Iterations per ``step``.
        max_eval: Closure evaluations per ``step`` (default ``max_iter * 5 // 4``).
        tolerance_grad: Stop when the largest gradient entry is at most this.
        tolerance_change: Stop when the loss or the step changes less than this.
        history_size: Update pairs kept.
        line_search_fn: None or ``"strong_wolfe"``.

    Example:
        >>> import numpy as np, dualflow
        >>> from dualflow.nn import Parameter
        >>> p = Parameter(np.array([3.0, -1.0]))
        >>> opt = LBFGS([p], line_search_fn="strong_wolfe")
        >>> def closure():
        ...     opt.zero_grad(); loss = ((p - 1.0) ** 2).sum(); loss.backward(); return loss
        >>> _ = opt.step(closure); np.round(p.numpy(), 6).tolist()
        [1.0, 1.0]
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1,
        max_iter: int = 20,
        max_eval: int | None = None,
        tolerance_grad: float = 1e-7,
        tolerance_change: float = 1e-9,
        history_size: int = 100,
        line_search_fn: str | None = None,
    ) -> None:
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: only 'strong_wolfe' is supported, got {line_search_fn!r}")
        defaults = {
            "lr": lr,
            "max_iter": max_iter,
            "max_eval": max_iter * 5 // 4 if max_eval is None else max_eval,
            "tolerance_grad": tolerance_grad,
            "tolerance_change": tolerance_change,
            "history_size": history_size,
            "line_search_fn": line_search_fn,
        }
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def add_param_group(self, group: dict[str, Any]) -> None:
        """Only the first group is allowed (PyTorch's LBFGS has exactly one).

        Example:
            >>> import numpy as np
            >>> from dualflow.nn import Parameter
            >>> len(LBFGS([Parameter(np.zeros(2))]).param_groups)
            1
        """
        if self.param_groups:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        super().add_param_group(group)

    # ----- flat views of the parameters ------------------------------------------------------
    def _gather_flat_grad(self) -> Tensor:
        views = [
            ops.zeros(int(p.numel()), p.dtype, p.device)
            if p.grad is None
            else ops.reshape(p.grad, (-1,))
            for p in self._params
        ]
        return ops.concat(views, axis=0)

    def _add_grad(self, step: float, update: Tensor) -> None:
        offset = 0
        for p in self._params:
            n = int(p.numel())
            part = ops.reshape(update[offset : offset + n], tuple(p.shape))
            p.add_(ops.cast(part, p.dtype), alpha=step)
            offset += n

    def _evaluate_along(self, closure: Callable[[], Any], x: list, t: float, d: Tensor) -> tuple:
        """Loss and flat gradient at ``x + t * d`` (parameters are put back to ``x`` after)."""
        self._add_grad(t, d)
        with enable_grad():
            loss = float(closure())
        flat_grad = self._gather_flat_grad()
        for p, saved in zip(self._params, x):
            p.copy_(saved)
        return loss, flat_grad

    # ----- the step ---------------------------------------------------------------------------
    def step(self, closure: Callable[[], Any]) -> Any:  # type: ignore[override]
        """Run one L-BFGS step (several closure evaluations); returns the first loss.

        Example:
            >>> import numpy as np
            >>> from dualflow.nn import Parameter
            >>> p = Parameter(np.array([2.0]))
            >>> opt = LBFGS([p], lr=0.5, max_iter=1)
            >>> def closure():
            ...     opt.zero_grad(); loss = (p * p).sum(); loss.backward(); return loss
            >>> opt.step(closure).item(), p.tolist()  # step 0.5 * min(1, 1/4) along -4
            (4.0, [1.5])
        """
        hooks = tracing()
        if hooks is not None:
            hooks.on_raw_access(self._params[0], "LBFGS.step (it branches on loss values)")
        group = self.param_groups[0]
        state = self.state.setdefault(self._params[0], {})
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        with enable_grad():
            orig_loss = closure()
        state["func_evals"] += 1
        with no_grad():
            _Run(self, closure, group, state, float(orig_loss)).iterate()
        return orig_loss

    # ----- state dicts ------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """``{"state": {0: {...}}, "param_groups": [...]}`` with PyTorch's LBFGS state names
        (tensors copied, history lists of tensors, counts and losses as numbers).

        Example:
            >>> import numpy as np
            >>> from dualflow.nn import Parameter
            >>> LBFGS([Parameter(np.zeros(2))]).state_dict()["param_groups"][0]["history_size"]
            100
        """
        return super().state_dict() if not self.state else self._packed()

    def _packed(self) -> dict[str, Any]:
        state = self.state
        self.state = {}  # the base packs the groups; the state is packed here
        try:
            packed = super().state_dict()
        finally:
            self.state = state
        inner = state.get(self._params[0], {})
        packed["state"] = {0: {k: _copy(v) for k, v in inner.items()}} if inner else {}
        return packed

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what ``state_dict()`` saved (hyperparameters and the L-BFGS history).

        Example:
            >>> import numpy as np
            >>> from dualflow.nn import Parameter
            >>> opt = LBFGS([Parameter(np.zeros(2))]); saved = opt.state_dict()
            >>> opt.param_groups[0]["max_iter"] = 3; opt.load_state_dict(saved)
            >>> opt.param_groups[0]["max_iter"]
            20
        """
        if not isinstance(state_dict, dict) or {"state", "param_groups"} - set(state_dict):
            raise ValueError("load_state_dict: expected a dict with 'state' and 'param_groups'")
        entries = dict(state_dict["state"])
        unknown = set(entries) - {0, "0"}
        if unknown:
            raise ValueError(f"load_state_dict: LBFGS state for unknown parameters {unknown}")
        super().load_state_dict({"state": {}, "param_groups": state_dict["param_groups"]})
        inner = next(iter(entries.values()), None)
        if inner:
            self.state[self._params[0]] = {k: _copy(v) for k, v in inner.items()}


def _copy(value: Any) -> Any:
    """A copy of a state entry: tensors copied, lists of tensors copied item by item."""
    if isinstance(value, Tensor):
        return Tensor(value.raw_array.copy())
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return copy.copy(value)


class _Run:
    """One ``LBFGS.step``: PyTorch's loop, reading and writing the optimizer's state dict."""

    def __init__(self, opt: LBFGS, closure: Callable, group: dict, state: dict, loss: float):
        self.opt, self.closure, self.group, self.state, self.loss = opt, closure, group, state, loss
        self.lr = as_float(group["lr"])
        self.flat_grad = opt._gather_flat_grad()
        self.evals = 1

    def _small(self, g: Tensor) -> bool:
        return float(g.abs().max().item()) <= self.group["tolerance_grad"]

    def _direction(self, state: dict) -> None:
        """The new search direction ``d`` from the gradient and the kept history."""
        g = self.flat_grad
        if state["n_iter"] == 1:
            state.update(d=-g, old_dirs=[], old_stps=[], ro=[], H_diag=1.0)
            return
        y, s = g - state["prev_flat_grad"], state["d"] * state["t"]
        ys = _dot(y, s)
        if ys > 1e-10:
            if len(state["old_dirs"]) == self.group["history_size"]:
                for key in ("old_dirs", "old_stps", "ro"):
                    state[key].pop(0)
            state["old_dirs"].append(y)
            state["old_stps"].append(s)
            state["ro"].append(1.0 / ys)
            state["H_diag"] = ys / _dot(y, y)
        dirs, stps, ro = state["old_dirs"], state["old_stps"], state["ro"]
        al = state.setdefault("al", [None] * self.group["history_size"])
        q = -g
        for i in range(len(dirs) - 1, -1, -1):
            al[i] = _dot(stps[i], q) * ro[i]
            q = q - al[i] * dirs[i]
        r = q * state["H_diag"]
        for i in range(len(dirs)):
            be_i = _dot(dirs[i], r) * ro[i]
            r = r + (al[i] - be_i) * stps[i]
        state["d"] = r

    def iterate(self) -> None:
        """PyTorch's iterations, each ending in one of its stopping tests."""
        group, state = self.group, self.state
        if self._small(self.flat_grad):
            return
        n_iter = 0
        while n_iter < group["max_iter"]:
            n_iter += 1
            state["n_iter"] += 1
            self._direction(state)
            state["prev_flat_grad"] = self.flat_grad.clone()
            state["prev_loss"] = prev_loss = self.loss
            d = state["d"]
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / float(self.flat_grad.abs().sum().item())) * self.lr
            else:
                t = self.lr
            state["t"] = t
            gtd = _dot(self.flat_grad, d)
            if gtd > -group["tolerance_change"]:
                break
            done = self._move(t, d, gtd, n_iter)
            if n_iter == group["max_iter"] or self.evals >= group["max_eval"] or done:
                break
            if float(ops.max(ops.abs(d * state["t"])).item()) <= group["tolerance_change"]:
                break
            if abs(self.loss - prev_loss) < group["tolerance_change"]:
                break

    def _move(self, t: float, d: Tensor, gtd: float, n_iter: int) -> bool:
        """Step along ``d`` (searching when asked); whether the gradient test is met."""
        group, opt, state = self.group, self.opt, self.state
        evals = 0
        done = False
        if group["line_search_fn"] == "strong_wolfe":
            x = [p.clone() for p in opt._params]

            def evaluate(x: list, t: float, d: Tensor) -> tuple:
                return opt._evaluate_along(self.closure, x, t, d)

            budget = group["max_eval"] - self.evals
            self.loss, self.flat_grad, t, evals = strong_wolfe(
                evaluate, x, t, d, self.loss, self.flat_grad, gtd, max_ls=budget
            )
            state["t"] = t
            opt._add_grad(t, d)
            done = self._small(self.flat_grad)
        else:
            opt._add_grad(t, d)
            if n_iter != group["max_iter"]:
                with enable_grad():
                    self.loss = float(self.closure())
                self.flat_grad = opt._gather_flat_grad()
                done = self._small(self.flat_grad)
                evals = 1
        self.evals += evals
        state["func_evals"] += evals
        return done
