"""One generated program of issue 35's fuzzer: a step that reads a Python number through an access
path (a root and a chain of steps, ``env_roots``/``env_steps``) and uses it in a tensor
computation (a ``sink``), called several times with the value at some level of the path changed
before some calls.

``EnvProgram.source()`` is the step's module (readable: print it to reproduce a failure);
``play(program, compiled)`` builds a fresh environment for it, calls the step (eagerly or
compiled at O0) ``calls`` times applying the mutations, and records every call's result and the
state after it.
"""

from __future__ import annotations

import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import dualflow
from tests.tracer.fuzz.env_roots import ROOTS, Env
from tests.tracer.fuzz.env_steps import STEPS

VALUES = (1.0, 2.0, 3.0, 4.0)  # whole numbers: int() of them sizes a reshape and a loop
SIGNED_ZEROS = (0.0, -0.0, 2.0)  # the values of the ``divide`` sink: 0.0 == -0.0, not x / 0.0
SINKS = {
    "divide": ["return x / v"],
    "scale": ["return x * v + 1.0"],
    "clamp": ["return x.clamp(max=v - 2.5)"],
    "reshape": ["return x.reshape(int(v), -1) * 2.0"],
    "loop": ["y = x", "for _ in range(int(v)):", "    y = y * 0.5 + 1.0", "return y"],
    "branch": ["if v > 2.5:", "    return x * 2.0", "return x - 1.0"],
    "dropout": ["return ops.dropout(x, v / 10.0, train=True, generator=GEN)"],
    "sgd": [
        "loss = ((x * W) ** 2).sum()",
        "(g,) = dualflow.grad(loss, [W])",
        "with dualflow.no_grad():",
        "    ops.assign(W, W - g * (v / 100.0))",
        "return loss",
    ],
}
_HEADER = """\
import collections, copy, dataclasses, decimal, functools, itertools, json, math, operator, os
import contextlib, importlib, statistics, sys
import numpy as np
import dualflow
from dualflow import ops
from tests.tracer.fuzz import env_helpers as lib
{defs}

def make(_initial):
    cfg = _initial

    def step(x{default}):
        v = {expr}
{sink}

    def rebind(new):
        nonlocal cfg
        cfg = new

    return step, rebind
"""


@dataclass(frozen=True)
class Mutation:
    """Before call ``call``, set the path's value to ``value`` at ``level``: -1 rebinds the root
    (a new object built for the whole path), ``k`` replaces what step ``k`` reads in place.
    ``value=None`` (only at the root) puts ``None`` there: the step raises until a later rebind,
    eagerly and compiled alike."""

    call: int
    level: int
    value: float | None


@dataclass(frozen=True)
class EnvProgram:
    """A generated program (see the module docstring); ``steps`` go from the root inwards."""

    root: str
    steps: tuple[str, ...]
    sink: str
    first: float
    mutations: tuple[Mutation, ...]
    calls: int = 5
    seed: int = 0
    tag: str = "p0"

    def expression(self) -> str:
        """The access path as Python source.

        Example:
            >>> EnvProgram("dict_global", ("max_key", "np_item"), "scale", 1.0, ()).expression()
            "max(D['cfg'], key=lambda o: o.rank).val.item()"
        """
        env = Env({}, self.tag)
        expr = ROOTS[self.root].expr.format(key=env.environ_key, lib=env.lib_name)
        for name in self.steps:
            expr = STEPS[name].read(expr)
        return expr

    def source(self) -> str:
        """The generated module defining ``make`` (which returns the step and the closure's
        rebinding function)."""
        sink = "\n".join(" " * 8 + line for line in SINKS[self.sink])
        default = ", cfg=_initial" if self.root == "default" else ""
        defs = "".join("\n" + STEPS[s].defs for s in self.steps if STEPS[s].defs)
        return _HEADER.format(default=default, expr=self.expression(), sink=sink, defs=defs)

    def constructs(self) -> set[str]:
        """Every construct the program uses, named as in ``env_known.KNOWN_SILENT``."""
        return {f"root:{self.root}", f"sink:{self.sink}"} | {f"step:{s}" for s in self.steps}

    def none_calls(self) -> set[int]:
        """The calls that find ``None`` at the root (where the step may raise).

        Example:
            >>> nones = (Mutation(1, -1, None), Mutation(3, -1, 2.0))
            >>> EnvProgram("global", ("attr",), "scale", 1.0, nones).none_calls()
            {1, 2}
        """
        found, none = set(), False
        for call in range(self.calls):
            for m in self.mutations:
                if m.call == call and m.level < 0:
                    none = m.value is None
            if none:
                found.add(call)
        return found


