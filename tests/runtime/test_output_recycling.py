"""A plan writes a large output into the previous run's output array only when nothing references
that array any more: a kept output, a view of it or a Tensor of it is never overwritten, and
compiled results stay equal to eager ones."""

from __future__ import annotations

import gc
import warnings
import weakref

import numpy as np

import dualflow
from dualflow.runtime import memory as memory_module

N = 1 << 16  # float32: 256 KiB, above FRESH_MIN_BYTES, so the output has a per-run buffer


def _step_and_state() -> tuple:
    x = dualflow.tensor(np.random.default_rng(0).standard_normal(N).astype(np.float32))

    def step():
        with dualflow.no_grad():
            return (x * 0.5 + 1) * (x - 2) - x * x

    return step, x


def test_a_dropped_output_array_is_written_again_by_the_next_call() -> None:
    assert N * 4 >= memory_module.FRESH_MIN_BYTES
    step, _ = _step_and_state()
    compiled = dualflow.compile(step)
    compiled()  # trace
    first = compiled()
    first_array = id(first.array)  # the plan keeps the array alive: its id stays its own
    del first
    gc.collect()
    second = compiled()
    assert id(second.array) == first_array
    np.testing.assert_array_equal(second.numpy(), step().numpy())


def test_an_output_with_a_weak_reference_is_never_written_again() -> None:
    # getrefcount does not see a weakref: taking the array would show the weakref's holder the
    # next call's values, where eager's dropped array keeps its own (or is gone)
    step, x = _step_and_state()
    compiled = dualflow.compile(step)
    compiled()
    first = compiled()
    ref, before = weakref.ref(first.array), first.numpy().copy()
    del first
    gc.collect()
    with dualflow.no_grad():
        dualflow.ops.assign(x, x + 1.0)  # the next calls compute other values
    for _ in range(3):
        latest = compiled()
        assert latest.array is not ref()
        np.testing.assert_array_equal(latest.numpy(), step().numpy())
        del latest
    if ref() is not None:  # still held by the plan's spares: unchanged
        np.testing.assert_array_equal(ref(), before)


def test_an_output_made_read_only_then_dropped_is_not_written_again() -> None:
    # the steps would write into it with out= and fail: the call fell back to eager with a
    # "please report this" warning; now a new array takes its place, no warning, eager's values
    step, _ = _step_and_state()
    compiled = dualflow.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(4):
            result = compiled()
            np.testing.assert_array_equal(result.numpy(), step().numpy())
            result.numpy().flags.writeable = False
            del result
    assert compiled.stats().eager_fallbacks == 0


def test_kept_outputs_views_and_tensors_are_never_overwritten() -> None:
    step, x = _step_and_state()
    compiled = dualflow.compile(step)
    compiled()
    kept = compiled()
    view_source = compiled()
    view = view_source.array[10:20]
    del view_source
    wrapped = dualflow.tensor(compiled().array)
    before = [kept.numpy().copy(), view.copy(), wrapped.numpy().copy()]
    with dualflow.no_grad():
        dualflow.ops.assign(x, x + 1.0)  # the next calls compute other values
    for _ in range(3):
        latest = compiled()
        np.testing.assert_array_equal(latest.numpy(), step().numpy())
        assert latest.array is not kept.array and latest.array is not wrapped.array
        assert not np.shares_memory(latest.array, view)
        del latest
    for got, want in zip([kept.numpy(), view, wrapped.numpy()], before, strict=True):
        np.testing.assert_array_equal(got, want)


def test_the_recycled_buffer_matches_eager_after_state_changes() -> None:
    step, x = _step_and_state()
    compiled = dualflow.compile(step)
    for k in range(4):
        with dualflow.no_grad():
            dualflow.ops.assign(x, x * 0.5 + k)
        got = compiled().numpy()  # dropped right away: the next call may reuse the array
        np.testing.assert_array_equal(got, step().numpy())


def test_held_bytes_count_a_dropped_output_but_not_a_kept_one() -> None:
    from dualflow.bench.modes import held_bytes

    step, _ = _step_and_state()
    compiled = dualflow.compile(step)
    compiled()
    kept = compiled()
    base = held_bytes(compiled)
    del kept
    gc.collect()
    assert held_bytes(compiled) == base + N * 4


def test_assigning_each_result_to_one_name_alternates_two_arrays() -> None:
    # ``y = f(x)`` in a loop: the last output is still held during the call, the one before
    # is free and written again
    step, x = _step_and_state()
    compiled = dualflow.compile(step)
    y = compiled()
    # ids, not weakrefs (an array with a weakref is never taken): the plan keeps the last two
    # runs' arrays alive while it allocates, so a new array cannot take an old one's id
    ids = [id(y.array)]
    for k in range(6):
        with dualflow.no_grad():
            dualflow.ops.assign(x, x + 0.25)
        y = compiled()
        ids.append(id(y.array))
        np.testing.assert_array_equal(y.numpy(), step().numpy())
        if k >= 2:  # the first call traces (its result is eager's), plan runs follow
            assert ids[-1] == ids[-3] and ids[-1] != ids[-2]
