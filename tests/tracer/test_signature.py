"""Argument signatures and state refs on the compiled call's hot path: the shortcuts (no
arguments; numpy state) give what the general code gives."""

from __future__ import annotations

import numpy as np

import dualflow
from dualflow.tracer.signature import flatten
from dualflow.tracer.state import StateRef


def test_no_arguments_flatten_to_the_walks_empty_signature() -> None:
    flat = flatten((), {}, ["x"])
    assert (flat.leaves, flat.paths, flat.described, flat.objects, flat.roots) == ([],) * 5
    assert flat.key == ((), (), ()) and flat.aliases == ()
    # the general walk's key for one empty argument differs: a call with [] retraces
    assert flatten(([],), {}, ["x"]).key != flat.key


def test_a_zero_argument_step_is_served_by_its_trace() -> None:
    w = dualflow.tensor(np.arange(4.0), requires_grad=True)
    step = dualflow.compile(lambda: (w * 2).sum())
    values = [float(step()) for _ in range(3)]
    assert values == [12.0] * 3 and step.stats().traces == 1


def test_a_numpy_state_array_traced_on_another_device_is_a_mismatch() -> None:
    t = dualflow.tensor(np.zeros(3, np.float32))
    cpu = StateRef.of("tensor", t, t, "w")
    assert cpu.mismatch() is None
    moved = StateRef("tensor", t, (3,), np.dtype(np.float32), "cuda:0", "w", False)
    assert moved.mismatch() == "w.device: cuda:0 -> cpu"
