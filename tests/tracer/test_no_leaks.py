"""Compiled calls leave no reference cycles: with the garbage collector off, memory stays flat
over hundreds of calls of a compiled model differentiated from outside, also with double
backward (issue 19: outputs -> tape node -> closure -> outputs held every call's residuals)."""

from __future__ import annotations

import gc
import resource

import numpy as np
import pytest

import dualflow
from dualflow import nn
from dualflow._pending import Pending
from dualflow._undo import UndoLog


def _model():
    dualflow.random.seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.Tanh(), nn.Linear(256, 1))
    x = dualflow.tensor(np.random.default_rng(0).normal(size=(64, 64)).astype(np.float32))
    return dualflow.compile(model), x


def _first_order(compiled, x) -> None:
    loss = (compiled(x) ** 2).mean()
    loss.backward()


def _double(compiled, x) -> None:
    xx = dualflow.tensor(x.numpy(), requires_grad=True)
    (g,) = dualflow.grad(compiled(xx).sum(), xx, create_graph=True)
    (g * g).sum().backward()


@pytest.mark.parametrize("call", [_first_order, _double], ids=["backward", "double-backward"])
def test_memory_is_flat_with_the_collector_off(call) -> None:
    compiled, x = _model()
    for _ in range(5):
        call(compiled, x)
    gc.collect()
    gc.disable()
    try:
        for _ in range(50):
            call(compiled, x)
        start, objects = _resident(), len(gc.get_objects())
        for _ in range(500):
            call(compiled, x)
        end, grown = _resident(), len(gc.get_objects()) - objects
    finally:
        gc.enable()
    assert end <= start * 1.05, (start, end)  # it grew by ~0.5 MB a call before the fix
    assert grown < 50, grown  # no object survives a call (a cycle would, with gc off)


def _resident() -> int:
    """Resident memory of this process in bytes (Linux), else the peak from getrusage."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize()
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def test_lazy_re_execution_keeps_no_earlier_call_alive() -> None:
    # a lazily recorded .grad stood for its array through a Pending that kept its recorder, whose
    # undo log kept the copies it saved and the old .grad, whose Pending kept the call before:
    # every call's gradients and parameter copies stayed reachable (~7 MB a call on the bench's
    # MLP, and page faults on every call)
    rng = np.random.default_rng(0)
    params = [dualflow.tensor(rng.normal(size=(256, 256)).astype(np.float32), requires_grad=True)]
    x = dualflow.tensor(rng.normal(size=(8, 256)).astype(np.float32))

    def step():
        for p in params:
            p.grad = None
        loss = (dualflow.ops.tanh(x @ params[0]) ** 2).sum()
        loss.backward()
        with dualflow.no_grad():
            for p in params:
                dualflow.ops.assign(p, p - 0.01 * p.grad)
        return loss

    compiled = dualflow.compile(step, lazy="always")
    compiled._lazy_reason = "the test's"  # off the fast path, every call lazily

    def alive(kind: type) -> int:
        gc.collect()
        return sum(type(o) is kind for o in gc.get_objects())

    for _ in range(3):
        compiled()
    logs, pendings = alive(UndoLog), alive(Pending)
    for _ in range(20):
        compiled()
    assert compiled.stats().lazy_calls == 23
    assert alive(UndoLog) == logs == 0 and alive(Pending) == pendings
    assert all(p.owner is None for p in gc.get_objects() if type(p) is Pending)
