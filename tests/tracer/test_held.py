"""``held_by`` and explain's "held between calls" line count what a compiled function really
keeps: a fresh compiled function's first calls, measured with tracemalloc, leave allocated what
it says (plan buffers, constants) and little more (the graphs and plans as Python objects)."""

from __future__ import annotations

import numpy as np

import dualflow
from dualflow import nn
from dualflow.bench.harness import held_after_first_calls
from dualflow.tracer.held import held_by

WIDTH, BATCH = 256, 128  # an activation is 128 KiB; 8 layers make 24 of them per call


def _model() -> nn.Module:
    dualflow.random.seed(0)
    parts = []
    for _ in range(8):
        parts += [nn.Linear(WIDTH, WIDTH), nn.ReLU()]
    return nn.Sequential(*parts)


def test_a_fresh_compiled_function_keeps_what_held_by_counts() -> None:
    model = _model()
    x = dualflow.tensor(np.random.default_rng(0).normal(size=(BATCH, WIDTH)).astype(np.float32))
    scale = np.full((BATCH, WIDTH), 0.5, np.float32)

    def forward(x):  # a constant made by the call (a copy of `scale` would read the
        # environment's array through numpy, which the probe cannot guard: it gives up)
        return model(x) * dualflow.tensor(np.full((BATCH, WIDTH), 0.5, np.float32))

    with dualflow.no_grad():
        warm = dualflow.compile(forward)  # kernels compiled once per process: not held
        warm(x), warm(x)
        fresh = dualflow.compile(forward)
        measured = held_after_first_calls(lambda: fresh(x))
    held = held_by(fresh.history)
    assert held.constants == scale.nbytes
    assert held.buffers > 0
    # before issue 36 the tracing run's 24 activations (3 MiB) stayed allocated as well
    assert held.total <= measured <= held.total + 2**19, (held, measured)


def test_held_counts_the_backward_plan_and_explain_prints_it() -> None:
    model = _model()
    x = dualflow.tensor(np.ones((BATCH, WIDTH), np.float32))
    compiled = dualflow.compile(model)
    for _ in range(2):
        out = compiled(x)
        out.sum().backward()
        del out
    (trace,) = compiled.history
    assert trace.backward is not None
    held = held_by(compiled.history)
    assert held.buffers == trace.plan.held_bytes + trace.backward.plan.held_bytes
    assert held.buffers > 0 and held.constants == 0
    text = str(dualflow.explain(compiled))
    assert text.count(held.describe()) == 2  # the function's line and its one trace's
