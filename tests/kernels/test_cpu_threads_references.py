"""The CPU worker threads keep no reference to finished work: a two-part kernel call's input
and output arrays die with the caller's last reference (the worker's loop variable held the last
job, 8 MiB after a small MLP's backward, until the next such call)."""

from __future__ import annotations

import functools
import weakref

import numpy as np
import pytest

import dualflow
from dualflow import ops
from dualflow.kernels.base import cpu_threads

pytestmark = pytest.mark.skipif(cpu_threads.threads() < 2, reason="one core: no worker threads")


def _fill(array: np.ndarray, value: float) -> None:
    array[...] = value


def test_a_finished_split_call_leaves_no_reference_to_its_arrays() -> None:
    parts = [np.empty(1000), np.empty(1000)]
    watch = [weakref.ref(p) for p in parts]
    cpu_threads.run_parts([functools.partial(_fill, p, 1.0) for p in parts])
    assert all(p[0] == 1.0 for p in parts)
    del parts
    assert [w() for w in watch] == [None, None]


def test_a_failing_part_leaves_no_reference_once_raised() -> None:
    def fail(array: np.ndarray) -> None:
        raise ValueError("part failed")

    parts = [np.empty(10), np.empty(10)]
    watch = [weakref.ref(p) for p in parts]
    with pytest.raises(ValueError, match="part failed"):
        cpu_threads.run_parts([functools.partial(fail, p) for p in parts])
    del parts
    assert [w() for w in watch] == [None, None]


def test_a_two_thread_kernel_calls_arrays_die_after_del() -> None:
    n = 2 * cpu_threads.threads() * (1 << 18)  # float32 loops split beyond 2**18 per thread
    x = dualflow.tensor(np.random.default_rng(0).normal(size=n).astype(np.float32))
    y = ops.tanh(x)
    watch = [weakref.ref(x.numpy()), weakref.ref(y.numpy())]
    del x, y
    assert [w() for w in watch] == [None, None]
