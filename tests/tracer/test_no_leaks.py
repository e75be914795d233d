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
