"""What a program's fragments build and share while a spec is turned into a step function.

A fragment gets the ``Scope`` when the program is built (to create parameters, modules, buffers,
extra state to compare and hooks to run between calls, all from the spec's seed) and an ``Env``
at every call of the step (the call's arguments and the activation so far).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import dualflow
from dualflow import ops
from dualflow.nn import Module, Parameter
from dualflow.tensor.core import Tensor


@dataclass
class Env:
    """One call's view for the fragments: the step's input ``x`` and target ``t``."""

    x: Tensor
    t: Tensor | None
    scope: Scope


@dataclass
class Scope:
    """The state one build of a program owns (eager and compiled twins each build their own)."""

    seed: int
    dtype: np.dtype
    width: int
    mode: str
    rng: np.random.Generator = field(init=False)
    generator: Any = field(init=False)  # the dropout fragments' RNG (captured state)
    params: list[Parameter] = field(default_factory=list)
    modules: list[Module] = field(default_factory=list)
    buffers: dict[str, Tensor] = field(default_factory=dict)
    extras: dict[str, Callable[[], Any]] = field(default_factory=dict)
    hooks: list[Callable[[int], None]] = field(default_factory=list)
    preludes: list[Callable[[Env], None]] = field(default_factory=list)
    # checks run after the step's backward or its optimizer step (``late``): they may raise
    # after the step wrote its gradients or its parameters
    lates: dict[str, list[Callable[[Env], None]]] = field(default_factory=dict)
    # snapshot keys of extras a raised call keeps as it ran (``track(undone=False)``)
    kept_on_raise: set[str] = field(default_factory=set)
    # why a statement ran a path a compiled step cannot trace (a boolean mask read): appended
    # when it runs, so the eager run tells whether the compiled one must have fallen back
    eager_reasons: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)
        self.generator = dualflow.random.Generator(self.seed)

    def array(self, shape: tuple[int, ...], scale: float = 0.5, offset: float = 0.0) -> np.ndarray:
        """Seeded normal values of the program's dtype (a 0-d array for shape ``()``: a numpy
        scalar would make ``Parameter`` keep a scalar that ``ops.assign`` cannot write)."""
        return np.asarray(self.rng.normal(size=shape) * scale + offset, dtype=self.dtype)

    def param(self, shape: tuple[int, ...], scale: float = 0.5, offset: float = 0.0) -> Parameter:
        """A new trainable parameter (the optimizer updates every one)."""
        p = Parameter(self.array(shape, scale, offset))
        self.params.append(p)
        return p

    def buffer(self, shape: tuple[int, ...], fill: float = 0.0) -> Tensor:
        """A new state tensor (not trainable) compared after every call."""
        t = dualflow.tensor(np.full(shape, fill, self.dtype))
        self.buffers[f"buffer{len(self.buffers)}"] = t
        return t

    def module(self, module: Module) -> Module:
        """Register a module: its parameters are re-drawn from the seed, trained and compared;
        its buffers (running statistics) are compared; eval programs put it in eval mode."""
        if self.dtype == np.float64:  # layers refuse inputs of another float dtype (PyTorch)
            module = module.double()
        with dualflow.no_grad():
            for name, p in module.named_params():
                gain = name.endswith("weight") and p.ndim == 1  # a batch norm's scale
                scale = 0.3 if p.ndim == 1 else p.shape[-1] ** -0.5
                ops.assign(p, self.array(tuple(p.shape), scale, 1.0 if gain else 0.0))
                self.params.append(p)
            for name, b in module.named_buffers():
                if b.dtype.kind == "f" and name.endswith("var"):
                    ops.assign(b, np.abs(self.array(tuple(b.shape), 0.5, 1.0)) + 0.1)
                elif b.dtype.kind == "f":
                    ops.assign(b, self.array(tuple(b.shape), 0.3))
        module.train(self.mode == "train")
        self.modules.append(module)
        return module

    def track(self, name: str, read: Callable[[], Any], undone: bool = True) -> None:
        """Compare ``read()`` (an array or any Python value) after every call. ``undone=False``:
        a Python object the step itself mutates (a list it appends to), which a call that
        raises keeps as it ran, eager or compiled (atomicity covers dualflow's state only)."""
        self.extras[name] = read
        if not undone:
            self.kept_on_raise.add(f"extra.{name}")

    def prelude(self, check: Callable[[Env], None]) -> None:
        """Run ``check(env)`` first in the step, before it writes anything (it may raise)."""
        self.preludes.append(check)

    def late(self, where: str, check: Callable[[Env], None]) -> None:
        """Run ``check(env)`` after the training step's ``backward`` or its optimizer ``step``
        (``where``); it may raise with the step's writes made."""
        self.lates.setdefault(where, []).append(check)

    def run_lates(self, where: str, env: Env) -> None:
        """The ``late`` checks registered for ``where``, in order."""
        for check in self.lates.get(where, ()):
            check(env)

    def between_calls(self, hook: Callable[[int], None]) -> None:
        """Run ``hook(call_index)`` before every call (outside the step): mutations of the
        Python environment a compiled step must notice."""
        self.hooks.append(hook)
