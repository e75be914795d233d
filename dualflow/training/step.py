"""The training step the loop calls: ``make_train_step`` and its compiled form ``compile_step``.

A step is one plain function ``step(x, y) -> (loss, outputs)`` doing the whole update (zero_grad,
forward, loss, backward, optimizer step), so ``dualflow.compile`` can trace all of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dualflow.tracer import CompiledFunction
from dualflow.tracer import compile as compile_fn

Step = Callable[[Any, Any], tuple[Any, Any]]


def make_train_step(model: Any, optimizer: Any, loss_fn: Callable[[Any, Any], Any]) -> Step:
    """One optimization step on a batch: zero_grad, forward, loss, backward, optimizer.step.

    Args:
        model: a callable Module.
        optimizer: an optimizer over the model's parameters.
        loss_fn: ``loss_fn(outputs, targets)`` returning a scalar Tensor.

    Returns:
        ``step(x, y) -> (loss, outputs)``; wrap it in ``dualflow.compile`` to run it as a graph.

    Example:
        >>> import dualflow
        >>> from dualflow import nn, ops, optim
        >>> model = nn.Linear(2, 1)
        >>> step = make_train_step(model, optim.SGD(list(model.params()), lr=0.1),
        ...                        ops.mean_squared_error)
        >>> x, y = dualflow.tensor([[1.0, 2.0]]), dualflow.tensor([[1.0]])
        >>> first, _ = step(x, y)
        >>> second, outputs = step(x, y)
        >>> second.item() < first.item(), outputs.shape
        (True, (1, 1))
    """

    def train_step(x: Any, y: Any) -> tuple[Any, Any]:
        optimizer.zero_grad()
        outputs = model(x)
        loss = loss_fn(outputs, y)
        loss.backward()
        optimizer.step()
        return loss, outputs

    return train_step


def compile_step(fn: Callable[..., Any], **options: Any) -> CompiledFunction:
    """``dualflow.compile(fn, **options)`` for a step function (an already compiled one is kept).

    Optimizers create their state (momentum buffers, Adam moments) on their first ``step()``;
    the trace of that first call is used once, and the second call traces again with the state
    captured, so from the third call on the step runs as a graph.

    Example:
        >>> import dualflow
        >>> from dualflow import nn, ops, optim
        >>> model = nn.Linear(2, 1)
        >>> opt = optim.Adam(list(model.params()), lr=0.1)
        >>> step = compile_step(make_train_step(model, opt, ops.mean_squared_error))
        >>> x, y = dualflow.tensor([[1.0, 2.0]]), dualflow.tensor([[1.0]])
        >>> for _ in range(3):
        ...     _ = step(x, y)
        >>> step.stats().plan_runs
        1
    """
    if isinstance(fn, CompiledFunction):
        return fn
    return compile_fn(fn, **options)
