"""The LBFGS compatibility table, shared by ``make_optim_references.py`` (run with torch) and
``test_lbfgs_compat.py``: problems written once for both libraries (``L`` is ``torch`` or
``dualflow``) and LBFGS keyword arguments.

A case runs ``STEPS`` calls of ``step(closure)`` from the same start; the references hold the
parameters and the returned loss after every step, the closure evaluations and the state.
"""

from __future__ import annotations

from typing import Any

import numpy as np

STEPS = 3


def rosenbrock(L: Any, params: list) -> Any:
    (x,) = params
    return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2


def least_squares(L: Any, params: list) -> Any:
    w, c = params
    a, b = (L.tensor(v) for v in DATA)
    return ((a @ w + c - b) ** 2).sum() + 0.1 * (w * w).sum()


def least_squares_data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    return rng.standard_normal((8, 3)), rng.standard_normal(8)


DATA = least_squares_data()
PROBLEMS = {
    "rosenbrock": (rosenbrock, lambda: [np.array([-1.2, 1.0])]),
    "least_squares": (least_squares, lambda: [np.array([0.5, -0.3, 0.2]), np.array([0.1])]),
}

CASES = [
    ("rosenbrock", {"lr": 1, "max_iter": 20, "line_search_fn": "strong_wolfe"}),
    ("rosenbrock", {"lr": 1, "max_iter": 5, "history_size": 3, "line_search_fn": "strong_wolfe"}),
    ("rosenbrock", {"lr": 0.1, "max_iter": 10}),
    ("rosenbrock", {"lr": 0.5, "max_iter": 20, "max_eval": 8, "line_search_fn": "strong_wolfe"}),
    ("least_squares", {"lr": 1, "max_iter": 4}),
    ("least_squares", {"lr": 0.5, "max_iter": 8, "history_size": 2}),
    ("least_squares", {"max_iter": 20, "line_search_fn": "strong_wolfe"}),
    ("least_squares", {"tolerance_grad": 1e-3, "tolerance_change": 1e-4, "max_iter": 50}),
]


def case_id(problem: str, kwargs: dict) -> str:
    """A stable key for the references: ``rosenbrock[lr=1,max_iter=20]``."""
    return problem + "[" + ",".join(f"{k}={v}" for k, v in kwargs.items()) + "]"


def run(L: Any, optim: Any, make_param: Any, problem: str, kwargs: dict) -> dict[str, Any]:
    """Run one case with library ``L``; returns the arrays the references store."""
    loss_fn, start = PROBLEMS[problem]
    params = [make_param(p) for p in start()]
    opt = optim.LBFGS(params, **kwargs)
    calls = [0]

    def closure() -> Any:
        calls[0] += 1
        opt.zero_grad()
        loss = loss_fn(L, params)
        loss.backward()
        return loss

    out: dict[str, Any] = {}
    for step in range(STEPS):
        out[f"loss{step}"] = np.asarray(float(opt.step(closure)))
        for i, p in enumerate(params):
            out[f"param{i}/step{step}"] = p.detach().numpy().copy()
    out["calls"] = np.asarray(calls[0])
    state = opt.state[params[0]]
    for key in ("func_evals", "n_iter"):
        out[f"state/{key}"] = np.asarray(state[key])
    out["state/history"] = np.asarray(len(state["old_dirs"]))
    return out
