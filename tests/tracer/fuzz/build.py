"""Spec -> Program: a step function plus the fresh state it trains, built from the spec's seed.

Building the same spec twice gives two programs with identical (but separate) parameters,
optimizer, modules, buffers and RNG, so one can run eagerly and the other compiled.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import dualflow
from dualflow import ops, optim
from dualflow.nn.utils import clip_grad_norm_, clip_grad_value_
from dualflow.tensor.core import Tensor
from tests.tracer.fuzz.fragments import registry
from tests.tracer.fuzz.scope import Env, Scope
from tests.tracer.fuzz.spec import Spec


class ManualSGD:
    """The bench's update written by hand: ``.grad = None``, then ``assign(p, p - lr * grad)``
    (lazily, each call's gradients once stood for their arrays through the recorder, which kept
    the call's undo log, which kept the gradients of the call before)."""

    def __init__(self, params: list, lr: float = 0.05) -> None:
        self.params, self.lr, self.state = list(params), lr, {}

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        with dualflow.no_grad():
            for p in self.params:
                if p.grad is not None:
                    ops.assign(p, p - self.lr * p.grad)


OPTIMIZERS: dict[str, Callable[[list], Any]] = {
    "sgd": lambda ps: optim.SGD(ps, lr=0.05),
    "manual_sgd": ManualSGD,
    "momentum": lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-3),
    "nesterov": lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True),
    "adam": lambda ps: optim.Adam(ps, lr=0.01),
    "adamw": lambda ps: optim.AdamW(ps, lr=0.01, weight_decay=0.01),
    "rmsprop": lambda ps: optim.RMSprop(ps, lr=0.01, momentum=0.5),
    "rmsprop_centered": lambda ps: optim.RMSprop(ps, lr=0.01, centered=True),
    "adagrad": lambda ps: optim.Adagrad(ps, lr=0.05),
    "adadelta": lambda ps: optim.Adadelta(ps, lr=1.0),
    "adamax": lambda ps: optim.Adamax(ps, lr=0.01),
    "nadam": lambda ps: optim.NAdam(ps, lr=0.01),
    "radam": lambda ps: optim.RAdam(ps, lr=0.01),
    # an LR schedule stepped between calls (the step must read the new lr) ...
    "sgd_steplr": lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9),
    "adam_cosine": lambda ps: optim.Adam(ps, lr=0.01),
    # ... and gradients clipped inside the step, before the update
    "adam_clip_norm": lambda ps: optim.Adam(ps, lr=0.01),
    "sgd_clip_value": lambda ps: optim.SGD(ps, lr=0.05),
}
SCHEDULES: dict[str, Callable[[Any], Any]] = {
    "sgd_steplr": lambda opt: optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5),
    "adam_cosine": lambda opt: optim.lr_scheduler.CosineAnnealingLR(opt, T_max=3),
}
CLIPS: dict[str, Callable[[list], Any]] = {
    "adam_clip_norm": lambda ps: clip_grad_norm_(ps, 0.5),
    "sgd_clip_value": lambda ps: clip_grad_value_(ps, 0.05),
}

LOSSES: dict[str, Callable[[Any, Any], Any]] = {
    "mse": ops.mean_squared_error,
    "xent": ops.softmax_cross_entropy,
    "square": lambda h, t: ops.mean(h * h),
}


def _array(value: Any) -> Any:
    if isinstance(value, Tensor):
        return np.array(value.numpy(), copy=True)
    return np.array(value, copy=True) if isinstance(value, np.ndarray) else value