def build_path(steps: tuple[str, ...], value: float, env: Env) -> tuple[Any, list[Any]]:
    """The objects of a path holding ``value``: the outermost one and each step's holder.

    Example:
        >>> outer, levels = build_path(("item", "np_index"), 2.0, Env({}, "p0"))
        >>> outer["val"][0], levels[1] is outer["val"]
        (np.float64(2.0), True)
    """
    inner: Any = value
    levels: list[Any] = []
    for name in reversed(steps):
        if name == "weakref":
            env.keep.append(inner)  # the referent lives as long as the program
            inner = weakref.ref(inner)
        else:
            inner = STEPS[name].build(inner)
        levels.insert(0, inner)
    return inner, levels


@dataclass
class Call:
    """One call: ``("ok", array)`` or ``("raised", type name, message)``, and the state after."""

    outcome: tuple
    state: dict[str, np.ndarray]


@dataclass
class Played:
    """A program's calls, the warnings they emitted, the compiled function (or None) and the
    traceback of an exception the eager run did not raise (filled by ``env_compare``)."""

    calls: list[Call]
    warned: list[str]
    fn: Any
    levels: list[Any] = field(default_factory=list)


def _mutate(program: EnvProgram, env: Env, levels: list[Any], m: Mutation) -> None:
    if m.value is None:
        ROOTS[program.root].rebind(env, None)  # the old objects stay in ``levels``, detached
        return
    if m.level < 0:
        outer, levels[:] = build_path(program.steps, m.value, env)
        ROOTS[program.root].rebind(env, outer)
        return
    inner, below = build_path(program.steps[m.level + 1 :], m.value, env)
    STEPS[program.steps[m.level]].put(levels[m.level], inner)
    levels[m.level + 1 :] = below


def _environment(program: EnvProgram) -> tuple[Env, Any, list[Any]]:
    env = Env({"__name__": f"fuzzenv_{program.tag}"}, program.tag)
    filename = f"/fuzzenv/{program.tag}.py"  # a user file: the probe follows it
    exec(compile(program.source(), filename, "exec"), env.ns)
    outer, levels = build_path(program.steps, program.first, env)
    env.ns["_initial"] = None
    ROOTS[program.root].place(env, outer)
    step, env.rebind_cell = env.ns["make"](env.ns["_initial"])
    rng = np.random.default_rng(program.seed)
    env.ns["W"] = dualflow.tensor(rng.standard_normal((3, 4)).astype("float32"))
    env.ns["W"].requires_grad = True
    env.ns["GEN"] = dualflow.random.Generator(program.seed)
    return env, step, levels


def _state(env: Env) -> dict[str, np.ndarray]:
    return {
        "W": np.array(env.ns["W"].numpy(), copy=True),
        "GEN": np.array(env.ns["GEN"].state.numpy(), copy=True),
    }


def inputs(program: EnvProgram) -> list[np.ndarray]:
    """The step's argument at each call (a fresh 3x4 array each time, the same in every run).

    Example:
        >>> [x.shape for x in inputs(EnvProgram("global", (), "scale", 1.0, (), calls=2))]
        [(3, 4), (3, 4)]
    """
    rng = np.random.default_rng(program.seed + 1)
    return [rng.standard_normal((3, 4)).astype("float32") for _ in range(program.calls)]


def play(program: EnvProgram, compiled: bool, lazy: bool | str = True) -> Played:
    """Call ``program``'s step ``calls`` times in a fresh environment, applying its mutations.

    Example:
        >>> p = EnvProgram("global", ("item",), "scale", 1.0, (Mutation(1, -1, 3.0),), calls=2)
        >>> x, out = inputs(p)[1], play(p, compiled=False).calls[1].outcome[1]
        >>> bool(np.array_equal(out, x * 3.0 + 1.0))
        True
    """
    env, step, levels = _environment(program)
    fn = dualflow.compile(step, passes="O0", lazy=lazy) if compiled else step
    arguments = inputs(program)
    calls = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for call in range(program.calls):
                for m in program.mutations:
                    if m.call == call:
                        _mutate(program, env, levels, m)
                calls.append(_call(fn, dualflow.tensor(arguments[call]), env))
    finally:
        env.clean()
    # dualflow's warnings (a compiled function giving up), not numpy's (a division by zero)
    warned = [str(w.message) for w in caught if str(w.message).startswith("dualflow")]
    return Played(calls, warned, fn if compiled else None, levels)


def _call(fn: Any, x: Any, env: Env) -> Call:
    try:
        out = fn(x)
        outcome: tuple = ("ok", np.array(out.numpy(), copy=True))
    except Exception as exc:  # compared with eager's: same type and message
        outcome = ("raised", type(exc).__name__, str(exc), exc)
    return Call(outcome, _state(env))
