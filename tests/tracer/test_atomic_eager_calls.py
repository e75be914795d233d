"""Calls a compiled function runs eagerly keep the all-or-nothing promise too (issue 36, item 1):
after ``max_traces`` or a fail-closed event, and when another rank votes eager, a call that
raises or is interrupted after its updates leaves parameters, optimizer state (its Python dicts
too), ``.grad``, batch-norm statistics and the RNG state as they were."""

from __future__ import annotations

import signal
import warnings

import numpy as np
import pytest

import dualflow
from dualflow.ops import host_print
from dualflow.ops.registry import OPS, OpDef
from tests.tracer.test_atomic_calls import T, X, _rng_tensors, _setup, _snapshot


def _eager_for_good(how: str, lazy: bool = False):
    model, opt, step = _setup("adam")
    if how == "max_traces":
        compiled = dualflow.compile(step, max_traces=1, lazy=lazy)
        compiled(X, T)  # a single-use trace (Adam's moments are born): not kept
        compiled(X, T)  # the one trace
        compiled(X[:5], T[:5])  # a new shape, no traces left: eager from now on
    else:  # a fail-closed event: .numpy() of a traced tensor

        def reading(x, t, fail=False):
            loss = step(x, t, fail)
            loss.numpy()
            return loss

        compiled = dualflow.compile(reading, lazy=lazy)
        compiled(X, T)
    assert (compiled._lazy_reason if lazy else compiled._eager_reason) is not None
    return model, opt, compiled


@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "lazy"])
@pytest.mark.parametrize("how", ["max_traces", "fail_closed"])
def test_an_eager_call_that_raises_commits_nothing(how: str, lazy: bool) -> None:
    # lazy: the same promise by lazy re-execution, whose flushes commit under an undo log
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        model, opt, compiled = _eager_for_good(how, lazy)
        before, rng_before = _snapshot(model, opt), [t.numpy().copy() for t in _rng_tensors()]
        with pytest.raises(ValueError, match="bad batch"):
            compiled(X, T, True)  # raises after opt.step() wrote every parameter
    for a, b in zip(_snapshot(model, opt), before):
        np.testing.assert_array_equal(a, b)
    for a, b in zip((t.numpy() for t in _rng_tensors()), rng_before):
        np.testing.assert_array_equal(a, b)
    compiled(X, T)  # and the next call runs as usual
    assert any((a != b).any() for a, b in zip(_snapshot(model, opt), before))


@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "lazy"])
def test_an_interrupted_eager_call_commits_nothing(
    monkeypatch: pytest.MonkeyPatch, lazy: bool
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        model, opt, compiled = _eager_for_good("max_traces", lazy)
    before = _snapshot(model, opt)

    original = compiled.fn

    def interrupted(x, t, fail=False):
        loss = original(x, t)
        dualflow.debug.print("after the update")  # Ctrl-C lands here, after opt.step()
        return loss

    compiled.fn = interrupted
    monkeypatch.setattr(host_print, "_emit", lambda text: signal.raise_signal(signal.SIGINT))
    with pytest.raises(KeyboardInterrupt):
        compiled(X, T)
    for a, b in zip(_snapshot(model, opt), before):
        np.testing.assert_array_equal(a, b)


def test_a_compiled_function_called_inside_joins_the_undo() -> None:
    """An inner compiled step runs inlined inside an outer eager call: its writes are undone
    with the outer call's (it must not commit a plan of its own inside the window)."""
    model, opt, step = _setup("sgd")
    inner = dualflow.compile(step)
    for _ in range(3):
        inner(X, T)  # inner has plans now

    def outer(x, t, fail=False):
        loss = inner(x, t)
        loss.numpy()  # fails the outer trace closed: outer runs eagerly from now on
        if fail:
            raise ValueError("bad batch")
        return loss

    compiled = dualflow.compile(outer, lazy=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        compiled(X, T)
    assert compiled._eager_reason is not None
    before = _snapshot(model, opt)
    plans = inner.stats().plan_runs
    with pytest.raises(ValueError, match="bad batch"):
        compiled(X, T, True)  # inner runs inlined, after its update the outer call raises
    assert inner.stats().plan_runs == plans  # no plan of its own committed in the window
    for a, b in zip(_snapshot(model, opt), before):
        np.testing.assert_array_equal(a, b)


def test_a_state_write_always_takes_the_checked_eager_path_that_saves_its_target() -> None:
    # the undo save lives in the eager interpreter's checked path: an op that writes state and
    # asked not to be checked would otherwise take the fast path and write unsaved
    unchecked = OpDef("w", "primitive", lambda xp, a, b: a, lambda a, b: (a,), check_eager=False)
    writer = OpDef(
        "w", "primitive", lambda xp, a, b: a, lambda a, b: (a,), check_eager=False, state_write=True
    )
    assert not unchecked.check_eager and writer.check_eager
    assert all(op.check_eager for op in OPS.values() if op.state_write)