@dataclass
class Program:
    """A built spec: ``step`` (call it with ``inputs(call)`` under ``context()``) and its state."""

    spec: Spec
    scope: Scope
    step: Callable[..., Any]
    optimizer: Any

    def inputs(self, call: int) -> tuple:
        """The arguments of call ``call`` (fresh tensors; the same for every build)."""
        spec, rng = self.spec, np.random.default_rng([self.spec.seed, call])
        shape = (spec.batches[call], spec.width)
        x = dualflow.tensor(rng.normal(size=shape).astype(spec.dtype))
        if spec.mode == "eval":
            return (x,)
        x.requires_grad = spec.penalty > 0
        if spec.loss == "mse":
            return x, dualflow.tensor(rng.normal(size=shape).astype(spec.dtype))
        if spec.loss == "xent":
            return x, dualflow.tensor(rng.integers(0, spec.width, size=shape[0]))
        return x, None

    def before(self, call: int) -> None:
        """Run the fragments' between-call hooks."""
        for hook in self.scope.hooks:
            hook(call)

    def context(self) -> Any:
        """``no_grad()`` for eval programs."""
        return dualflow.no_grad() if self.spec.mode == "eval" else contextlib.nullcontext()

    def snapshot(self) -> dict[str, Any]:
        """Every piece of state by name: parameters and their ``.grad``, optimizer state, module
        buffers (running statistics) and ``training`` flags, assigned buffers, the dropout RNG
        and fragments' extras."""
        scope, found = self.scope, {}
        for i, p in enumerate(scope.params):
            found[f"param{i}"] = _array(p)
            found[f"param{i}.grad"] = None if p.grad is None else _array(p.grad)
            state = self.optimizer.state.get(p, {}) if self.optimizer is not None else {}
            for key, value in sorted(state.items()):
                found[f"optimizer.param{i}.{key}"] = _array(value)
        for j, module in enumerate(scope.modules):
            found[f"module{j}.training"] = [m.training for m in module.modules()]
            for name, buffer in module.named_buffers():
                found[f"module{j}.{name}"] = _array(buffer)
        found.update((name, _array(b)) for name, b in scope.buffers.items())
        found["generator"] = _array(scope.generator.state)
        found.update((f"extra.{name}", _array(read())) for name, read in scope.extras.items())
        return found


def _input_gradient(loss: Tensor, x: Tensor, also: list) -> Tensor:
    """``d loss / d x`` (with its graph), asked for together with the tensors ``also``."""
    if not also:
        (g,) = dualflow.grad(loss, [x], create_graph=True)
        return g
    return dualflow.grad(loss, [x, *also], create_graph=True, allow_unused=True)[0]


def build(spec: Spec) -> Program:
    """Build ``spec``'s step and state from its seed.

    Example:
        >>> from tests.tracer.fuzz.spec import Piece
        >>> program = build(Spec(3, body=(Piece("unary", (("kind", "tanh"),)),)))
        >>> loss, h = program.step(*program.inputs(0)); h.shape
        (4, 8)
    """
    scope = Scope(spec.seed, np.dtype(spec.dtype), spec.width, spec.mode)
    fragments = registry()
    statements = [fragments[piece.name].make(scope, piece) for piece in spec.body]
    if spec.mode == "eval":

        def infer(x: Tensor) -> Tensor:
            env, h = Env(x, None, scope), x
            for check in scope.preludes:
                check(env)
            for statement in statements:
                h = statement(h, env)
            return h

        return Program(spec, scope, infer, None)
    bias = scope.param((spec.width,), 0.1)  # every training program has a parameter
    opt = OPTIMIZERS[spec.optimizer](scope.params) if spec.optimizer else None
    loss_fn = LOSSES[spec.loss]
    clip = CLIPS.get(spec.optimizer)
    if spec.optimizer in SCHEDULES:  # one scheduler step before every call but the first
        schedule = SCHEDULES[spec.optimizer](opt)
        scope.between_calls(lambda call: schedule.step() if call else None)

    def step(x: Tensor, t: Tensor | None) -> tuple[Tensor, Tensor]:
        env, h = Env(x, t, scope), x
        for check in scope.preludes:  # may raise: before anything is written
            check(env)
        if opt is not None:
            opt.zero_grad()
        for statement in statements:
            h = statement(h, env)
        h = h + bias
        loss = loss_fn(h, t)
        if spec.penalty > 0:  # a gradient penalty: double backward through the whole step
            g = _input_gradient(loss, x, scope.params if spec.every_leaf else [])
            loss = loss + ops.sum(g * g) * spec.penalty
        loss.backward()
        scope.run_lates("backward", env)  # may raise, the gradients written
        if clip is not None:
            clip(scope.params)
        if opt is not None:
            opt.step()
        scope.run_lates("step", env)  # may raise, the parameters updated
        return loss.detach(), h.detach()

    return Program(spec, scope, step, opt)
