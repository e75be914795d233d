"""Public gradient checks: first and second order, against float64 central differences.

``check_backward(fn, inputs)`` compares ``grad`` of ``sum(fn(*inputs) * gy)`` with finite
differences; ``check_double_backward`` applies the same check to the function that returns the
first-order gradients (with ``create_graph=True``), as Chainer's ``check_double_backward`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dualflow._config import enable_grad, no_grad
from dualflow.autograd.engine import grad
from dualflow.tensor.core import Tensor


def _as_outputs(value: Any) -> tuple[Tensor, ...]:
    return tuple(value) if isinstance(value, tuple | list) else (value,)


def _float_inputs(inputs: Sequence[Any]) -> list[Tensor]:
    tensors = []
    for value in inputs:
        array = np.array(value.array if isinstance(value, Tensor) else value)
        if array.dtype.kind == "f":
            tensors.append(Tensor(array.astype(np.float64), requires_grad=True))
        else:
            tensors.append(Tensor(array))
    return tensors


def _weighted_sum(fn: Callable, xs: list[Tensor], gys: list[np.ndarray]) -> float:
    outs = _as_outputs(fn(*xs))
    return float(sum(np.sum(np.asarray(o.array, np.float64) * g) for o, g in zip(outs, gys)))


def numerical_grad(fn: Callable, xs: list[Tensor], gys: list[np.ndarray], eps: float) -> list:
    """Central differences of ``sum(fn(*xs) * gys)`` w.r.t. every float input."""
    result = []
    with no_grad():
        for x in xs:
            if not x.requires_grad:
                result.append(None)
                continue
            flat, g = x.array.reshape(-1), np.zeros(x.numel())
            for i in range(x.numel()):
                saved = flat[i]
                flat[i] = saved + eps
                plus = _weighted_sum(fn, xs, gys)
                flat[i] = saved - eps
                minus = _weighted_sum(fn, xs, gys)
                flat[i] = saved
                g[i] = (plus - minus) / (2 * eps)
            result.append(g.reshape(x.shape))
    return result


def check_backward(
    fn: Callable,
    inputs: Sequence[Any],
    grad_outputs: Sequence[Any] | None = None,
    eps: float = 1e-6,
    atol: float = 1e-6,
    rtol: float = 1e-5,
    seed: int = 0,
) -> None:
    """Raise AssertionError if the backward of ``fn`` disagrees with finite differences.

    Example:
        >>> from dualflow import ops
        >>> check_backward(ops.tanh, [np.array([0.3, -0.2])])
    """
    xs = _float_inputs(inputs)
    outs = _as_outputs(fn(*xs))
    rng = np.random.default_rng(seed)
    if grad_outputs is None:
        gys = [rng.standard_normal(o.shape) if o.dtype.kind == "f" else None for o in outs]
    else:
        gys = [np.asarray(g, np.float64) for g in grad_outputs]
    pairs = [(o, g) for o, g in zip(outs, gys) if g is not None and o.requires_grad]
    wanted = [x for x in xs if x.requires_grad]
    analytic = (
        grad([o for o, _ in pairs], wanted, [Tensor(g) for _, g in pairs], allow_unused=True)
        if pairs
        else [None] * len(wanted)
    )
    numeric = numerical_grad(fn, xs, [g if g is not None else 0.0 for g in gys], eps)
    numeric = [n for n, x in zip(numeric, xs) if x.requires_grad]
    for k, (a, n) in enumerate(zip(analytic, numeric)):
        a = np.zeros_like(n) if a is None else np.asarray(a.array, np.float64)
        if a.shape != n.shape or not np.allclose(a, n, atol=atol, rtol=rtol):
            raise AssertionError(
                f"gradient of input {k} differs from finite differences\n"
                f"analytic:\n{a}\nnumeric:\n{n}\nmax abs diff: {np.max(np.abs(a - n))}"
            )


def check_double_backward(
    fn: Callable,
    inputs: Sequence[Any],
    grad_outputs: Sequence[Any] | None = None,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    seed: int = 0,
) -> None:
    """Check second-order gradients: the first-order gradient function, differentiated again.

    Example:
        >>> from dualflow import ops
        >>> check_double_backward(ops.tanh, [np.array([0.3, -0.2])])
    """
    xs = _float_inputs(inputs)
    outs = _as_outputs(fn(*xs))
    rng = np.random.default_rng(seed + 1)
    if grad_outputs is None:
        grad_outputs = [rng.standard_normal(o.shape) for o in outs if o.dtype.kind == "f"]
    n_in = len(xs)
    float_positions = [i for i, x in enumerate(xs) if x.requires_grad]

    def first_order(*args: Tensor) -> tuple[Tensor, ...]:
        values, gys = args[:n_in], args[n_in:]
        with enable_grad():  # numerical_grad evaluates this under no_grad
            ys = [o for o in _as_outputs(fn(*values)) if o.dtype.kind == "f"]
            grads = grad(
                ys,
                [values[i] for i in float_positions],
                list(gys),
                create_graph=True,
                allow_unused=True,
            )
        return tuple(g if g is not None else values[i] * 0 for g, i in zip(grads, float_positions))

    check_backward(
        first_order, [x.array for x in xs] + list(grad_outputs), None, eps, atol, rtol, seed
    )
