"""The "python floor" peer: the tiny-op workloads in the least a Python autograd can do over numpy.

A tape of closures, no argument checks, dtype rules, hooks, devices or double backward: what is
left is one numpy call and a few Python objects per op. No framework written in Python can be
much faster, so the row shows how much of the eager-dispatch goal's budget is left for what a
real framework adds. Imported by ``child.py`` under the peers' interpreter: numpy and the stdlib.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

MODE = "python floor"
VERSION = np.__version__
Built = tuple[Callable[[], Any], Callable[[Any], Any]]


class Var:
    """A value; the tape, not the value, knows which op made it."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class Tape:
    """The recorded ops of one step: (output, backward closure, inputs), newest last."""

    def __init__(self) -> None:
        self.entries: list[tuple[Var, Callable[[Any], tuple], tuple]] = []

    def op(self, value: Any, backward: Callable[[Any], tuple], inputs: tuple) -> Var:
        out = Var(value)
        self.entries.append((out, backward, inputs))
        return out

    def grad(self, out: Var, wrt: list[Var]) -> list[Any]:
        """Gradients of ``out`` (a scalar) w.r.t. ``wrt``, in reverse order of recording.

        Example:
            >>> tape = Tape(); x = Var(np.float32(3.0))
            >>> y = tape.op(x.value * x.value, lambda g: (2 * g * x.value,), (x,))
            >>> float(tape.grad(y, [x])[0])
            6.0
        """
        grads = {id(out): np.ones((), np.float32)}
        for made, backward, inputs in reversed(self.entries):
            g = grads.pop(id(made), None)
            if g is None:
                continue
            for var, gx in zip(inputs, backward(g)):
                key = id(var)
                grads[key] = gx if key not in grads else grads[key] + gx
        self.entries.clear()
        return [grads[id(v)] for v in wrt]


def chain(tape: Tape, x: Var, w: Var) -> Var:
    """The peers' 50 tiny ops: 10 x [*0.9, +0.1, tanh, *w, sigmoid], then a sum.

    Example:
        >>> ones = Var(np.ones((2, 2), np.float32))
        >>> round(float(chain(Tape(), ones, ones).value), 4)
        2.5744
    """
    h = x
    for _ in range(10):
        a = h.value
        h = tape.op(np.multiply(a, 0.9), lambda g: (np.multiply(g, 0.9),), (h,))
        h = tape.op(np.add(h.value, 0.1), lambda g: (g,), (h,))
        t = np.tanh(h.value)
        h = tape.op(t, lambda g, t=t: (g * (1 - t * t),), (h,))
        a, b = h.value, w.value
        h = tape.op(np.multiply(a, b), lambda g, a=a, b=b: (g * b, g * a), (h, w))
        s = np.tanh(np.multiply(h.value, 0.5))
        s *= 0.5
        s += 0.5
        h = tape.op(s, lambda g, s=s: (g * s * (1 - s),), (h,))
    shape = h.value.shape
    return tape.op(h.value.sum(), lambda g: (np.broadcast_to(g, shape),), (h,))


def _inputs() -> tuple[Var, Var]:
    rng = np.random.default_rng(0)
    return tuple(Var(rng.standard_normal((16, 16), dtype=np.float32)) for _ in range(2))


def tiny_ops() -> Built:
    """50 tiny ops on 16x16 float32 and the gradients w.r.t. both inputs."""
    x, w = _inputs()
    tape = Tape()
    return (lambda: tape.grad(chain(tape, x, w), [x, w])), _no_sync


def _no_sync(out: Any) -> None:
    return None


WORKLOADS: dict[str, Callable[[], Built]] = {"tiny-ops": tiny_ops}
