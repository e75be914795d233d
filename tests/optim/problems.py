"""A tiny least-squares problem, ``0.5 * ||A x - b||²``, shared by the optimizer tests.

The dualflow side computes gradients with autograd; the numpy side (``grad_np``) gives the same
gradient for the hand-computed reference updates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import dualflow
from dualflow.nn import Parameter

A = np.array([[2.0, -1.0, 0.5], [0.3, 1.5, -0.7], [1.0, 0.2, 2.5], [-0.4, 0.8, 0.1]])
X_STAR = np.array([1.0, -2.0, 0.5])
B = A @ X_STAR  # consistent system: the minimum loss is 0, at X_STAR
X0 = np.array([0.5, -1.0, 2.0])


def grad_np(x: np.ndarray) -> np.ndarray:
    """The gradient ``A^T (A x - b)`` in float64."""
    return A.T @ (A @ x - B)


def loss_np(x: np.ndarray) -> float:
    return 0.5 * float(np.sum((A @ x - B) ** 2))


def backward(p: Parameter) -> float:
    """Set ``p.grad`` to the gradient of the loss at ``p`` (autograd); return the loss."""
    a = dualflow.tensor(A, dtype=p.dtype)
    b = dualflow.tensor(B, dtype=p.dtype)
    p.grad = None
    residual = dualflow.ops.matmul(a, p) - b
    loss = (residual * residual).sum() * 0.5
    loss.backward()
    return loss.item()


def train(make_opt: Callable, steps: int, dtype: str = "float64") -> tuple[Parameter, Any, list]:
    """Run ``steps`` optimizer steps from ``X0``; return the parameter, optimizer and losses."""
    p = Parameter(X0.astype(dtype))
    opt = make_opt([p])
    losses = []
    for _ in range(steps):
        losses.append(backward(p))
        opt.step()
    return p, opt, losses


def reference(update: Callable, steps: int, **hyper: float) -> np.ndarray:
    """Run a numpy reference ``update(x, g, state, t, **hyper) -> x`` for ``steps`` steps."""
    x, state = X0.copy(), {}
    for t in range(1, steps + 1):
        x = update(x, grad_np(x), state, t, **hyper)
    return x
