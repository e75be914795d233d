"""A plan writes a large output into the previous run's output array only when nothing references
that array any more: a kept output, a view of it or a Tensor of it is never overwritten, and
compiled results stay equal to eager ones."""

from __future__ import annotations

import gc
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
    ref = weakref.ref(first.array)
    del first
    gc.collect()
    second = compiled()
    assert ref() is not None and second.array is ref()
    np.testing.assert_array_equal(second.numpy(), step().numpy())


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
    refs = [weakref.ref(y.array)]
    for k in range(6):
        with dualflow.no_grad():
            dualflow.ops.assign(x, x + 0.25)
        y = compiled()
        refs.append(weakref.ref(y.array))
        np.testing.assert_array_equal(y.numpy(), step().numpy())
        if k >= 2:  # the first call traces (its result is eager's), plan runs follow
            assert refs[-1]() is refs[-3]() and refs[-1]() is not refs[-2]()
